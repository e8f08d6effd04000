// Pre-tokenisation as HF `tokenizers` does it for byte-level BPE: a sequence of Split(regex or literal,
// behaviour, invert) and ByteLevel(add_prefix_space, use_regex) steps, each applied to every piece the
// previous step produced. Pieces stay raw bytes: the byte-level spelling is the BPE model's business.
#pragma once

#include "data/tokenizer/regex.h"

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pt {

// The GPT-2 pattern ByteLevel(use_regex=true) applies, and the Split patterns of Llama-3 and Qwen2.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// What happens to the matched parts (HF SplitDelimiterBehavior).
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// Pre-tokens of one text: views into the text, or into `owned` when a step had to build a new string
// (a prefix space). Reused across calls to avoid allocations.
struct Pieces {
  std::vector<std::string_view> list;
  std::deque<std::string> owned;
  std::vector<std::string_view> scratch;  // the next step's output while a step runs
  void clear() {
    list.clear();
    owned.clear();
  }
};

class PreTokenizer {
 public:
  void add_split(std::shared_ptr<const Regex> regex, SplitBehavior behavior, bool invert);
  void add_byte_level(bool add_prefix_space, bool use_regex);
  bool has_byte_level() const { return has_byte_level_; }

  // Replaces out.list with the pre-tokens of `text`, in order; empty pieces are dropped.
  void split(std::string_view text, Pieces& out) const;

 private:
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: no splitting (ByteLevel without use_regex)
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  void apply(const Step& step, std::string_view piece, Pieces& pieces,
             std::vector<std::string_view>& out) const;

  std::vector<Step> steps_;
  bool has_byte_level_ = false;
};

}  // namespace pt
