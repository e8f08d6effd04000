#include "data/prepare/prepare.h"

#include "core/error.h"
#include "core/file.h"
#include "core/issues.h"
#include "core/progress.h"
#include "data/prepare/dataset_writer.h"
#include "data/prepare/input_reader.h"
#include "data/prepare/metadata.h"
#include "data/prepare/record_pipeline.h"
#include "data/tokenizer/tokenizer.h"

#include <filesystem>
#include <optional>

namespace fs = std::filesystem;

namespace pt {

namespace {

void check_options(const PrepareOptions& o) {
  if (o.inputs.empty()) fail("no input files; pass one or more with --input");
  for (const auto& path : o.inputs)
    if (!fs::is_regular_file(path)) fail("input {} does not exist or is not a file; check the path", path);
  if (o.output_dir.empty()) fail("no output directory; pass one with --output");
  if (o.max_len < 1) fail("--max-len must be at least 1 (got {})", o.max_len);
  if (!(o.val_fraction >= 0 && o.val_fraction < 1))
    fail("--val-fraction must be in [0, 1) (got {})", o.val_fraction);
  if (o.threads < 1) fail("--threads must be at least 1 (got {})", o.threads);
  if (o.chunk_bytes < 1) fail("chunk size must be at least 1 byte");
}

uint64_t total_input_bytes(const std::vector<std::string>& inputs) {
  uint64_t total = 0;
  for (const auto& path : inputs) total += fs::file_size(path);
  return total;
}

}  // namespace

PrepareReport prepare_dataset(const PrepareOptions& options) {
  check_options(options);
  auto tokenizer = Tokenizer::from_file(options.tokenizer_path);
  Encoder encoder(tokenizer, options.add_bos, options.add_eos);
  InputIssues issues(options.strict);
  DatasetWriter writer(options.output_dir, options.seed, options.val_fraction);

  constexpr double kMB = 1e6;
  std::optional<Progress> progress;
  if (options.show_progress)
    progress.emplace("prepare", static_cast<double>(total_input_bytes(options.inputs)) / kMB, "MB");
  uint64_t bytes_before = 0;  // of the inputs already done
  int64_t records_read = 0;
  InputChunk chunk;
  for (const auto& path : options.inputs) {
    PipelineConfig config{resolve_format(options.format, path), options.long_policy, options.max_len,
                          options.threads};
    InputReader reader(path, config.format, options.chunk_bytes);
    while (reader.next(chunk)) {
      auto results = process_chunk(chunk, config, encoder);
      for (size_t i = 0; i < results.size(); ++i) {
        for (const auto& issue : results[i].issues)
          issues.report(chunk.where(chunk.records[i]), issue.kind, issue.message, issue.action);
        writer.add(static_cast<uint64_t>(records_read++), std::move(results[i].example),
                   std::move(results[i].piece_lengths));
      }
      if (progress) progress->update(static_cast<double>(bytes_before + reader.bytes_consumed()) / kMB);
    }
    bytes_before += fs::file_size(path);
  }
  if (progress) progress->finish();

  if (writer.records_added() == 0)
    fail(
        "no usable records in {} record(s) read: {}; nothing was written. Fix the inputs (see the messages "
        "above)",
        records_read, records_read == 0 ? "the inputs are empty" : "every record was bad");

  // An older dataset in the directory stops being one before its files are replaced.
  auto metadata_path = (fs::path(options.output_dir) / "metadata.json").string();
  fs::remove(metadata_path);
  auto written = writer.commit();
  // The dataset carries its tokenizer, so training and checkpoints never depend on the original path.
  write_file_atomic((fs::path(options.output_dir) / "tokenizer.json").string(),
                    read_file(options.tokenizer_path));
  auto metadata = make_metadata({options, tokenizer, chat_template_name(encoder.chat_template()),
                                 records_read, writer.records_added(), issues, written});
  write_file_atomic(metadata_path, metadata.dump(2) + "\n");
  return {std::move(metadata), issues.summary()};
}

}  // namespace pt
