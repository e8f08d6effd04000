// What `packtrain prepare` is asked to do. The CLI fills it from flags; tests and benchmarks fill it
// directly (and may shrink chunk_bytes to exercise chunking on tiny inputs).
#pragma once

#include "core/parallel.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pt {

enum class InputFormat { kAuto, kJsonl, kText };
// What happens to an example longer than max_len tokens.
enum class LongPolicy { kTruncate, kSplit, kDrop };

struct PrepareOptions {
  std::vector<std::string> inputs;
  std::string tokenizer_path;
  std::string output_dir;
  std::string chat_template = "auto";  // auto, chatml, plain or a path (chat_template.h)
  std::string chat_template_name;      // one of a model's named templates ("" = "default")
  InputFormat format = InputFormat::kAuto;
  int64_t max_len = 2048;
  LongPolicy long_policy = LongPolicy::kTruncate;
  double val_fraction = 0.05;
  uint64_t seed = 0;
  int threads = hardware_threads();
  bool strict = false;
  bool add_bos = false;
  bool add_eos = true;
  size_t chunk_bytes = size_t{16} << 20;  // input read, tokenized and written per step
  bool show_progress = true;
};

std::string_view format_name(InputFormat f);            // "auto", "jsonl", "text"
std::string_view policy_name(LongPolicy p);             // "truncate", "split", "drop"
InputFormat parse_input_format(std::string_view name);  // throws pt::Error listing the valid names
LongPolicy parse_long_policy(std::string_view name);    // throws pt::Error listing the valid names
// kAuto resolves per file: ".jsonl" is JSON Lines, anything else is plain text.
InputFormat resolve_format(InputFormat requested, const std::string& path);

}  // namespace pt
