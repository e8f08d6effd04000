// Added tokens (special or not) found in text before pre-tokenisation, as HF AddedVocabulary does:
// leftmost-longest matching of the token contents; single_word tokens only match between non-word
// characters; lstrip/rstrip tokens absorb the whitespace beside them (never into an earlier match).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pt {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;  // matched against normalised text (else against the raw input)
};

// A run of text, and the added token it is (id >= 0) or -1 for plain text to pre-tokenise.
struct TextSegment {
  std::string_view text;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `tokens` keep their options; `patterns[i]` is what tokens[i] is matched as (its content, or its
  // normalised content for a normalised token).
  AddedTokenMatcher(std::vector<AddedToken> tokens, const std::vector<std::string>& patterns);

  bool empty() const { return tokens_.empty(); }
  // Appends the segments covering `text` in order (empty plain-text runs are omitted).
  void split(std::string_view text, std::vector<TextSegment>& out) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
    int32_t token = -1;                                 // index into tokens_ when a content ends here
  };
  // Index into tokens_ and the length of the longest content matching at `pos`, or {-1, 0}.
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos) const;
  bool accepts(const AddedToken& token, std::string_view text, size_t begin, size_t end) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  std::array<bool, 256> first_byte_{};
};

}  // namespace pt
