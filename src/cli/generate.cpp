// `packtrain generate`: sample text from a model directory, streaming it as it is produced.
#include "model/generate.h"
#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "core/error.h"
#include "data/tokenizer/tokenizer.h"

#include <cstdio>
#include <filesystem>
#include <memory>

namespace pt::cli {

namespace {
// Bytes of `text` up to the end of its last complete UTF-8 character, so a stream never splits one. A
// trailing U+FFFD is held back too: a byte-fallback decoder shows a character whose bytes have not all
// arrived yet as one.
size_t complete_utf8_prefix(const std::string& text) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  if (text.ends_with(kReplacement))
    return complete_utf8_prefix(text.substr(0, text.size() - kReplacement.size()));
  size_t end = text.size(), back = 0;
  while (back < 4 && back < end && (static_cast<unsigned char>(text[end - 1 - back]) & 0xC0) == 0x80) ++back;
  if (back == end) return end;
  const auto lead = static_cast<unsigned char>(text[end - 1 - back]);
  const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return need > back + 1 ? end - 1 - back : end;
}
}  // namespace

void register_generate(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Generate text from a model (greedy or top-k/top-p sampling)");
  struct Args {
    std::string model_dir, prompt;
    bool add_bos = false;
    SamplingOptions sampling;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->model_dir,
                  "Model directory with config.json, model.safetensors, tokenizer.json")
      ->required();
  cmd->add_option("--prompt", a->prompt, "Text to continue")->required();
  cmd->add_option("--max-new-tokens", a->sampling.max_new_tokens)->capture_default_str();
  cmd->add_flag("--greedy", a->sampling.greedy, "Always take the most likely token");
  cmd->add_option("--temperature", a->sampling.temperature)->capture_default_str();
  cmd->add_option("--top-k", a->sampling.top_k, "Sample among the k most likely tokens (0: all)")
      ->capture_default_str();
  cmd->add_option("--top-p", a->sampling.top_p, "Sample within the smallest set of probability >= p")
      ->capture_default_str();
  cmd->add_option("--seed", a->sampling.seed)->capture_default_str();
  cmd->add_flag("--add-bos", a->add_bos,
                "Start the prompt with the tokenizer's BOS token (as data prepared with --add-bos starts)");
  cmd->callback([a] {
    auto weights = load_model_dir(a->model_dir);
    auto tokenizer = Tokenizer::from_file((std::filesystem::path(a->model_dir) / "tokenizer.json").string());
    std::vector<int32_t> prompt;
    if (a->add_bos) {
      if (!tokenizer.bos_id()) fail("--add-bos: the tokenizer of {} has no BOS token", a->model_dir);
      prompt.push_back(*tokenizer.bos_id());
    }
    tokenizer.encode_append(a->prompt, prompt);
    DecoderModel model(weights.config, static_cast<int64_t>(prompt.size()) + a->sampling.max_new_tokens);
    // The text is decoded from the prompt's tokens on, and what follows the prompt's own decoding printed:
    // decoders that strip a leading space (SentencePiece's) would drop the first generated word's.
    std::vector<int32_t> generated = prompt;
    const size_t prompt_bytes = tokenizer.decode(prompt).size();
    size_t printed = prompt_bytes;
    std::fputs(a->prompt.c_str(), stdout);
    generate(model, Tensor::of(weights.params.data(), {static_cast<int64_t>(weights.params.size())}), prompt,
             a->sampling, tokenizer.eos_id(), [&](int32_t id) {
               if (id == tokenizer.eos_id()) return;  // the end of the text, not part of it
               generated.push_back(id);
               auto text = tokenizer.decode(generated);
               size_t end = complete_utf8_prefix(text);
               if (end > printed) {
                 std::fwrite(text.data() + printed, 1, end - printed, stdout);
                 std::fflush(stdout);
                 printed = end;
               }
             });
    auto text = tokenizer.decode(generated);
    std::fwrite(text.data() + printed, 1, text.size() - printed, stdout);
    std::fputc('\n', stdout);
  });
}

}  // namespace pt::cli
