#include "data/prepare/record_pipeline.h"

#include "core/parallel.h"
#include "data/prepare/length_policy.h"
#include "data/prepare/record.h"
#include "data/prepare/utf8.h"

#include <fmt/format.h>
#include <simdjson.h>

namespace pt {

namespace {

struct Scratch {
  simdjson::dom::parser parser;
  std::vector<int32_t> ids;
};

// The record, or nullopt (with an issue saying why) when it cannot be used.
std::optional<Record> read_record(std::string_view text, const PipelineConfig& config, Scratch& scratch,
                                  std::vector<RecordIssue>& issues) {
  if (config.format == InputFormat::kJsonl) {
    auto parsed = parse_json_record(text, scratch.parser, config.rules);
    if (auto* problem = std::get_if<RecordProblem>(&parsed)) {
      issues.push_back({problem->kind, problem->message, "skipped"});
      return std::nullopt;
    }
    return std::get<Record>(std::move(parsed));
  }
  size_t bad = find_invalid_utf8(text);
  if (bad == std::string_view::npos) return text_record(std::string(text));
  issues.push_back(
      {"invalid-utf8",
       fmt::format("the document is not valid UTF-8 (first bad byte {} bytes into it); re-encode the "
                   "file as UTF-8",
                   bad),
       "repaired (invalid bytes replaced by U+FFFD)"});
  return text_record(repair_utf8(text));
}

void process_record(std::string_view text, const PipelineConfig& config, const Encoder& encoder,
                    Scratch& scratch, ProcessedRecord& out) {
  auto record = read_record(text, config, scratch, out.issues);
  if (!record || !encoder.encode(*record, out.example, scratch.ids, out.issues)) return;
  size_t length = out.example.tokens.size();
  auto outcome = apply_length_policy(config.long_policy, config.max_len, out.example);
  if (outcome.action)
    out.issues.push_back(
        {"too-long",
         fmt::format("the example has {} tokens, more than --max-len {}; raise --max-len or choose "
                     "another --long policy",
                     length, config.max_len),
         *outcome.action});
  out.piece_lengths = std::move(outcome.piece_lengths);
}

}  // namespace

std::vector<ProcessedRecord> process_chunk(const InputChunk& chunk, const PipelineConfig& config,
                                           const Encoder& encoder) {
  std::vector<ProcessedRecord> results(chunk.records.size());
  parallel_for(static_cast<int64_t>(results.size()), config.threads, [&](int64_t begin, int64_t end) {
    Scratch scratch;
    for (auto i = static_cast<size_t>(begin); i < static_cast<size_t>(end); ++i)
      process_record(chunk.text(chunk.records[i]), config, encoder, scratch, results[i]);
  });
  return results;
}

}  // namespace pt
