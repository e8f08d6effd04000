// Pre-tokenisation as HF `tokenizers` does it: a sequence of Split(regex or literal, behaviour, invert),
// ByteLevel(add_prefix_space, use_regex), Metaspace(replacement, prepend_scheme, split) and
// BertPreTokenizer steps, each applied to every piece the previous step produced. Pieces stay raw bytes: the
// byte-level spelling is the BPE model's business.
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

// Which pieces Metaspace gives a leading replacement character (unless they already start with one):
// every piece, only a piece that starts the input text (offset 0), or none.
enum class PrependScheme { Always, First, Never };

// Pre-tokens of one text: views into the text, or into `owned` when a step had to build a new string
// (a prefix space, Metaspace's replacements). Reused across calls to avoid allocations.
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
  // Spaces become `replacement` (one character's UTF-8), then the prefix per `scheme`; with `split`, a
  // new piece starts at every replacement character.
  void add_metaspace(std::string replacement, PrependScheme scheme, bool split);
  // BertPreTokenizer: split on whitespace (dropped), then every punctuation character (bert_chars.h) is
  // a piece of its own.
  void add_bert();
  bool has_byte_level() const { return has_byte_level_; }

  // Replaces out.list with the pre-tokens of `text`, in order; empty pieces are dropped. `at_start`:
  // `text` begins at offset 0 of the input being encoded (what PrependScheme::First looks at).
  // `continuation`: `text` directly continues other text, so nothing (Metaspace's replacement,
  // ByteLevel's prefix space) is prepended at its start.
  void split(std::string_view text, Pieces& out, bool at_start = true, bool continuation = false) const;

 private:
  enum class Kind { Split, ByteLevel, Metaspace, Bert };
  struct Step {
    Kind kind = Kind::Split;
    std::shared_ptr<const Regex> regex;  // null: no splitting (ByteLevel without use_regex)
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    std::string replacement;        // Metaspace
    PrependScheme scheme = PrependScheme::Always;
    bool split = true;
  };
  // Appends the pieces of `piece`; returns whether the first one begins where `piece` begins.
  // `prefix`: false when no step may prepend to this piece (Metaspace whatever its scheme says, ByteLevel
  // with add_prefix_space).
  bool apply(const Step& step, std::string_view piece, bool at_start, bool prefix, Pieces& pieces,
             std::vector<std::string_view>& out) const;
  // `prepend`: the replacement goes in front unless the piece already starts with a space or one.
  static void apply_metaspace(const Step& step, std::string_view piece, bool prepend, Pieces& pieces,
                              std::vector<std::string_view>& out);
  // Returns whether the first piece begins where `piece` begins.
  static bool apply_bert(std::string_view piece, std::vector<std::string_view>& out);

  std::vector<Step> steps_;
  bool has_byte_level_ = false;
};

}  // namespace pt
