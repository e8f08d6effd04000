// A compiled PCRE2 pattern (JIT) used the way HF `tokenizers` uses Oniguruma: Unicode-aware classes
// (PCRE2_UTF|PCRE2_UCP), and invalid UTF-8 tolerated (PCRE2_MATCH_INVALID_UTF: matches never span an
// invalid byte, so such bytes end up in the gaps between matches). Thread-safe: match state is per
// thread.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pt {

class Regex {
 public:
  // `pattern` is in the Oniguruma dialect HF writes; `origin` names it in errors.
  Regex(const std::string& pattern, const std::string& origin);
  static std::string escape_literal(std::string_view text);

  // Appends [begin, end) of every non-empty, non-overlapping match, left to right.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const;

 private:
  std::shared_ptr<void> code_;  // pcre2_code_8, freed by its deleter
  std::string pattern_;
};

// Rewrites the Oniguruma constructs whose PCRE2 meaning differs: Oniguruma's Unicode \s includes
// U+0085 (NEL), PCRE2's does not.
std::string oniguruma_to_pcre2(std::string_view pattern);

}  // namespace pt
