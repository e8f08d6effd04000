#include "data/prepare/options.h"

#include "core/error.h"

namespace pt {

std::string_view format_name(InputFormat f) {
  switch (f) {
    case InputFormat::kAuto:
      return "auto";
    case InputFormat::kJsonl:
      return "jsonl";
    case InputFormat::kText:
      return "text";
  }
  return "?";
}

std::string_view policy_name(LongPolicy p) {
  switch (p) {
    case LongPolicy::kTruncate:
      return "truncate";
    case LongPolicy::kSplit:
      return "split";
    case LongPolicy::kDrop:
      return "drop";
  }
  return "?";
}

InputFormat parse_input_format(std::string_view name) {
  for (auto f : {InputFormat::kAuto, InputFormat::kJsonl, InputFormat::kText})
    if (name == format_name(f)) return f;
  fail("unknown input format '{}': use auto, jsonl or text", name);
}

LongPolicy parse_long_policy(std::string_view name) {
  for (auto p : {LongPolicy::kTruncate, LongPolicy::kSplit, LongPolicy::kDrop})
    if (name == policy_name(p)) return p;
  fail("unknown long-example policy '{}': use truncate, split or drop", name);
}

InputFormat resolve_format(InputFormat requested, const std::string& path) {
  if (requested != InputFormat::kAuto) return requested;
  return std::string_view(path).ends_with(".jsonl") ? InputFormat::kJsonl : InputFormat::kText;
}

}  // namespace pt
