#include "data/prepare/metadata.h"

#include "data/dataset.h"

#include <fmt/format.h>

#include <filesystem>

namespace pt {

namespace {

nlohmann::ordered_json optional_id(std::optional<int32_t> id) {
  return id ? nlohmann::ordered_json(*id) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json split_json(const SplitSummary& split) {
  nlohmann::ordered_json files = nlohmann::ordered_json::object();
  for (const auto& [name, digest] : split.files)
    files[name] = {{"bytes", digest.bytes}, {"xxh64", hex64(digest.xxh64)}};
  return {{"examples", split.examples},
          {"tokens", split.tokens},
          {"loss_tokens", split.loss_tokens},
          {"files", files}};
}

}  // namespace

std::string hex64(uint64_t value) { return fmt::format("{:016x}", value); }

nlohmann::ordered_json make_metadata(const MetadataSources& s) {
  const auto& o = s.options;
  auto inputs = nlohmann::ordered_json::array();
  for (const auto& path : o.inputs)
    inputs.push_back({{"path", path},
                      {"format", format_name(resolve_format(o.format, path))},
                      {"bytes", std::filesystem::file_size(path)}});
  return {
      {"format_version", kDatasetFormatVersion},
      {"tokenizer",
       {{"path", o.tokenizer_path},
        {"hash", hex64(s.tokenizer.hash())},
        {"vocab_size", s.tokenizer.vocab_size()},
        {"bos_id", optional_id(model_bos_id(s.chat_template, s.tokenizer))},
        {"eos_id", optional_id(model_eos_id(s.chat_template, s.tokenizer))},
        {"chat_template", to_json(s.chat_template)}}},
      {"inputs", inputs},
      {"options",
       {{"format", format_name(o.format)},
        {"chat_template", o.chat_template},
        {"chat_template_name", o.chat_template_name},
        {"max_len", o.max_len},
        {"long_policy", policy_name(o.long_policy)},
        {"val_fraction", o.val_fraction},
        {"seed", o.seed},
        {"strict", o.strict},
        {"add_bos", o.add_bos},
        {"add_eos", o.add_eos}}},
      {"records", {{"read", s.records_read}, {"kept", s.records_kept}}},
      {"bad_records", {{"total", s.issues.total()}, {"by_kind", s.issues.counts()}}},
      {"splits", {{"train", split_json(s.written.train)}, {"val", split_json(s.written.val)}}},
      {"lengths", s.written.lengths.to_json()},
  };
}

}  // namespace pt
