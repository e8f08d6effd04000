#include "data/tokenizer/presets.h"

#include "core/error.h"

namespace pt {

namespace {

nlohmann::ordered_json byte_level_json(bool use_regex) {
  return {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

nlohmann::ordered_json split_then_byte_level_json(const char* pattern) {
  nlohmann::ordered_json split = {
      {"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  return {{"type", "Sequence"}, {"pretokenizers", {split, byte_level_json(false)}}};
}

}  // namespace

Preset parse_preset(std::string_view name) {
  if (name == "gpt2") return Preset::Gpt2;
  if (name == "llama3") return Preset::Llama3;
  if (name == "qwen2") return Preset::Qwen2;
  fail("unknown pre-tokenizer pattern \"{}\"; expected gpt2, llama3 or qwen2", name);
}

PresetPipeline preset_pipeline(Preset preset) {
  PresetPipeline p;
  p.normalizer_json = nullptr;
  switch (preset) {
    case Preset::Gpt2:
      p.pretokenizer.add_byte_level(false, true);
      p.pretokenizer_json = byte_level_json(true);
      break;
    case Preset::Llama3:
      p.pretokenizer.add_split(std::make_shared<const Regex>(kLlama3Pattern, "the Llama-3 pattern"),
                               SplitBehavior::Isolated, false);
      p.pretokenizer.add_byte_level(false, false);
      p.pretokenizer_json = split_then_byte_level_json(kLlama3Pattern);
      p.ignore_merges = true;
      break;
    case Preset::Qwen2:
      p.normalizer = Normalizer({NormalForm::NFC});
      p.normalizer_json = {{"type", "NFC"}};
      p.pretokenizer.add_split(std::make_shared<const Regex>(kQwen2Pattern, "the Qwen2 pattern"),
                               SplitBehavior::Isolated, false);
      p.pretokenizer.add_byte_level(false, false);
      p.pretokenizer_json = split_then_byte_level_json(kQwen2Pattern);
      break;
  }
  return p;
}

}  // namespace pt
