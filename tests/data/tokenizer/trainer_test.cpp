#include "data/tokenizer/trainer.h"

#include "core/error.h"
#include "core/file.h"
#include "data/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <random>

namespace pt {
namespace {

// A small corpus with a skewed word distribution, like text.
std::string corpus(int words, uint32_t seed) {
  static const std::vector<std::string> vocab = {"the",      "of",     "and",      "token",     "tokens",
                                                 "training", "packed", "sequence", "attention", "日本",
                                                 "😀",        "42",     "1999",     "don't"};
  std::mt19937 rng(seed);
  std::string s;
  for (int i = 0; i < words; ++i) {
    size_t k = std::min<size_t>(rng() % vocab.size(), rng() % vocab.size());
    s += vocab[k];
    s += (i % 17 == 16) ? "\n" : (i % 97 == 96 ? " <|endoftext|> " : " ");
  }
  return s;
}

class TrainerTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("pt_trainer_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& contents) {
    auto path = (dir_ / name).string();
    write_file_atomic(path, contents);
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(TrainerTest, LearnsTheAskedVocabularyWithSpecialsLast) {
  std::string text = corpus(20000, 1);
  auto file = write("corpus.txt", text);
  for (Preset preset : {Preset::Gpt2, Preset::Llama3, Preset::Qwen2}) {
    TrainerOptions options;
    options.vocab_size = 300;
    options.preset = preset;
    auto t = Tokenizer::from_json(train_tokenizer_json(count_pretokens({file}, options), options), "trained");
    EXPECT_EQ(t.vocab_size(), 300);
    EXPECT_EQ(t.token_to_id("<|endoftext|>"), 296);
    EXPECT_EQ(t.token_to_id("<|pad|>"), 299);
    EXPECT_EQ(t.eos_id(), 296);
    EXPECT_EQ(t.pad_id(), 299);
    auto ids = t.encode(text);
    EXPECT_EQ(t.decode(ids), text);
    EXPECT_LT(ids.size(), text.size() / 3);  // merges were learned and are used
    EXPECT_EQ(t.encode("the <|endoftext|>").back(), 296);
  }
}

TEST_F(TrainerTest, DeterministicAcrossThreadCountsAndInputForms) {
  std::string text = corpus(5000, 2);
  auto txt = write("c.txt", text);
  std::string jsonl;
  std::string line;
  for (char c : text) {
    line += c;
    if (c == '\n') {
      jsonl += nlohmann::json({{"text", line}}).dump() + "\n";
      line.clear();
    }
  }
  jsonl += nlohmann::json({{"text", line}}).dump() + "\n";
  auto js = write("c.jsonl", jsonl);
  TrainerOptions one, two;
  one.vocab_size = two.vocab_size = 300;
  two.threads = 2;
  std::string a = train_tokenizer_json(count_pretokens({txt}, one), one);
  EXPECT_EQ(a, train_tokenizer_json(count_pretokens({txt}, two), two));
  EXPECT_EQ(a, train_tokenizer_json(count_pretokens({js}, two), two));
}

TEST_F(TrainerTest, MalformedJsonlNamesFileAndLine) {
  auto js = write("bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": 3}\n");
  try {
    count_pretokens({js}, TrainerOptions{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
  }
}

TEST_F(TrainerTest, RejectsAVocabularyTooSmallForBytesAndSpecials) {
  TrainerOptions options;
  options.vocab_size = 258;
  EXPECT_THROW(train_tokenizer_json({}, options), Error);
}

}  // namespace
}  // namespace pt
