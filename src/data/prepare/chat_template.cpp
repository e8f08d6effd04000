#include "data/prepare/chat_template.h"

#include "core/error.h"
#include "core/file.h"
#include "data/prepare/metadata.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <array>
#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace pt {

namespace {

constexpr std::array<const char*, 7> kSpecialTokens = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                       "pad_token", "cls_token", "mask_token"};

struct Template {
  std::string file, text;
};
using Templates = std::map<std::string, Template>;  // by name

nlohmann::json read_json(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({}); give the model's tokenizer_config.json", path, e.what());
  }
}

// The "chat_template" entry of a tokenizer_config.json: a string, or a list of {"name", "template"}.
Templates config_templates(const std::string& path, const nlohmann::json& config) {
  Templates out;
  auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return out;
  if (it->is_string()) {
    out["default"] = {path, it->get<std::string>()};
    return out;
  }
  if (it->is_array()) {
    for (const auto& t : *it) {
      if (!t.is_object() || !t.contains("name") || !t.contains("template") || !t["name"].is_string() ||
          !t["template"].is_string())
        fail(
            "{}: \"chat_template\" is a list whose items are not all {{\"name\": ..., \"template\": ...}} "
            "strings; fix the file",
            path);
      out[t["name"].get<std::string>()] = {path, t["template"].get<std::string>()};
    }
    return out;
  }
  fail("{}: \"chat_template\" is {}, expected a string or a list of {{\"name\", \"template\"}}", path,
       it->type_name());
}

// A model directory's templates, as transformers finds them: its .jinja files, else its config's entry.
Templates directory_templates(const fs::path& dir) {
  Templates out;
  if (auto file = dir / "chat_template.jinja"; fs::is_regular_file(file))
    out["default"] = {file.string(), read_file(file.string())};
  if (auto extra = dir / "additional_chat_templates"; fs::is_directory(extra))
    for (const auto& entry : fs::directory_iterator(extra))
      if (entry.is_regular_file() && entry.path().extension() == ".jinja")
        out[entry.path().stem().string()] = {entry.path().string(), read_file(entry.path().string())};
  if (auto config = dir / "tokenizer_config.json"; out.empty() && fs::is_regular_file(config))
    out = config_templates(config.string(), read_json(config.string()));
  return out;
}

std::string names_of(const Templates& templates) {
  std::string out;
  for (const auto& [name, t] : templates) out += (out.empty() ? "" : ", ") + name;
  return out;
}

// Special tokens as transformers passes them to templates: plain strings, from strings or AddedToken objects.
nlohmann::ordered_json special_tokens(const std::string& path, const nlohmann::json& config) {
  auto out = nlohmann::ordered_json::object();
  for (const char* key : kSpecialTokens) {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) continue;
    if (it->is_string()) {
      out[key] = it->get<std::string>();
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      out[key] = (*it)["content"].get<std::string>();
    } else {
      fail("{}: \"{}\" is {}, expected a string or an object with a \"content\" string", path, key,
           it->type_name());
    }
  }
  return out;
}

ChatTemplateChoice model_choice(Templates templates, std::string_view name, std::string special_tokens_file,
                                bool by_flag, const std::string& tokenizer_path, const Tokenizer& tokenizer) {
  std::string wanted = name.empty() ? "default" : std::string(name);
  auto it = templates.find(wanted);
  if (it == templates.end()) {
    const auto& where = templates.begin()->second.file;
    if (name.empty())
      fail("{}: the chat templates are named {} and none is \"default\"; pick one with --chat-template-name",
           where, names_of(templates));
    fail("--chat-template-name {}: {} has no chat template of that name; its templates: {}", name, where,
         names_of(templates));
  }
  ChatTemplateChoice c;
  c.layout = ChatLayout::kModel;
  c.by_flag = by_flag;
  c.name = it->first;
  c.file = it->second.file;
  c.source = std::move(it->second.text);
  c.generation_blocks = has_generation_blocks(c.source);
  if (!special_tokens_file.empty()) {
    c.special_tokens = special_tokens(special_tokens_file, read_json(special_tokens_file));
    c.special_tokens_file = std::move(special_tokens_file);
  }
  // A special token the template writes must be one token, else it would be tokenized as text: the sign
  // of a tokenizer_config.json from another model than the tokenizer.
  for (const auto& [key, value] : c.special_tokens.items())
    if (c.source.find(key) != std::string::npos && !tokenizer.token_to_id(value.get<std::string>()))
      fail(
          "{}: {} \"{}\" is not a token of the tokenizer {}; give the chat template of the tokenizer's own "
          "model",
          c.special_tokens_file, key, value.get<std::string>(), tokenizer_path);
  return c;
}

std::optional<int32_t> named_id(const ChatTemplateChoice& c, const Tokenizer& tokenizer, const char* key,
                                std::optional<int32_t> by_name) {
  auto it = c.special_tokens.find(key);
  return it == c.special_tokens.end() ? by_name : tokenizer.token_to_id(it->get<std::string>());
}

std::string config_beside(const fs::path& dir) {
  auto config = dir / "tokenizer_config.json";
  return fs::is_regular_file(config) ? config.string() : "";
}

}  // namespace

std::optional<int32_t> model_bos_id(const ChatTemplateChoice& c, const Tokenizer& tokenizer) {
  return named_id(c, tokenizer, "bos_token", tokenizer.bos_id());
}

std::optional<int32_t> model_eos_id(const ChatTemplateChoice& c, const Tokenizer& tokenizer) {
  return named_id(c, tokenizer, "eos_token", tokenizer.eos_id());
}

bool has_generation_blocks(std::string_view s) {
  auto space = [&](size_t& q) {
    while (q < s.size() && std::string_view(" \t\n\r\f\v").find(s[q]) != std::string_view::npos) ++q;
  };
  for (size_t pos = s.find("{%"); pos != std::string_view::npos; pos = s.find("{%", pos + 2)) {
    size_t q = pos + 2;
    if (q < s.size() && s[q] == '-') ++q;
    space(q);
    if (s.substr(q, 10) != "generation") continue;
    q += 10;
    space(q);
    if (q < s.size() && s[q] == '-') ++q;
    if (s.substr(q, 2) == "%}") return true;
  }
  return false;
}

ChatTemplateChoice choose_chat_template(std::string_view flag, std::string_view name,
                                        const std::string& tokenizer_path, const Tokenizer& tokenizer) {
  bool im = tokenizer.token_to_id("<|im_start|>") && tokenizer.token_to_id("<|im_end|>");
  auto tokenizer_dir = fs::path(tokenizer_path).parent_path();
  if (tokenizer_dir.empty()) tokenizer_dir = ".";
  if (flag == "chatml" || flag == "plain") {
    if (!name.empty())
      fail("--chat-template-name {} picks among a model's chat templates; --chat-template {} has none", name,
           flag);
    if (flag == "chatml" && !im)
      fail(
          "--chat-template chatml: the tokenizer {} has no <|im_start|> and <|im_end|> tokens; use the "
          "model's chat template or --chat-template plain",
          tokenizer_path);
    ChatTemplateChoice c;
    c.layout = flag == "chatml" ? ChatLayout::kChatML : ChatLayout::kPlain;
    c.by_flag = true;
    return c;
  }
  if (flag.empty() || flag == "auto") {
    auto templates = directory_templates(tokenizer_dir);
    if (!templates.empty())
      return model_choice(std::move(templates), name, config_beside(tokenizer_dir), false, tokenizer_path,
                          tokenizer);
    if (!name.empty())
      fail(
          "--chat-template-name {}: there is no chat template beside the tokenizer {}; name the model's "
          "directory with --chat-template",
          name, tokenizer_path);
    ChatTemplateChoice c;
    c.layout = im ? ChatLayout::kChatML : ChatLayout::kPlain;
    return c;
  }

  fs::path path(flag);
  if (fs::is_directory(path)) {
    auto templates = directory_templates(path);
    if (templates.empty())
      fail(
          "--chat-template {}: the directory holds no chat template (no chat_template.jinja, and no "
          "\"chat_template\" in a tokenizer_config.json); give the model's directory",
          flag);
    return model_choice(std::move(templates), name, config_beside(path), true, tokenizer_path, tokenizer);
  }
  if (!fs::is_regular_file(path))
    fail(
        "--chat-template {}: no such file or directory; give a model directory, its tokenizer_config.json, "
        "a .jinja file, chatml or plain",
        flag);
  if (path.extension() == ".jinja") {
    Templates templates{{"default", {path.string(), read_file(path.string())}}};
    auto config = config_beside(path.parent_path().empty() ? fs::path(".") : path.parent_path());
    if (config.empty()) config = config_beside(tokenizer_dir);
    return model_choice(std::move(templates), name, config, true, tokenizer_path, tokenizer);
  }
  auto templates = config_templates(path.string(), read_json(path.string()));
  if (templates.empty()) {
    bool beside = fs::is_regular_file(path.parent_path() / "chat_template.jinja");
    fail("--chat-template {}: the file has no \"chat_template\"{}", flag,
         beside ? "; the template is in chat_template.jinja beside it: give the directory"
                : "; give the tokenizer_config.json of a model with a chat template");
  }
  return model_choice(std::move(templates), name, path.string(), true, tokenizer_path, tokenizer);
}

std::string_view layout_name(ChatLayout layout) {
  switch (layout) {
    case ChatLayout::kChatML:
      return "chatml";
    case ChatLayout::kPlain:
      return "plain";
    case ChatLayout::kModel:
      return "model";
  }
  return "?";
}

std::string describe(const ChatTemplateChoice& c) {
  std::string_view why = c.by_flag ? "--chat-template" : "found beside the tokenizer";
  switch (c.layout) {
    case ChatLayout::kChatML:
      return fmt::format("built-in ChatML layout ({})",
                         c.by_flag ? why : "no chat template beside the tokenizer, which has <|im_start|>");
    case ChatLayout::kPlain:
      return fmt::format(
          "built-in plain layout ({})",
          c.by_flag ? why : "no chat template beside the tokenizer, which has no <|im_start|>");
    case ChatLayout::kModel:
      break;
  }
  return fmt::format("the model's chat template \"{}\" from {} ({}); loss on {}", c.name, c.file, why,
                     c.generation_blocks ? "its {% generation %} blocks"
                                         : "each assistant message, found by rendering the conversation "
                                           "message by message");
}

nlohmann::ordered_json to_json(const ChatTemplateChoice& c) {
  nlohmann::ordered_json out = {{"layout", layout_name(c.layout)},
                                {"chosen_by", c.by_flag ? "--chat-template" : "auto"}};
  if (c.layout != ChatLayout::kModel) return out;
  out["name"] = c.name;
  out["file"] = c.file;
  out["xxh64"] = hex64(XXH64(c.source.data(), c.source.size(), 0));
  out["assistant_loss"] = c.generation_blocks ? "generation-blocks" : "prefix-renders";
  out["special_tokens_file"] = c.special_tokens_file.empty() ? nlohmann::ordered_json(nullptr)
                                                             : nlohmann::ordered_json(c.special_tokens_file);
  out["special_tokens"] = c.special_tokens;
  return out;
}

}  // namespace pt
