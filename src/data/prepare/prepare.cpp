#include "data/prepare/prepare.h"

#include "core/dir_lock.h"
#include "core/error.h"
#include "core/file.h"
#include "core/issues.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/prepare/chat_template.h"
#include "data/prepare/dataset_writer.h"
#include "data/prepare/input_reader.h"
#include "data/prepare/metadata.h"
#include "data/prepare/record_pipeline.h"
#include "data/tokenizer/tokenizer.h"

#include <algorithm>
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

// The new dataset is written here, inside the output directory, and moved into place once complete.
constexpr const char* kStagingDir = ".prepare.partial";

// How far the writing got, for the message of a write that fails: the data files' bytes of the records
// so far (tokens, loss masks, offsets), the inputs' bytes they came from, and the tokenizer's copy.
struct WriteTally {
  uint64_t data_bytes = 0, input_done = 0, input_total = 0, tokenizer_bytes = 0;

  void add(const RawRecord& record, const EncodedExample& e, const std::vector<uint32_t>& pieces) {
    uint64_t tokens = 0;
    for (uint32_t length : pieces) tokens += length;
    data_bytes += tokens * (sizeof e.tokens[0] + sizeof e.loss_mask[0]) + pieces.size() * sizeof(uint64_t);
    input_done += record.size + 1;  // and its line end; exact again at the chunk's end
  }
};

// Writes the whole dataset into dir (the staging directory).
PrepareReport prepare_into(const PrepareOptions& options, const fs::path& dir, WriteTally& tally) {
  auto tokenizer = Tokenizer::from_file(options.tokenizer_path);
  auto chat = choose_chat_template(options.chat_template, options.chat_template_name, options.tokenizer_path,
                                   tokenizer);
  if (options.show_progress) log_info("chat records: {}", describe(chat));
  Encoder encoder(tokenizer, options.add_bos, options.add_eos, chat);
  RecordRules rules{.template_messages = chat.layout == ChatLayout::kModel,
                    .vocab_size = tokenizer.vocab_size()};
  InputIssues issues(options.strict);
  DatasetWriter writer(dir.string(), options.seed, options.val_fraction);

  constexpr double kMB = 1e6;
  std::optional<Progress> progress;
  tally.input_total = total_input_bytes(options.inputs);
  tally.tokenizer_bytes = fs::file_size(options.tokenizer_path);
  if (options.show_progress) progress.emplace("prepare", static_cast<double>(tally.input_total) / kMB, "MB");
  uint64_t bytes_before = 0;  // of the inputs already done
  int64_t records_read = 0;
  InputChunk chunk;
  for (const auto& path : options.inputs) {
    PipelineConfig config{resolve_format(options.format, path), options.long_policy, options.max_len,
                          options.threads, rules};
    InputReader reader(path, config.format, options.chunk_bytes);
    while (reader.next(chunk)) {
      auto results = process_chunk(chunk, config, encoder);
      for (size_t i = 0; i < results.size(); ++i) {
        for (const auto& issue : results[i].issues)
          issues.report(chunk.where(chunk.records[i]), issue.kind, issue.message, issue.action);
        tally.add(chunk.records[i], results[i].example, results[i].piece_lengths);
        writer.add(static_cast<uint64_t>(records_read++), std::move(results[i].example),
                   std::move(results[i].piece_lengths));
      }
      tally.input_done = bytes_before + reader.bytes_consumed();
      if (progress) progress->update(static_cast<double>(tally.input_done) / kMB);
    }
    bytes_before += fs::file_size(path);
  }
  if (progress) progress->finish();

  if (writer.records_added() == 0)
    fail(
        "no usable records in {} record(s) read: {}; nothing was written. Fix the inputs (see the messages "
        "above)",
        records_read, records_read == 0 ? "the inputs are empty" : "every record was bad");

  auto written = writer.commit();
  // The dataset carries its tokenizer, so training and checkpoints never depend on the original path.
  write_file_atomic((dir / "tokenizer.json").string(), read_file(options.tokenizer_path));
  auto metadata =
      make_metadata({options, tokenizer, chat, records_read, writer.records_added(), issues, written});
  write_file_atomic((dir / "metadata.json").string(), metadata.dump(2) + "\n");
  return {std::move(metadata), issues.summary()};
}

// Puts the dataset complete in staging in place of dir's. Renames only, which need no space: the older
// dataset stops being one (its metadata.json, the commit marker, goes first), its files move aside into
// staging, the new ones move in, and metadata.json comes last. A crash in between leaves a directory
// without metadata.json, which readers report as no dataset.
void publish(const fs::path& staging, const fs::path& dir) {
  const fs::path aside = staging / "replaced";
  fs::create_directory(aside);
  std::vector<fs::path> names;
  for (const auto& entry : fs::directory_iterator(staging))
    if (entry.path() != aside && entry.path().filename() != "metadata.json")
      names.push_back(entry.path().filename());
  fs::remove(dir / "metadata.json");
  sync_directory(dir.string());
  for (const auto& name : names) {
    if (fs::exists(dir / name)) fs::rename(dir / name, aside / name);
    fs::rename(staging / name, dir / name);
  }
  fs::rename(staging / "metadata.json", dir / "metadata.json");
  sync_directory(dir.string());
}

// A write that failed (a full disk, a quota, a file size limit): what the dataset needs, estimated from
// the records written for the part of the inputs read, and what is left as it was.
[[noreturn]] void write_failed(const fs::path& dir, const WriteTally& tally, const std::string& cause) {
  const double read =
      tally.input_total ? static_cast<double>(tally.input_done) / static_cast<double>(tally.input_total) : 0;
  std::string need = "more space than there is";
  if (read > 0) {
    const double data = std::min(static_cast<double>(tally.data_bytes) / read, 1e18);
    need = fmt::format("about {}", format_bytes(static_cast<uint64_t>(data) + tally.tokenizer_bytes));
    if (read < 1) need += fmt::format(" (estimated from the {:.0f}% of the inputs read)", 100 * read);
  }
  fail(
      "cannot write the dataset in {}: {}. It needs {}; {}. Free space (or raise the file size limit) and "
      "run the same command",
      dir.string(), cause, need,
      fs::exists(dir / "metadata.json") ? "the dataset already there is unchanged"
                                        : "there is no complete dataset there");
}

// Removes the staging directory however prepare ends.
struct StagingDir {
  fs::path path;
  explicit StagingDir(fs::path p) : path(std::move(p)) { fs::remove_all(path); }  // an interrupted run's
  ~StagingDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

}  // namespace

PrepareReport prepare_dataset(const PrepareOptions& options) {
  check_options(options);
  fs::create_directories(options.output_dir);
  const DirectoryLock lock(options.output_dir, "prepare", "--output");
  const StagingDir staging(fs::path(options.output_dir) / kStagingDir);
  WriteTally tally;
  try {
    PrepareReport report = prepare_into(options, staging.path, tally);
    publish(staging.path, options.output_dir);
    return report;
  } catch (const WriteError& e) {
    write_failed(options.output_dir, tally, e.what());
  } catch (const fs::filesystem_error& e) {
    write_failed(options.output_dir, tally, e.what());
  }
}

}  // namespace pt
