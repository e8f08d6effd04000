// Chat records laid out with a model's own chat template: where the template comes from, what the
// template sees, the tokens and assistant-only loss against transformers and TRL (fixtures made by
// tests/fixtures/prepare/chat/make_fixtures.py), templates that fail, and what metadata.json records.
#include "prepare_test_util.h"

#include "core/error.h"
#include "data/prepare/chat_template.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <xxhash.h>

namespace pt {
namespace {

using test::to_vector;

std::string chat_fixture(const std::string& name) {
  return std::string(PACKTRAIN_FIXTURES) + "/prepare/chat/" + name;
}

class ChatTemplateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A model directory under dir_: the fixture tokenizer, a tokenizer_config.json and other files.
  std::string model(const std::string& name, const nlohmann::ordered_json& config,
                    const std::vector<std::pair<std::string, std::string>>& files = {},
                    const std::string& tokenizer = "tokenizer.json") {
    auto dir = dir_ / name;
    std::filesystem::create_directories(dir);
    write_file_atomic((dir / "tokenizer.json").string(), read_file(chat_fixture(tokenizer)));
    if (!config.is_null()) write_file_atomic((dir / "tokenizer_config.json").string(), config.dump());
    for (const auto& [path, text] : files) {
      std::filesystem::create_directories((dir / path).parent_path());
      write_file_atomic((dir / path).string(), text);
    }
    return dir.string();
  }

  std::string error_of(const PrepareOptions& o) {
    try {
      prepare_dataset(o);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  static std::string jsonl(const std::vector<nlohmann::ordered_json>& records) {
    std::string out;
    for (const auto& r : records) out += r.dump() + "\n";
    return out;
  }

  std::filesystem::path dir_;
  Tokenizer tok_ = Tokenizer::from_file(chat_fixture("tokenizer.json"));
};

// Every case of the fixture (byte-level and SentencePiece-style tokenizers): the template found beside the
// tokenizer (auto), rendered and tokenized as transformers does, loss as transformers' assistant mask
// (generation blocks) or TRL's prompt-completion mask per assistant message (otherwise); templates that raise
// skip the record with their message.
TEST_F(ChatTemplateTest, TokensAndLossEqualTransformersAndTrl) {
  auto fixture = nlohmann::ordered_json::parse(read_file(chat_fixture("cases.json")));
  ASSERT_GE(fixture["cases"].size(), 8u);
  for (const auto& c : fixture["cases"]) {
    auto name = c["name"].get<std::string>();
    SCOPED_TRACE(name);
    std::vector<nlohmann::ordered_json> records;
    for (const auto& r : c["records"]) records.push_back({{"messages", r["messages"]}});
    auto o = test::quiet_options(dir_, {test::write_input(dir_, name + ".jsonl", jsonl(records))});
    o.tokenizer_path = model(name, c["config"], {}, c["tokenizer"].get<std::string>()) + "/tokenizer.json";
    if (!c["template_name"].is_null()) o.chat_template_name = c["template_name"].get<std::string>();
    auto report = prepare_dataset(o);
    const auto& chat = report.metadata["tokenizer"]["chat_template"];
    EXPECT_EQ(chat["layout"], "model");
    EXPECT_EQ(chat["chosen_by"], "auto");
    EXPECT_EQ(chat["name"], c["template_name"].is_null() ? "default" : c["template_name"]);

    auto ds = PreparedDataset::open(o.output_dir);
    int64_t example = 0, errors = 0, unstable = 0, skipped_unstable = 0;
    for (const auto& r : c["records"]) {
      SCOPED_TRACE(r["messages"].dump());
      if (r.contains("error")) {
        ++errors;
        continue;
      }
      bool is_unstable = r.contains("unstable") && !r["unstable"].empty();
      if (r.contains("trl_agrees")) {  // the fixture's own check, TRL's mask per message on tokens
        // Equal, but where the case says why not: there the messages packtrain refuses.
        EXPECT_EQ(r["trl_agrees"].get<bool>(), c["trl_differs"].is_null() || !is_unstable)
            << c["trl_differs"];
      }
      bool any_loss = false;
      for (const auto& m : r["loss_mask"]) any_loss |= m.get<int>() != 0;
      unstable += is_unstable;
      if (!any_loss) {
        skipped_unstable += is_unstable;
        continue;
      }
      ASSERT_LT(example, ds.train().size());
      EXPECT_EQ(to_vector(ds.train().example(example).tokens), r["input_ids"].get<std::vector<uint32_t>>());
      EXPECT_EQ(to_vector(ds.train().example(example).loss_mask), r["loss_mask"].get<std::vector<uint8_t>>());
      ++example;
    }
    EXPECT_EQ(example, ds.train().size());
    const auto& kinds = report.metadata["bad_records"]["by_kind"];
    EXPECT_EQ(kinds.value("template-error", 0), errors);
    EXPECT_EQ(kinds.value("unstable-template", 0), unstable);
    EXPECT_EQ(report.metadata["records"]["kept"].get<int64_t>(),
              static_cast<int64_t>(c["records"].size()) - errors - skipped_unstable);
  }
}

TEST_F(ChatTemplateTest, TheTemplateSeesWhatTransformersPasses) {
  // Special tokens as strings or AddedToken objects, null ones absent; tools and documents none; messages
  // with null keys dropped and reasoning also under reasoning_content and thinking; any role.
  const std::string source =
      "{{ add_generation_prompt }}{{ bos_token }}{{ eos_token }}{{ pad_token is defined }}"
      "{{ unk_token is defined }}{{ tools is none }}{{ documents is none }}"
      "{% for m in messages %}<|im_start|>{{ m.role }}{% if m.tool_calls is defined %} calls{% endif %}"
      "{{ m | length }}<|im_end|>{% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
      "{% if m.reasoning_content is defined %} ({{ m.reasoning_content }}/{{ m.thinking }}){% endif %}"
      "{% endgeneration %}{% else %}{{ m.content }}{% endif %}<|im_end|>{% endfor %}";
  nlohmann::ordered_json config = {{"chat_template", source},
                                   {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}}},
                                   {"eos_token", "</s>"},
                                   {"pad_token", nullptr}};
  nlohmann::ordered_json record = {{"messages",
                                    {{{"role", "system"}, {"content", "S"}},
                                     {{"role", "user"}, {"content", "q"}, {"tool_calls", nullptr}},
                                     {{"role", "tool"}, {"content", "t"}},
                                     {{"role", "assistant"}, {"content", "a"}, {"reasoning", "why"}}}}};
  auto o = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl", jsonl({record}))});
  o.tokenizer_path = model("m", config) + "/tokenizer.json";
  prepare_dataset(o);
  auto ds = PreparedDataset::open(o.output_dir);
  ASSERT_EQ(ds.train().size(), 1);
  std::string expected =
      "False<s></s>FalseFalseTrueTrue<|im_start|>system2<|im_end|>S<|im_end|><|im_start|>user2<|im_end|>q"
      "<|im_end|><|im_start|>tool2<|im_end|>t<|im_end|><|im_start|>assistant5<|im_end|>a (why/why)<|im_end|>";
  auto tokens = to_vector(ds.train().example(0).tokens);
  EXPECT_EQ(tokens, test::ids(tok_.encode(expected)));  // no EOS of our own
  std::vector<int32_t> loss_tokens;
  auto mask = to_vector(ds.train().example(0).loss_mask);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (mask[i]) loss_tokens.push_back(static_cast<int32_t>(tokens[i]));
  EXPECT_EQ(tok_.decode(loss_tokens), "a (why/why)");
}

TEST_F(ChatTemplateTest, BosIsAddedOnlyWhereTheTemplateWritesNone) {
  nlohmann::ordered_json record = {
      {"messages", {{{"role", "user"}, {"content", "q"}}, {{"role", "assistant"}, {"content", "a"}}}}};
  auto input = test::write_input(dir_, "in.jsonl", jsonl({record}));
  auto bos = tok_.token_to_id("<s>");
  ASSERT_TRUE(bos);
  for (bool writes_bos : {true, false}) {
    SCOPED_TRACE(writes_bos);
    std::string source = std::string(writes_bos ? "{{ bos_token }}" : "") +
                         "{% for m in messages %}{{ m.role }}: {{ m.content }}<|im_end|>{% endfor %}";
    auto o = test::quiet_options(dir_, {input});
    o.tokenizer_path =
        model(fmt::format("m{}", writes_bos), {{"chat_template", source}, {"bos_token", "<s>"}}) +
        "/tokenizer.json";
    o.add_bos = true;
    prepare_dataset(o);
    auto tokens = to_vector(PreparedDataset::open(o.output_dir).train().example(0).tokens);
    auto body = test::ids(tok_.encode("<s>user: q<|im_end|>assistant: a<|im_end|>"));
    EXPECT_EQ(tokens, body);  // the template's BOS, or ours: one either way
  }
}

TEST_F(ChatTemplateTest, TemplateErrorsAreBadRecordsNamingTheTemplateAndTheRecord) {
  std::string source =
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system turns here') }}"
      "{% endif %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}";
  nlohmann::ordered_json good = {
      {"messages", {{{"role", "user"}, {"content", "q"}}, {{"role", "assistant"}, {"content", "a"}}}}};
  nlohmann::ordered_json bad = good;
  bad["messages"].insert(bad["messages"].begin(),
                         nlohmann::ordered_json::object({{"role", "system"}, {"content", "s"}}));
  auto input = test::write_input(dir_, "in.jsonl", jsonl({good, bad}));
  auto o = test::quiet_options(dir_, {input});
  auto dir = model("m", {{"chat_template", source}});
  o.tokenizer_path = dir + "/tokenizer.json";
  auto m = prepare_dataset(o).metadata;
  EXPECT_EQ(m["records"]["kept"], 1);
  EXPECT_EQ(m["bad_records"]["by_kind"]["template-error"], 1);
  o.strict = true;
  auto message = error_of(o);
  EXPECT_NE(message.find(input + ":2"), std::string::npos) << message;
  EXPECT_NE(message.find("no system turns here"), std::string::npos) << message;
  EXPECT_NE(message.find("tokenizer_config.json"), std::string::npos) << message;  // the template's origin
  EXPECT_NE(message.find("[template-error]"), std::string::npos) << message;

  // A template that does not parse stops prepare before any record, naming where it came from.
  o.strict = false;
  o.tokenizer_path =
      model("broken", {{"chat_template", "{% for m in messages %}{{ m.content }}"}}) + "/tokenizer.json";
  message = error_of(o);
  EXPECT_NE(message.find("broken/tokenizer_config.json"), std::string::npos) << message;
}

TEST_F(ChatTemplateTest, RolesAreTheTemplatesToCheckButEachMessageNeedsOne) {
  auto o = test::quiet_options(
      dir_,
      {test::write_input(
          dir_, "in.jsonl",
          R"({"messages": [{"role": "user", "content": "q"}, {"content": "a"}]})"
          "\n"
          R"({"messages": [{"role": "user", "content": "q"}]})"
          "\n"
          R"({"messages": [{"role": "human", "content": "q"}, {"role": "assistant", "content": [{"type": "text", "text": "a"}]}]})"
          "\n")});
  o.tokenizer_path =
      model("m", {{"chat_template",
                   "{% for m in messages %}{{ m.role }}{{ m.content if m.content is string else "
                   "m.content[0].text }}<|im_end|>{% endfor %}"}}) +
      "/tokenizer.json";
  auto m = prepare_dataset(o).metadata;
  EXPECT_EQ(m["records"]["kept"], 1);  // any role, content parts
  EXPECT_EQ(m["bad_records"]["by_kind"]["missing-field"], 1);
  EXPECT_EQ(m["bad_records"]["by_kind"]["empty-example"], 1);  // no assistant message
}

// Texts and prompt-completion records keep their layout, ending with the EOS the model's config names.
TEST_F(ChatTemplateTest, OtherRecordsEndWithTheModelsEos) {
  auto o = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl",
                                                        R"({"text": "abc"})"
                                                        "\n"
                                                        R"({"prompt": "p", "completion": "c"})"
                                                        "\n")});
  o.tokenizer_path =
      model("m", {{"chat_template", "{{ messages }}"}, {"eos_token", "</s>"}}) + "/tokenizer.json";
  prepare_dataset(o);
  auto ds = PreparedDataset::open(o.output_dir);
  ASSERT_EQ(ds.train().size(), 2);
  auto eos = tok_.token_to_id("</s>");
  ASSERT_TRUE(eos);
  ASSERT_NE(eos, tok_.eos_id());  // found by name: <|endoftext|>
  EXPECT_EQ(to_vector(ds.train().example(0).tokens), test::ids(tok_.encode("abc</s>")));
  EXPECT_EQ(to_vector(ds.train().example(1).tokens), test::ids(tok_.encode("pc</s>")));
  EXPECT_EQ(to_vector(ds.train().example(1).loss_mask), (std::vector<uint8_t>{0, 1, 1}));
}

// Loss on the stretch of each assistant message's rendering that the whole conversation shares.
class PrefixRenderTest : public ChatTemplateTest {
 protected:
  // Prepares the two-turn conversation with the template; returns the loss tokens' text.
  std::string loss_text(const std::string& source, bool strict = false) {
    nlohmann::ordered_json record = {{"messages",
                                      {{{"role", "user"}, {"content", "q1"}},
                                       {{"role", "assistant"}, {"content", "a1"}},
                                       {{"role", "user"}, {"content", "q2"}},
                                       {{"role", "assistant"}, {"content", "a2"}}}}};
    auto o = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl", jsonl({record}))});
    o.tokenizer_path = model(fmt::format("m{}", models_++), {{"chat_template", source}}) + "/tokenizer.json";
    o.strict = strict;
    metadata_ = prepare_dataset(o).metadata;
    auto ds = PreparedDataset::open(o.output_dir);
    auto example = ds.train().example(0);
    std::vector<int32_t> loss_tokens;
    for (size_t i = 0; i < example.tokens.size(); ++i)
      if (example.loss_mask[i]) loss_tokens.push_back(static_cast<int32_t>(example.tokens[i]));
    return tok_.decode(loss_tokens);
  }

  int models_ = 0;
  nlohmann::ordered_json metadata_;
};

TEST_F(PrefixRenderTest, EachAssistantMessageWithItsEndOfTurn) {
  EXPECT_EQ(
      loss_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
      "a1<|im_end|>\na2<|im_end|>\n");
  EXPECT_EQ(metadata_["tokenizer"]["chat_template"]["assistant_loss"], "prefix-renders");
  EXPECT_EQ(metadata_["bad_records"]["total"], 0);
}

TEST_F(PrefixRenderTest, WhatOnlyTheEndOfTheConversationGetsIsLeftOutOfEarlierTurns) {
  // EOS after the last turn only (Phi-3.5's template): earlier turns end at their <|im_end|>.
  EXPECT_EQ(loss_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}"
                      "{% if add_generation_prompt %}<|im_start|>assistant\n{% else %}</s>{% endif %}"),
            "a1<|im_end|>a2<|im_end|></s>");
  EXPECT_EQ(metadata_["bad_records"]["total"], 0);
  // The generation prompt opens a thinking block the messages do not have (DeepSeek-R1's distills): the
  // loss starts where prompt and message part, as TRL's does.
  EXPECT_EQ(loss_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>{% endfor %}"
                      "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"),
            "a1<|im_end|>a2<|im_end|>");
}

TEST_F(PrefixRenderTest, MessagesRenderedOtherwiseOnceTheConversationGoesOnCarryNoLoss) {
  std::string source =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' and not loop.last "
      "%}(elided)"
      "{% else %}{{ m.content }}{% endif %}<|im_end|>{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  EXPECT_EQ(loss_text(source), "a2<|im_end|>");
  EXPECT_EQ(metadata_["bad_records"]["by_kind"]["unstable-template"], 1);
  try {
    loss_text(source, true);
    ADD_FAILURE() << "--strict";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not prefix-stable for assistant message 1"), std::string::npos)
        << e.what();
  }
}

TEST_F(ChatTemplateTest, ASpecialTokenOfAnotherModelStopsPrepareWhereItWouldBeUsed) {
  auto o = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl",
                                                        R"({"text": "abc"})"
                                                        "\n")});
  o.tokenizer_path =
      model("m", {{"chat_template", "{{ messages }}"}, {"eos_token", "<|foreign|>"}}) + "/tokenizer.json";
  auto message = error_of(o);
  EXPECT_NE(message.find("eos_token \"<|foreign|>\""), std::string::npos) << message;
  EXPECT_NE(message.find("--no-eos"), std::string::npos) << message;
  o.add_eos = false;
  auto m = prepare_dataset(o).metadata;
  EXPECT_EQ(m["tokenizer"]["eos_id"], nullptr);
}

// Where the template comes from.
class ChooseTemplateTest : public ChatTemplateTest {
 protected:
  ChatTemplateChoice choose(const std::string& flag, const std::string& name = "",
                            const std::string& tokenizer = "") {
    return choose_chat_template(flag, name, tokenizer.empty() ? chat_fixture("tokenizer.json") : tokenizer,
                                tok_);
  }
  std::string choose_error(const std::string& flag, const std::string& name = "",
                           const std::string& tokenizer = "") {
    try {
      choose(flag, name, tokenizer);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(ChooseTemplateTest, AStringTemplateWithSpecialTokensAsStringsOrObjects) {
  auto dir = model("m", {{"chat_template", "{{ bos_token }}{{ eos_token }}"},
                         {"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}, {"rstrip", false}}},
                         {"eos_token", "</s>"},
                         {"unk_token", nullptr},
                         {"pad_token", {{"content", "<|endoftext|>"}}},
                         {"additional_special_tokens", {"<|im_start|>"}}});
  for (const auto& flag : {dir, dir + "/tokenizer_config.json"}) {
    auto c = choose(flag);
    EXPECT_EQ(c.layout, ChatLayout::kModel);
    EXPECT_TRUE(c.by_flag);
    EXPECT_EQ(c.name, "default");
    EXPECT_EQ(c.file, dir + "/tokenizer_config.json");
    EXPECT_EQ(c.source, "{{ bos_token }}{{ eos_token }}");
    EXPECT_EQ(c.special_tokens,
              nlohmann::ordered_json(
                  {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"pad_token", "<|endoftext|>"}}));
    EXPECT_FALSE(c.generation_blocks);
  }
}

TEST_F(ChooseTemplateTest, NamedTemplatesDefaultUnlessANameIsGiven) {
  nlohmann::ordered_json list = {{{"name", "default"}, {"template", "D"}},
                                 {{"name", "tool_use"}, {"template", "T"}}};
  auto dir = model("m", {{"chat_template", list}});
  EXPECT_EQ(choose(dir).source, "D");
  auto c = choose(dir, "tool_use");
  EXPECT_EQ(c.source, "T");
  EXPECT_EQ(c.name, "tool_use");
  auto message = choose_error(dir, "rag");
  EXPECT_NE(message.find("--chat-template-name rag"), std::string::npos) << message;
  EXPECT_NE(message.find("default, tool_use"), std::string::npos) << message;

  auto no_default = model(
      "n", {{"chat_template", {{{"name", "a"}, {"template", "A"}}, {{"name", "b"}, {"template", "B"}}}}});
  message = choose_error(no_default);
  EXPECT_NE(message.find("none is \"default\""), std::string::npos) << message;
  EXPECT_NE(message.find("a, b"), std::string::npos) << message;
  EXPECT_EQ(choose(no_default, "b").source, "B");
  // A single template is "default" and has no other name.
  EXPECT_NE(choose_error(model("s", {{"chat_template", "S"}}), "other").find("its templates: default"),
            std::string::npos);
}

TEST_F(ChooseTemplateTest, JinjaFilesWinOverTheConfigAsInTransformers) {
  auto dir = model("m", {{"chat_template", "from config"}, {"eos_token", "</s>"}},
                   {{"chat_template.jinja", "from file {{ eos_token }}"},
                    {"additional_chat_templates/tool_use.jinja", "tools"}});
  auto c = choose(dir);
  EXPECT_EQ(c.source, "from file {{ eos_token }}");
  EXPECT_EQ(c.file, dir + "/chat_template.jinja");
  EXPECT_EQ(c.special_tokens_file, dir + "/tokenizer_config.json");
  EXPECT_EQ(c.special_tokens["eos_token"], "</s>");
  EXPECT_EQ(choose(dir, "tool_use").source, "tools");
  // A .jinja file alone: its special tokens from the tokenizer_config.json beside it.
  c = choose(dir + "/chat_template.jinja");
  EXPECT_EQ(c.source, "from file {{ eos_token }}");
  EXPECT_EQ(c.special_tokens["eos_token"], "</s>");
  // ... or beside the tokenizer when there is none beside it.
  write_file_atomic((dir_ / "loose.jinja").string(), "{{ eos_token }}");
  c = choose((dir_ / "loose.jinja").string(), "", dir + "/tokenizer.json");
  EXPECT_EQ(c.special_tokens_file, dir + "/tokenizer_config.json");
  // A config naming its template nowhere but in the .jinja beside it says so.
  auto jinja_only = model("j", {{"eos_token", "</s>"}}, {{"chat_template.jinja", "J"}});
  EXPECT_EQ(choose(jinja_only).source, "J");
  auto message = choose_error(jinja_only + "/tokenizer_config.json");
  EXPECT_NE(message.find("chat_template.jinja beside it"), std::string::npos) << message;
}

TEST_F(ChooseTemplateTest, AutoTakesTheTemplateBesideTheTokenizerAndAFlagWins) {
  auto dir = model("m", {{"chat_template", "{{ messages }}"}});
  auto tokenizer = dir + "/tokenizer.json";
  auto c = choose("auto", "", tokenizer);
  EXPECT_EQ(c.layout, ChatLayout::kModel);
  EXPECT_FALSE(c.by_flag);
  EXPECT_EQ(choose("chatml", "", tokenizer).layout, ChatLayout::kChatML);
  EXPECT_EQ(choose("plain", "", tokenizer).layout, ChatLayout::kPlain);
  auto other = model("o", {{"chat_template", "other"}});
  EXPECT_EQ(choose(other, "", tokenizer).source, "other");
  // Without a template beside it (none, or a config without one): the built-in layouts, as before.
  auto bare = model("bare", {{"eos_token", "</s>"}});
  EXPECT_EQ(choose("auto", "", bare + "/tokenizer.json").layout, ChatLayout::kChatML);
  EXPECT_EQ(choose("auto", "", test::fixture_tokenizer()).layout, ChatLayout::kChatML);
  auto without_im = test::tokenizer_variant(dir_, {"<|im_start|>", "<|im_end|>"}, {});
  auto plain_tok = Tokenizer::from_file(without_im);
  EXPECT_EQ(choose_chat_template("auto", "", without_im, plain_tok).layout, ChatLayout::kPlain);
  try {
    choose_chat_template("chatml", "", without_im, plain_tok);
    ADD_FAILURE() << "chatml without <|im_start|>";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no <|im_start|>"), std::string::npos) << e.what();
  }
}

TEST_F(ChooseTemplateTest, UnusableChoicesAreErrorsNamingTheFlagAndFile) {
  auto message = choose_error((dir_ / "missing").string());
  EXPECT_NE(message.find("no such file or directory"), std::string::npos) << message;
  message = choose_error(model("empty", nullptr));
  EXPECT_NE(message.find("holds no chat template"), std::string::npos) << message;
  write_file_atomic((dir_ / "bad.json").string(), "{not json");
  message = choose_error((dir_ / "bad.json").string());
  EXPECT_NE(message.find("bad.json: not valid JSON"), std::string::npos) << message;
  message = choose_error(model("mistyped", {{"chat_template", 3}}));
  EXPECT_NE(message.find("\"chat_template\" is number"), std::string::npos) << message;
  message = choose_error(model("token", {{"chat_template", "x"}, {"eos_token", 5}}));
  EXPECT_NE(message.find("\"eos_token\" is number"), std::string::npos) << message;
  message = choose_error("chatml", "x");
  EXPECT_NE(message.find("--chat-template-name x"), std::string::npos) << message;
  message = choose_error("auto", "x", test::fixture_tokenizer());
  EXPECT_NE(message.find("no chat template beside the tokenizer"), std::string::npos) << message;
  // A special token the template writes must be a token: else the config is another model's.
  message =
      choose_error(model("foreign", {{"chat_template", "{{ bos_token }}"}, {"bos_token", "<|foreign|>"}}));
  EXPECT_NE(message.find("bos_token \"<|foreign|>\" is not a token"), std::string::npos) << message;
  EXPECT_NO_THROW(choose(model("unused", {{"chat_template", "x"}, {"bos_token", "<|foreign|>"}})));
}

TEST(GenerationBlocks, SpelledAsTransformersLooksForThem) {
  EXPECT_TRUE(has_generation_blocks("a{% generation %}b{% endgeneration %}"));
  EXPECT_TRUE(has_generation_blocks("{%- generation -%}"));
  EXPECT_TRUE(has_generation_blocks("{%generation%}"));
  EXPECT_TRUE(has_generation_blocks("{%\n  generation\t%}"));
  EXPECT_FALSE(has_generation_blocks("{% endgeneration %}"));
  EXPECT_FALSE(has_generation_blocks("{{ generation }}"));
  EXPECT_FALSE(has_generation_blocks("{% generation x %}"));
  EXPECT_FALSE(has_generation_blocks("{% set generation = 1 %}"));
}

TEST_F(ChatTemplateTest, MetadataRecordsTheChoice) {
  std::string source = "{% for m in messages %}{{ m.content }}<|im_end|>{% endfor %}";
  auto dir = model("m", {{"chat_template", source}, {"eos_token", "</s>"}});
  auto o =
      test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl",
                                                   R"({"messages": [{"role": "assistant", "content": "a"}]})"
                                                   "\n")});
  o.tokenizer_path = dir + "/tokenizer.json";
  o.chat_template = dir;
  auto m = prepare_dataset(o).metadata;
  auto on_disk = nlohmann::ordered_json::parse(read_file(o.output_dir + "/metadata.json"));
  EXPECT_EQ(on_disk["tokenizer"]["chat_template"], m["tokenizer"]["chat_template"]);
  EXPECT_EQ(m["tokenizer"]["chat_template"],
            nlohmann::ordered_json({{"layout", "model"},
                                    {"chosen_by", "--chat-template"},
                                    {"name", "default"},
                                    {"file", dir + "/tokenizer_config.json"},
                                    {"xxh64", fmt::format("{:016x}", XXH64(source.data(), source.size(), 0))},
                                    {"assistant_loss", "prefix-renders"},
                                    {"special_tokens_file", dir + "/tokenizer_config.json"},
                                    {"special_tokens", {{"eos_token", "</s>"}}}}));
  EXPECT_EQ(m["tokenizer"]["eos_id"], *tok_.token_to_id("</s>"));  // the config's, not found by name
  EXPECT_EQ(m["options"]["chat_template"], dir);
  EXPECT_EQ(m["options"]["chat_template_name"], "");
}

}  // namespace
}  // namespace pt
