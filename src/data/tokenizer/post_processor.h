// The post-processor of tokenizer.json for one sequence, as HF encode(text, add_special_tokens=True)
// applies it: special tokens before and after the sequence's tokens. BertProcessing and
// RobertaProcessing give [cls] A [sep], TemplateProcessing its "single" template, ByteLevel nothing (it
// only trims offsets); a Sequence may hold one of those that add tokens beside any ByteLevel steps. Pair
// templates are not kept: packtrain encodes single sequences only.
#pragma once

#include <cstdint>
#include <vector>

namespace pt {

struct PostProcessor {
  std::vector<int32_t> prefix, suffix;
  bool adds_tokens = false;  // whether a step that adds tokens was read (an empty template counts)
};

}  // namespace pt
