// `packtrain eval`: validation loss and perplexity of a model directory on a prepared dataset. An encoder
// (BERT) is scored on masked-LM batches: the default masking (15%, 80/10/10) drawn with --seed.
#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"
#include "data/dataset.h"
#include "data/tokenizer/tokenizer.h"
#include "train/evaluate.h"

#include <cmath>
#include <filesystem>
#include <memory>

namespace pt::cli {

void register_eval(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Validation loss and perplexity of a model on a prepared dataset");
  struct Args {
    std::string model_dir, data, split = "val";
    int64_t max_tokens = 8192;
    uint64_t seed = 0;
    std::string mask_token;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->model_dir, "Model directory (a checkpoint, final/, or a Hugging Face model of a supported family)")
      ->required();
  cmd->add_option("--data", a->data, "Prepared dataset directory")->required();
  cmd->add_option("--split", a->split, "val or train")
      ->check(CLI::IsMember({"val", "train"}))
      ->capture_default_str();
  cmd->add_option("--batch-tokens", a->max_tokens, "Tokens per forward pass")->capture_default_str();
  cmd->add_option("--seed", a->seed, "Masked LM: the seed of the masks")->capture_default_str();
  cmd->add_option("--mask-token", a->mask_token,
                  "Masked LM: the tokenizer's mask token (default [MASK] or <mask>)");
  cmd->callback([a] {
    auto weights = load_model_dir(a->model_dir);
    auto data = PreparedDataset::open(a->data);
    if (weights.config.vocab_size < data.vocab_size())
      fail(
          "{}: vocab_size {} is smaller than the dataset's tokenizer ({}); evaluate on data prepared with "
          "the model's tokenizer",
          a->model_dir, weights.config.vocab_size, data.vocab_size());
    const auto& split = a->split == "val" ? data.val() : data.train();
    int64_t longest = 0;
    for (int64_t i = 0; i < split.size(); ++i) longest = std::max(longest, split.length(i));
    DecoderModel model(weights.config, std::max(a->max_tokens, longest));
    PackingOptions masking;
    masking.objective = weights.config.objective();
    masking.seed = a->seed;
    if (masking.objective == Objective::kMaskedLm)
      masking.mlm_vocab = std::make_shared<const MlmVocab>(MlmVocab::from_tokenizer(
          Tokenizer::from_file((std::filesystem::path(a->data) / "tokenizer.json").string()), a->mask_token));
    auto r = evaluate(model, Tensor::of(weights.params.data(), {static_cast<int64_t>(weights.params.size())}),
                      split, 0, masking);
    fmt::print("{} loss {:.4f} perplexity {:.2f} over {} tokens\n", a->split, r.loss, std::exp(r.loss),
               r.tokens);
  });
}

}  // namespace pt::cli
