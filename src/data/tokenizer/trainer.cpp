#include "data/tokenizer/trainer.h"

#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/tokenizer/bpe_trainer.h"
#include "data/tokenizer/byte_level.h"

#include <memory>

namespace pt {

std::string train_tokenizer_json(const StringMap<int64_t>& counts, const TrainerOptions& options) {
  auto specials = static_cast<int32_t>(options.special_tokens.size());
  if (options.vocab_size < 256 + specials)
    fail("--vocab-size {} is too small: it must hold the 256 byte tokens and the {} special tokens",
         options.vocab_size, specials);
  for (size_t i = 0; i < options.special_tokens.size(); ++i)
    if (options.special_tokens[i].empty()) fail("special token {} is empty", i + 1);

  std::unique_ptr<Progress> progress;
  int32_t target = options.vocab_size - specials;
  if (options.progress) progress = std::make_unique<Progress>("learning merges", target - 256, "merges");
  LearnedBpe learned = learn_bpe(counts, target, [&](int32_t tokens) {
    if (progress) progress->update(tokens - 256);
  });
  if (progress) progress->finish();
  if (static_cast<int32_t>(learned.tokens.size()) < target)
    log_warn("the corpus only supports {} tokens before special tokens ({} asked); the vocabulary is smaller",
             learned.tokens.size(), target);

  PresetPipeline pipeline = preset_pipeline(options.preset);
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (size_t id = 0; id < learned.tokens.size(); ++id) vocab[byte_level_encode(learned.tokens[id])] = id;
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (size_t i = 0; i < options.special_tokens.size(); ++i) {
    auto id = learned.tokens.size() + i;
    const std::string& content = options.special_tokens[i];
    if (vocab.contains(content))
      fail("special token \"{}\" is also a learned token; choose another name", content);
    vocab[content] = id;
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  for (auto [a, b] : learned.merges)
    merges.push_back({byte_level_encode(learned.tokens[static_cast<size_t>(a)]),
                      byte_level_encode(learned.tokens[static_cast<size_t>(b)])});

  nlohmann::ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  nlohmann::ordered_json model = {{"type", "BPE"},
                                  {"dropout", nullptr},
                                  {"unk_token", nullptr},
                                  {"continuing_subword_prefix", nullptr},
                                  {"end_of_word_suffix", nullptr},
                                  {"fuse_unk", false},
                                  {"byte_fallback", false},
                                  {"ignore_merges", pipeline.ignore_merges},
                                  {"vocab", std::move(vocab)},
                                  {"merges", std::move(merges)}};
  nlohmann::ordered_json root = {{"version", "1.0"},
                                 {"truncation", nullptr},
                                 {"padding", nullptr},
                                 {"added_tokens", std::move(added)},
                                 {"normalizer", pipeline.normalizer_json},
                                 {"pre_tokenizer", pipeline.pretokenizer_json},
                                 {"post_processor", byte_level},
                                 {"decoder", byte_level},
                                 {"model", std::move(model)}};
  return root.dump(1) + "\n";
}

}  // namespace pt
