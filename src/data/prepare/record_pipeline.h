// The per-record stages of prepare, run in parallel over a chunk: parse (JSON Lines) or take (plain
// text) the record, encode it, apply the length policy. Problems are returned, not reported, so the
// caller can report them in input order.
#pragma once

#include "data/prepare/encoder.h"
#include "data/prepare/input_reader.h"
#include "data/prepare/options.h"
#include "data/prepare/record.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pt {

struct ProcessedRecord {
  EncodedExample example;               // the kept pieces, back to back
  std::vector<uint32_t> piece_lengths;  // empty: the record was skipped
  std::vector<RecordIssue> issues;      // every skip or alteration, in the order they happened
};

struct PipelineConfig {
  InputFormat format;  // resolved: kJsonl or kText
  LongPolicy long_policy;
  int64_t max_len;
  int threads;
  RecordRules rules;
};

// Results in the chunk's record order.
std::vector<ProcessedRecord> process_chunk(const InputChunk& chunk, const PipelineConfig& config,
                                           const Encoder& encoder);

}  // namespace pt
