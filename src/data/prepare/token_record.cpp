#include "data/prepare/token_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

namespace pt {

namespace {

RecordProblem problem(std::string kind, std::string message) { return {std::move(kind), std::move(message)}; }

constexpr int64_t kIgnoreLabel = -100;  // HF's CrossEntropyLoss ignore_index

// Field `key` as integers (masks may also be booleans); absent leaves `out` empty.
std::optional<RecordProblem> read_ints(simdjson::dom::object record, std::string_view key, bool mask,
                                       std::optional<std::vector<int64_t>>& out) {
  simdjson::dom::element value;
  if (record.at_key(key).get(value) != simdjson::SUCCESS) return std::nullopt;
  simdjson::dom::array array;
  if (value.get(array) != simdjson::SUCCESS)
    return problem("mistyped-field",
                   fmt::format("\"{}\" is {}, expected an array of {}; fix the record", key,
                               json_type_name(value.type()), mask ? "0/1 values" : "integers"));
  out.emplace();
  out->reserve(array.size());
  for (simdjson::dom::element e : array) {
    int64_t v = 0;
    bool b = false;
    if (e.get(v) == simdjson::SUCCESS) {
      out->push_back(v);
    } else if (e.type() == simdjson::dom::element_type::UINT64) {
      out->push_back(std::numeric_limits<int64_t>::max());  // beyond any vocab or mask: reported below
    } else if (mask && e.get(b) == simdjson::SUCCESS) {
      out->push_back(b ? 1 : 0);
    } else {
      return problem("mistyped-field",
                     fmt::format("\"{}\"[{}] is {}, expected {}; fix the record", key, out->size(),
                                 json_type_name(e.type()), mask ? "0 or 1" : "an integer"));
    }
  }
  return std::nullopt;
}

struct Mask {
  std::string_view key;
  std::optional<std::vector<int64_t>> values;
};

}  // namespace

std::variant<EncodedExample, RecordProblem> parse_token_record(simdjson::dom::object record,
                                                               std::optional<int32_t> vocab_size) {
  if (record.at_key("seq_lengths").error() == simdjson::SUCCESS)
    return problem("packed-record",
                   "the record packs several examples together (it has \"seq_lengths\"); export the "
                   "dataset before packing, one example per record, and let packtrain pack it");
  std::optional<std::vector<int64_t>> ids, labels;
  std::array<Mask, 3> masks = {{{"attention_mask", {}}, {"completion_mask", {}}, {"assistant_masks", {}}}};
  if (auto p = read_ints(record, "input_ids", false, ids)) return *p;
  if (auto p = read_ints(record, "labels", false, labels)) return *p;
  for (auto& m : masks)
    if (auto p = read_ints(record, m.key, true, m.values)) return *p;
  const size_t n = ids->size();
  if (n == 0) return problem("empty-example", "\"input_ids\" is empty; remove the record");

  auto same_length = [&](std::string_view key, const std::optional<std::vector<int64_t>>& v) {
    return !v || v->size() == n
               ? std::nullopt
               : std::optional(
                     problem("length-mismatch",
                             fmt::format("\"{}\" has {} values but \"input_ids\" has {}; give one per "
                                         "token",
                                         key, v->size(), n)));
  };
  if (auto p = same_length("labels", labels)) return *p;
  for (const auto& m : masks)
    if (auto p = same_length(m.key, m.values)) return *p;

  const int64_t limit = vocab_size.value_or(std::numeric_limits<int32_t>::max());
  for (size_t t = 0; t < n; ++t)
    if ((*ids)[t] < 0 || (*ids)[t] >= limit)
      return problem("token-out-of-range",
                     fmt::format("input_ids[{}] is {}, outside the tokenizer's ids 0..{}; the record was "
                                 "tokenized with another tokenizer: pass that one with --tokenizer",
                                 t, (*ids)[t], limit - 1));
  for (const auto& m : masks) {
    if (!m.values) continue;
    for (size_t t = 0; t < n; ++t)
      if ((*m.values)[t] != 0 && (*m.values)[t] != 1)
        return problem("bad-mask-value", fmt::format("\"{}\"[{}] is {}, expected 0 or 1; fix the record",
                                                     m.key, t, (*m.values)[t]));
  }
  if (labels)
    for (size_t t = 0; t < n; ++t)
      if ((*labels)[t] != kIgnoreLabel && (*labels)[t] != (*ids)[t])
        return problem("bad-label",
                       fmt::format("labels[{}] is {}, neither -100 (no loss) nor the token's own id {}; "
                                   "packtrain trains each token as its own target (HF's unshifted labels), "
                                   "so labels can only mark which tokens carry loss",
                                   t, (*labels)[t], (*ids)[t]));

  size_t begin = 0, end = n;  // the real tokens, padding at either end left out
  if (const auto& attention = masks[0].values) {
    const auto& a = *attention;
    while (begin < n && a[begin] == 0) ++begin;
    while (end > begin && a[end - 1] == 0) --end;
    if (begin == end)
      return problem("empty-example", "\"attention_mask\" is all 0: the record is only padding; remove it");
    auto hole = std::find(a.begin() + static_cast<std::ptrdiff_t>(begin),
                          a.begin() + static_cast<std::ptrdiff_t>(end), 0);
    if (hole != a.begin() + static_cast<std::ptrdiff_t>(end))
      return problem("padding-inside",
                     fmt::format("attention_mask[{}] is 0 between real tokens; only padding at either end "
                                 "can be dropped, an example must be one unbroken sequence",
                                 hole - a.begin()));
  }

  EncodedExample out;
  out.tokens.reserve(end - begin);
  out.loss_mask.reserve(end - begin);
  bool any_loss = false;
  for (size_t t = begin; t < end; ++t) {
    bool loss = !labels || (*labels)[t] != kIgnoreLabel;
    for (const auto& m : masks)
      if (m.values) loss = loss && (*m.values)[t] == 1;
    any_loss |= loss;
    out.tokens.push_back(static_cast<uint32_t>((*ids)[t]));
    out.loss_mask.push_back(loss ? 1 : 0);
  }
  if (!any_loss)
    return problem(
        "empty-example",
        "no token is a loss target (labels all -100, or a mask all 0), so nothing to learn; remove "
        "the record");
  return out;
}

}  // namespace pt
