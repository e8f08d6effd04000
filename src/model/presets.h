// Built-in model shapes: packtrain's own small Llama-style models (vocab from the dataset's tokenizer) and
// the shapes people train, with their real vocab sizes (the dataset's tokenizer may have fewer ids).
#pragma once

#include "model/config.h"

#include <string>

namespace pt {

// tiny, 110m, 1b (vocab_size 0: the caller takes the tokenizer's), gpt2, gpt2-medium, llama3.2-1b,
// llama3.2-3b, llama3.1-8b, qwen2.5-0.5b, qwen3-0.6b, mistral-7b. Throws naming the presets otherwise.
ModelConfig preset_config(const std::string& name);
bool is_preset_name(const std::string& name);
std::string preset_names();  // for messages and --help

}  // namespace pt
