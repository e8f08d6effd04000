// `packtrain tokenizer train|encode|decode`: learn a byte-level BPE tokenizer.json, and apply one (BPE or
// WordPiece).
#include "data/tokenizer/tokenizer.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/file.h"
#include "core/log.h"
#include "core/parallel.h"
#include "data/tokenizer/trainer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

namespace pt::cli {

namespace {

std::string read_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

struct TrainArgs {
  std::vector<std::string> inputs;
  std::string output = "tokenizer.json";
  std::string pattern = "llama3";
  TrainerOptions options;
};

void register_tokenizer_train(CLI::App& parent) {
  auto args = std::make_shared<TrainArgs>();
  args->options.threads = hardware_threads();
  auto* cmd =
      parent.add_subcommand("train", "Learn a byte-level BPE tokenizer.json from text or JSONL files");
  cmd->add_option("--input", args->inputs,
                  "Text files, or .jsonl/.json files of the records `packtrain prepare` reads (text, "
                  "prompt/completion, messages)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--vocab-size", args->options.vocab_size,
                  "Total vocabulary: 256 byte tokens + merges + special tokens")
      ->capture_default_str();
  cmd->add_option("--output", args->output, "Where to write tokenizer.json")->capture_default_str();
  cmd->add_option("--pattern", args->pattern, "Pre-tokenizer pipeline: gpt2, llama3 or qwen2")
      ->check(CLI::IsMember({"gpt2", "llama3", "qwen2"}))
      ->capture_default_str();
  cmd->add_option("--special-tokens", args->options.special_tokens,
                  "Special tokens, given the last ids in this order")
      ->capture_default_str();
  cmd->add_option("--threads", args->options.threads, "Threads for counting")->capture_default_str();
  cmd->callback([args] {
    args->options.preset = parse_preset(args->pattern);
    args->options.progress = true;
    auto counts = count_pretokens(args->inputs, args->options);
    log_info("{} distinct pre-tokens", counts.size());
    write_file_atomic(args->output, train_tokenizer_json(counts, args->options));
    auto tokenizer = Tokenizer::from_file(args->output);
    log_info("wrote {} ({} tokens)", args->output, tokenizer.vocab_size());
  });
}

void register_tokenizer_encode(CLI::App& parent) {
  struct Args {
    std::string tokenizer;
    std::optional<std::string> text;
    bool add_special_tokens = false;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = parent.add_subcommand("encode", "Print the token ids of --text, or of stdin");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json")->required();
  cmd->add_option("--text", args->text, "Text to encode (default: all of stdin)");
  cmd->add_flag("--add-special-tokens", args->add_special_tokens,
                "Add the post-processor's special tokens around the text ([CLS] ... [SEP] for BERT), as HF "
                "encode() does by default");
  cmd->callback([args] {
    auto tokenizer = Tokenizer::from_file(args->tokenizer);
    std::string text = args->text ? *args->text : read_stdin();
    auto ids = args->add_special_tokens ? tokenizer.encode_with_special_tokens(text) : tokenizer.encode(text);
    fmt::print("{}\n", fmt::join(ids, " "));
  });
}

void register_tokenizer_decode(CLI::App& parent) {
  struct Args {
    std::string tokenizer;
    std::vector<int32_t> ids;
  };
  auto args = std::make_shared<Args>();
  auto* cmd = parent.add_subcommand(
      "decode", "Print the text of token ids (arguments, or whitespace-separated on stdin)");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer.json")->required();
  cmd->add_option("ids", args->ids, "Token ids");
  cmd->callback([args] {
    auto tokenizer = Tokenizer::from_file(args->tokenizer);
    std::vector<int32_t> ids = args->ids;
    if (ids.empty()) {
      std::istringstream in(read_stdin());
      std::string word;
      while (in >> word) {
        try {
          size_t used = 0;
          long long v = std::stoll(word, &used);
          if (used != word.size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument(word);
          ids.push_back(static_cast<int32_t>(v));
        } catch (const std::logic_error&) {
          fail("stdin: \"{}\" is not a token id; expected whitespace-separated integers", word);
        }
      }
    }
    fmt::print("{}", tokenizer.decode(ids));
  });
}

}  // namespace

void register_tokenizer(CLI::App& app) {
  auto* cmd =
      app.add_subcommand("tokenizer", "Train a byte-level BPE tokenizer, or apply a BPE or WordPiece one");
  cmd->require_subcommand(1);
  register_tokenizer_train(*cmd);
  register_tokenizer_encode(*cmd);
  register_tokenizer_decode(*cmd);
}

}  // namespace pt::cli
