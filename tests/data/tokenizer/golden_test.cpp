// HF `tokenizers` ids for GPT-2, Llama-3 and Qwen2 pipelines and for packtrain-trained tokenizers
// (tests/fixtures/tokenizer, made by scripts/make_tokenizer_fixtures.py), and for SentencePiece-style
// tokenizers in the configurations of Llama-2, Mistral v0.3, Gemma, an older Metaspace file and
// transformers' generic conversion (sp_*, made by scripts/make_sp_tokenizer_fixtures.py), and for
// WordPiece tokenizers as bert-base-uncased's, bert-base-cased's and with every option changed
// (wordpiece_*, made by scripts/make_wordpiece_fixtures.py): every string must encode to exactly HF's
// ids (with special tokens too, where the fixture has them) and decode to HF's text.
#include "core/file.h"
#include "data/tokenizer/tokenizer.h"
#include "fixtures.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

namespace pt {
namespace {

class GoldenTest : public testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, EncodesAndDecodesAsHuggingFace) {
  auto cases = nlohmann::json::parse(read_file(test::tokenizer_fixture(GetParam() + ".cases.json")));
  auto tokenizer = Tokenizer::from_file(test::tokenizer_fixture(cases["tokenizer"].get<std::string>()));
  ASSERT_GT(cases["cases"].size(), 200u);
  int mismatches = 0;
  for (const auto& c : cases["cases"]) {
    auto text = c["text"].get<std::string>();
    auto expected = c["ids"].get<std::vector<int32_t>>();
    auto ids = tokenizer.encode(text);
    if (ids != expected && ++mismatches <= 5)
      ADD_FAILURE() << fmt::format("text {:?}\n  HF:       {}\n  packtrain: {}", text, expected, ids);
    EXPECT_EQ(tokenizer.decode(ids), c["decoded"].get<std::string>()) << fmt::format("text {:?}", text);
    if (c.contains("ids_with_special_tokens")) {
      EXPECT_EQ(tokenizer.encode_with_special_tokens(text),
                c["ids_with_special_tokens"].get<std::vector<int32_t>>())
          << fmt::format("text {:?}", text);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GoldenTest,
                         testing::Values("gpt2", "gpt2_options", "llama3", "qwen2", "packtrain_llama3",
                                         "packtrain_qwen2", "sp_llama2", "sp_mistral", "sp_gemma",
                                         "sp_metaspace_legacy", "sp_converted", "wordpiece_bert_uncased",
                                         "wordpiece_bert_cased", "wordpiece_options"));

}  // namespace
}  // namespace pt
