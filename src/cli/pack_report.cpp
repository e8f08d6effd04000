// `packtrain pack-report`: one epoch of every packing strategy over a prepared dataset, side by side.
#include "cli/commands.h"
#include "core/error.h"
#include "core/file.h"
#include "core/progress.h"
#include "data/dataset.h"
#include "data/packing/report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <memory>
#include <string>

namespace pt::cli {
namespace {

struct PackReportArgs {
  std::string data_dir;
  int32_t examples = 0;
  int64_t tokens = 0;
  int32_t row_len = 2048;
  uint64_t seed = 0;
  std::string split = "train";
  std::string json_path;
};

void print_table(const std::vector<StrategyReport>& reports, const PackingOptions& options) {
  std::string batch = options.tokens_per_batch > 0 ? fmt::format("{} tokens", options.tokens_per_batch)
                                                   : fmt::format("{} examples", options.examples_per_batch);
  fmt::print("batch: {}, row length {} (concat, concat-posid, bfd), seed {}\n\n", batch, options.row_len,
             options.seed);
  fmt::print("{:<13} {:>9} {:>10} {:>13} {:>13} {:>9} {:>13} {:>9} {:>10}\n", "strategy", "batches", "rows",
             "real tokens", "processed", "padding%", "loss tokens", "split", "attention");
  for (const auto& r : reports)
    fmt::print("{:<13} {:>9} {:>10} {:>13} {:>13} {:>8.2f}% {:>13} {:>9} {:>9.3f}x\n",
               strategy_name(r.strategy), r.batches, r.rows, r.real_tokens, r.processed_tokens,
               100 * r.padding_fraction(), r.loss_tokens, r.examples_split, r.attention_vs_padding);
  fmt::print(
      "\nprocessed: rows x row length, what the model computes on; padding%: share of processed tokens\n"
      "that are padding; loss tokens: targets with a loss; split: examples cut across rows (each later\n"
      "piece loses one target). attention: attention FLOPs relative to padding, counted as the sum over\n"
      "attention segments of L^2 where L is the segment's real tokens (varlen attention skips padding),\n"
      "except for padding and concat, whose attention spans whole rows: row_len^2 per row.\n");
}

nlohmann::json to_json(const std::vector<StrategyReport>& reports, const PackingOptions& options,
                       const std::string& split) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : reports)
    rows.push_back({{"strategy", strategy_name(r.strategy)},
                    {"batches", r.batches},
                    {"rows", r.rows},
                    {"real_tokens", r.real_tokens},
                    {"processed_tokens", r.processed_tokens},
                    {"padding_fraction", r.padding_fraction()},
                    {"loss_tokens", r.loss_tokens},
                    {"examples", r.examples},
                    {"examples_split", r.examples_split},
                    {"attention_cost", r.attention_cost},
                    {"attention_vs_padding", r.attention_vs_padding}});
  return {{"split", split},
          {"examples_per_batch", options.examples_per_batch},
          {"tokens_per_batch", options.tokens_per_batch},
          {"row_len", options.row_len},
          {"seed", options.seed},
          {"strategies", rows}};
}

void run(const PackReportArgs& args) {
  PackingOptions options;
  options.examples_per_batch = args.tokens > 0 ? 0 : (args.examples > 0 ? args.examples : 16);
  options.tokens_per_batch = args.tokens;
  options.row_len = args.row_len;
  options.seed = args.seed;

  PreparedDataset dataset = PreparedDataset::open(args.data_dir);
  const DatasetSplit& split = args.split == "val" ? dataset.val() : dataset.train();
  if (split.size() == 0) fail("{}: the {} split has no examples", args.data_dir, args.split);

  // One bar over the five epochs, counted in examples.
  auto examples = static_cast<double>(split.size());
  Progress bar("pack-report", examples * std::size(kAllStrategies), "examples");
  auto reports = pack_report(split, options, [&](Strategy s, double fraction) {
    auto index =
        std::find(std::begin(kAllStrategies), std::end(kAllStrategies), s) - std::begin(kAllStrategies);
    bar.update((static_cast<double>(index) + fraction) * examples);
  });
  bar.finish();

  print_table(reports, options);
  if (!args.json_path.empty())
    write_file_atomic(args.json_path, to_json(reports, options, args.split).dump(2) + "\n");
}

}  // namespace

void register_pack_report(CLI::App& app) {
  auto args = std::make_shared<PackReportArgs>();
  auto* cmd = app.add_subcommand(
      "pack-report",
      "Pack one epoch of a prepared dataset with every strategy and compare padding, rows and "
      "attention cost");
  cmd->add_option("--data", args->data_dir, "Prepared dataset directory")->required();
  auto* examples = cmd->add_option("--examples", args->examples, "Examples per batch (default 16)")
                       ->check(CLI::PositiveNumber);
  auto* tokens = cmd->add_option("--tokens", args->tokens, "Tokens per batch instead of a number of examples")
                     ->check(CLI::PositiveNumber);
  examples->excludes(tokens);
  cmd->add_option("--row-len", args->row_len, "Row length of concat, concat-posid and bfd")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Shuffle seed")->capture_default_str();
  cmd->add_option("--split", args->split, "Which split to pack")
      ->check(CLI::IsMember({"train", "val"}))
      ->capture_default_str();
  cmd->add_option("--json", args->json_path, "Also write the table as JSON to this file");
  cmd->callback([args] { run(*args); });
}

}  // namespace pt::cli
