// The Hugging Face oracle fixtures (tests/fixtures/hf_oracle, written by scripts/hf_oracle.py with torch in
// float64): the packed batch and HF's loss sums; logits and gradients are in expected.safetensors.
#pragma once

#include "core/file.h"
#include "data/packing/batch.h"
#include "model/decoder.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <span>
#include <string>
#include <vector>

namespace pt::testing {

inline const std::string kHfOracleDir = std::string(PACKTRAIN_FIXTURES) + "/hf_oracle";

// One family's fixtures (scripts/hf_oracle.py families): the same files per family directory.
inline const std::string kHfFamiliesDir = kHfOracleDir + "/families";

// The last forward's logits of a batch within one logit chunk, [rows, vocab] without the rows' padding: a
// row per token, or per labelled token for masked LM (DecoderModel::logits).
inline std::vector<float> logit_rows(const DecoderModel& model, int64_t rows) {
  const auto V = static_cast<size_t>(model.config().vocab_size);
  std::vector<float> out(static_cast<size_t>(rows) * V);
  for (int64_t r = 0; r < rows; ++r)
    model.copy_logits_row(r, std::span<float>(out).subspan(static_cast<size_t>(r) * V, V));
  return out;
}

inline Batch hf_oracle_batch(const std::string& dir = kHfOracleDir) {
  auto j = nlohmann::json::parse(read_file(dir + "/batch.json"));
  Batch b;
  b.input_ids = j["input_ids"].get<std::vector<int32_t>>();
  b.position_ids = j["position_ids"].get<std::vector<int32_t>>();
  b.cu_seqlens = j["cu_seqlens"].get<std::vector<int32_t>>();
  b.labels = j["labels"].get<std::vector<int32_t>>();
  // "objective": "mlm" (BERT's fixture): unshifted labels on the masked tokens.
  if (j.value("objective", std::string("causal")) == "mlm") b.objective = Objective::kMaskedLm;
  b.rows = 1, b.row_len = static_cast<int32_t>(b.input_ids.size());
  b.row_real_len = {b.row_len};
  b.real_tokens = b.processed_tokens = b.row_len;
  for (size_t s = 0; s + 1 < b.cu_seqlens.size(); ++s)
    b.max_seqlen = std::max(b.max_seqlen, b.cu_seqlens[s + 1] - b.cu_seqlens[s]);
  return b;
}

inline double hf_oracle_expected(const std::string& key, const std::string& dir = kHfOracleDir) {
  return nlohmann::json::parse(read_file(dir + "/expected.json")).at(key);
}

}  // namespace pt::testing
