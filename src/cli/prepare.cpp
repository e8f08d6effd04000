// `packtrain prepare`: tokenize JSON Lines or plain-text inputs into a prepared dataset directory.
#include "data/prepare/prepare.h"
#include "cli/commands.h"
#include "core/log.h"

#include <fmt/format.h>

#include <memory>

namespace pt::cli {

namespace {

struct PrepareArgs {
  PrepareOptions options;
  std::string format = "auto", long_policy = "truncate";
  bool no_eos = false;
};

void print_report(const PrepareReport& report) {
  const auto& m = report.metadata;
  fmt::print("records read {}, kept {}\n", m["records"]["read"].get<int64_t>(),
             m["records"]["kept"].get<int64_t>());
  const auto& chat = m["tokenizer"]["chat_template"];
  if (chat["layout"] == "model") {
    fmt::print("chat template \"{}\" from {}, loss from {}\n", chat["name"].get<std::string>(),
               chat["file"].get<std::string>(),
               chat["assistant_loss"] == "generation-blocks" ? "its {% generation %} blocks"
                                                             : "rendering message by message");
  } else {
    fmt::print("chat template: built-in {}\n", chat["layout"].get<std::string>());
  }
  for (const char* split : {"train", "val"}) {
    const auto& s = m["splits"][split];
    fmt::print("{:<5} {:>10} examples {:>14} tokens {:>14} loss tokens\n", split,
               s["examples"].get<int64_t>(), s["tokens"].get<int64_t>(), s["loss_tokens"].get<int64_t>());
  }
  const auto& l = m["lengths"];
  fmt::print("length p50 {} p90 {} p99 {} max {}\n", l["p50"].get<uint64_t>(), l["p90"].get<uint64_t>(),
             l["p99"].get<uint64_t>(), l["max"].get<uint64_t>());
  if (!report.issues_summary.empty())
    log_warn("{} bad record(s) were skipped or altered:\n{}", m["bad_records"]["total"].get<int64_t>(),
             report.issues_summary);
}

}  // namespace

void register_prepare(CLI::App& app) {
  auto args = std::make_shared<PrepareArgs>();
  auto& o = args->options;
  auto* cmd = app.add_subcommand("prepare", "Tokenize JSONL or plain-text inputs into a prepared dataset");
  cmd->footer(
      "Input records (JSON Lines, one per line; unknown extra fields are ignored):\n"
      "  {\"text\": ...}                          loss on every token\n"
      "  {\"prompt\": ..., \"completion\": ...}     loss on the completion only\n"
      "  {\"messages\": [{\"role\": ..., \"content\": ...}, ...]}\n"
      "                                         laid out by the model's chat template (from\n"
      "                                         tokenizer_config.json or chat_template.jinja beside the\n"
      "                                         tokenizer, or --chat-template); loss on assistant turns\n"
      "  {\"input_ids\": [...], \"labels\": [...]}   pre-tokenized, taken as is (also attention_mask,\n"
      "                                         completion_mask, assistant_masks as TRL writes them)\n"
      "Plain-text inputs (--format text, or auto for files not ending in .jsonl): documents are separated "
      "by\n"
      "one or more blank lines; each document is one example with loss on every token.\n"
      "Output: DIR/metadata.json plus DIR/train and DIR/val with tokens.bin, loss_mask.bin, offsets.bin\n"
      "(see docs/formats.md). Bad records are reported and counted; --strict stops at the first one.");
  cmd->add_option("--input", o.inputs, "Input files (JSONL or plain text)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", o.tokenizer_path, "Hugging Face tokenizer.json")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--output", o.output_dir, "Output dataset directory")->required();
  cmd->add_option("--format", args->format, "Input format")
      ->check(CLI::IsMember({"auto", "jsonl", "text"}))
      ->capture_default_str();
  cmd->add_option(
         "--chat-template", o.chat_template,
         "Layout of {\"messages\"} records: auto (the model's template found beside the tokenizer, else "
         "built-in), chatml, plain, or a model directory, tokenizer_config.json or .jinja file")
      ->capture_default_str();
  cmd->add_option("--chat-template-name", o.chat_template_name,
                  "Which of a model's named chat templates to use (default: \"default\")");
  cmd->add_option("--max-len", o.max_len, "Longest example in tokens")->capture_default_str();
  cmd->add_option(
         "--long", args->long_policy,
         "Examples longer than --max-len: truncate (keep the first max-len tokens), split (into pieces of "
         "<= max-len, each an example) or drop")
      ->check(CLI::IsMember({"truncate", "split", "drop"}))
      ->capture_default_str();
  cmd->add_option("--val-fraction", o.val_fraction, "Fraction of records held out for validation, in [0, 1)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the train/val assignment")->capture_default_str();
  cmd->add_option("--threads", o.threads, "Tokenizer threads")->capture_default_str();
  cmd->add_flag("--strict", o.strict, "Stop with an error at the first bad record instead of skipping it");
  cmd->add_flag("--add-bos", o.add_bos,
                "Start every example with the model's BOS token (unless a chat template wrote it)");
  cmd->add_flag("--no-eos", args->no_eos,
                "Do not end texts and completions with the model's EOS token (chat templates end turns)");
  cmd->callback([args] {
    auto options = args->options;
    options.format = parse_input_format(args->format);
    options.long_policy = parse_long_policy(args->long_policy);
    options.add_eos = !args->no_eos;
    print_report(prepare_dataset(options));
  });
}

}  // namespace pt::cli
