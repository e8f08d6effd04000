// The pre-tokenisation pipelines `packtrain tokenizer train` can write, each exactly as in the model
// family's own tokenizer.json: GPT-2 (ByteLevel with its regex), Llama-3 (Split + ByteLevel,
// ignore_merges) and Qwen2 (NFC, Split + ByteLevel).
#pragma once

#include "data/tokenizer/normalizer.h"
#include "data/tokenizer/pretokenizer.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace pt {

enum class Preset { Gpt2, Llama3, Qwen2 };

Preset parse_preset(std::string_view name);  // "gpt2", "llama3", "qwen2"; throws pt::Error otherwise

struct PresetPipeline {
  Normalizer normalizer;
  PreTokenizer pretokenizer;
  bool ignore_merges = false;
  nlohmann::ordered_json normalizer_json, pretokenizer_json;
};

PresetPipeline preset_pipeline(Preset preset);

}  // namespace pt
