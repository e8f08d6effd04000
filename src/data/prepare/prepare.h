// `packtrain prepare` as a library call: stream the inputs chunk by chunk (read -> parse -> encode ->
// length policy, in parallel within a chunk), append the results to the dataset files, then write
// metadata.json last as the commit marker. Memory stays at about one chunk whatever the input size.
#pragma once

#include "data/prepare/options.h"

#include <nlohmann/json.hpp>

#include <string>

namespace pt {

struct PrepareReport {
  nlohmann::ordered_json metadata;  // what was written to metadata.json
  std::string issues_summary;       // one line per kind of bad record; empty when there were none
};

// Throws pt::Error on unusable options or inputs, when no record is usable, and (strict) at the first
// bad record; the output directory then holds no new dataset.
PrepareReport prepare_dataset(const PrepareOptions& options);

}  // namespace pt
