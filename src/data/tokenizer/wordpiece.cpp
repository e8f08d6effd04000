#include "data/tokenizer/wordpiece.h"

#include "data/tokenizer/utf8.h"

namespace pt {

WordPieceModel::WordPieceModel(StringMap<int32_t> vocab, WordPieceOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {}

void WordPieceModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (cache_->lookup(word, out)) return;
  size_t start = out.size();
  if (!split_word(word, out)) {
    out.resize(start);
    out.push_back(options_.unk_id);
  }
  cache_->insert(word, std::span<const int32_t>(out).subspan(start));
}

bool WordPieceModel::split_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<size_t> bounds;  // byte offset of every character, then word.size()
  thread_local std::string candidate;
  bounds.clear();
  for (size_t pos = 0; pos < word.size(); pos += next_utf8_char(word, pos).length) bounds.push_back(pos);
  if (bounds.size() > options_.max_input_chars_per_word) return false;
  bounds.push_back(word.size());
  const size_t chars = bounds.size() - 1;
  for (size_t begin = 0; begin < chars;) {
    // The longest match wins: try ends from the word's end back towards `begin`.
    size_t end = chars;
    for (; end > begin; --end) {
      std::string_view part = word.substr(bounds[begin], bounds[end] - bounds[begin]);
      auto it = vocab_.end();
      if (begin == 0) {
        it = vocab_.find(part);
      } else {
        candidate.assign(options_.continuing_subword_prefix);
        candidate += part;
        it = vocab_.find(std::string_view(candidate));
      }
      if (it != vocab_.end()) {
        out.push_back(it->second);
        break;
      }
    }
    if (end == begin) return false;
    begin = end;
  }
  return true;
}

}  // namespace pt
