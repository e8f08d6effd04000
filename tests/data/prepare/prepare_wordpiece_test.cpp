// `prepare` with a WordPiece (BERT) tokenizer. prepare applies no tokenizer post-processor: as for every
// tokenizer, texts end with the EOS token by default and --add-bos puts the BOS token first. A BERT
// tokenizer has neither by name, so they are its post-processor's [SEP] and [CLS]
// (Tokenizer::eos_id/bos_id), and with --add-bos each document is exactly HF's
// encode(text, add_special_tokens=True).
#include "prepare_test_util.h"

#include "../tokenizer/fixtures.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

class PrepareWordPiece : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto cases =
        nlohmann::json::parse(read_file(test::tokenizer_fixture("wordpiece_bert_uncased.cases.json")));
    std::string jsonl;
    for (const auto& c : cases["cases"]) {
      if (c["text"] == "") continue;  // prepare refuses an empty text
      jsonl += nlohmann::json{{"text", c["text"]}}.dump() + "\n";
      texts_.push_back(c["text"].get<std::string>());
      hf_ids_.push_back(c["ids"].get<std::vector<int32_t>>());
      hf_ids_with_special_tokens_.push_back(c["ids_with_special_tokens"].get<std::vector<int32_t>>());
    }
    options_ = test::quiet_options(dir_, {test::write_input(dir_, "in.jsonl", jsonl)});
    options_.tokenizer_path = test::tokenizer_fixture("wordpiece_bert_uncased.tokenizer.json");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::vector<std::vector<uint32_t>> prepared_examples() {
    prepare_dataset(options_);
    auto ds = PreparedDataset::open(options_.output_dir);
    std::vector<std::vector<uint32_t>> out;
    for (int64_t i = 0; i < ds.train().size(); ++i)
      out.push_back(test::to_vector(ds.train().example(i).tokens));
    return out;
  }

  std::filesystem::path dir_;
  PrepareOptions options_;
  std::vector<std::string> texts_;
  std::vector<std::vector<int32_t>> hf_ids_, hf_ids_with_special_tokens_;
};

TEST_F(PrepareWordPiece, AddBosGivesEachDocumentHfsClsAndSep) {
  options_.add_bos = true;
  auto examples = prepared_examples();
  ASSERT_EQ(examples.size(), texts_.size());
  ASSERT_GT(examples.size(), 200u);
  for (size_t i = 0; i < examples.size(); ++i)
    EXPECT_EQ(examples[i], test::ids(hf_ids_with_special_tokens_[i])) << texts_[i];
}

TEST_F(PrepareWordPiece, ByDefaultDocumentsEndWithSep) {
  auto examples = prepared_examples();
  ASSERT_EQ(examples.size(), texts_.size());
  auto sep = Tokenizer::from_file(options_.tokenizer_path).token_to_id("[SEP]").value();
  for (size_t i = 0; i < examples.size(); ++i) {
    auto expected = hf_ids_[i];
    expected.push_back(sep);
    EXPECT_EQ(examples[i], test::ids(expected)) << texts_[i];
  }
}

}  // namespace
}  // namespace pt
