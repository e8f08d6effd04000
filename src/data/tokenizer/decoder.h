// The decoder of tokenizer.json: token spellings -> text, as a list of HF decoder steps run in order
// over the list of tokens (a "Sequence" flattened), the results then concatenated:
//   ByteLevel     each token's byte-level spelling back to raw bytes, all fused into one token (raw
//                 bytes are kept as they are, so invalid UTF-8 round-trips where HF shows U+FFFD)
//   Replace       every match of a literal or regex in each token by a fixed string ("▁" -> " ")
//   ByteFallback  runs of "<0xNN>" tokens to their bytes; a run that is not valid UTF-8 gives one
//                 U+FFFD per token
//   Fuse          all tokens into one
//   Strip         up to `start` leading and `stop` trailing copies of a character from each token
//   Metaspace     the replacement character to a space, dropped in the first token when the
//                 pre-tokenizer prepends it
//   WordPiece     every token after the first loses its "##" prefix, or else gets a space in front;
//                 with cleanup, spaces before punctuation and in contractions go (" ." -> ".",
//                 " n't" -> "n't", " do not" -> " don't", ...), token by token as HF does
// No decoder at all (null in tokenizer.json) joins the tokens with spaces, as HF does.
#pragma once

#include "data/tokenizer/regex.h"

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace pt {

class Decoder {
 public:
  static Decoder none() { return Decoder(true); }
  Decoder() = default;  // no steps: the tokens concatenated

  void add_byte_level();
  void add_replace(std::string literal, std::string content);  // literal must not be empty
  void add_replace(std::shared_ptr<const Regex> regex, std::string content);
  void add_byte_fallback();
  void add_fuse();
  void add_strip(std::string character, size_t start, size_t stop);  // character: one UTF-8 character
  void add_metaspace(std::string replacement, bool drop_first);
  void add_wordpiece(std::string prefix, bool cleanup);

  std::string decode(std::vector<std::string> tokens) const;

 private:
  explicit Decoder(bool join_with_spaces) : join_with_spaces_(join_with_spaces) {}

  enum class Kind { ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, WordPiece };
  struct Step {
    Kind kind;
    std::string text;                    // Replace: literal; Strip, Metaspace: character; WordPiece: prefix
    std::shared_ptr<const Regex> regex;  // Replace by regex
    std::string content;                 // Replace: the replacement
    size_t start = 0, stop = 0;          // Strip
    bool drop_first = false;             // Metaspace
    bool cleanup = false;                // WordPiece
  };
  std::vector<Step> steps_;
  bool join_with_spaces_ = false;
};

}  // namespace pt
