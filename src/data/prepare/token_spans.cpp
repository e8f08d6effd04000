#include "data/prepare/token_spans.h"

#include <algorithm>
#include <string>

namespace pt {

namespace {

constexpr size_t kWindow = 128;  // longest differing stretch, on either side
constexpr size_t kAgree = 4;     // bytes that must agree after it

// Whether text[c..] and spelled[p..] agree from here on for kAgree bytes (or both end together).
bool agree(std::string_view text, size_t c, std::string_view spelled, size_t p) {
  size_t left_text = text.size() - c, left_spelled = spelled.size() - p;
  size_t n = std::min({kAgree, left_text, left_spelled});
  if (n < kAgree && left_text != left_spelled) return false;
  if (n == 0) return true;
  return text.compare(c, n, spelled, p, n) == 0;
}

struct Alignment {
  std::vector<size_t> at;  // text position of each byte of the spelling, one more for its end
  struct Stretch {
    size_t spelled_begin, spelled_end, text_begin, text_end;
  };
  std::vector<Stretch> rewritten;  // stretches spelled with other bytes than the text's
};

std::optional<Alignment> align(std::string_view text, std::string_view spelled) {
  Alignment a;
  a.at.resize(spelled.size() + 1);
  size_t c = 0, p = 0;
  while (p < spelled.size()) {
    if (c < text.size() && text[c] == spelled[p]) {
      a.at[p++] = c++;
      continue;
    }
    // The shortest differing stretch: text[c, c + i) is spelled spelled[p, p + j).
    bool found = false;
    size_t i = 0, j = 0;
    for (size_t k = 1; k <= 2 * kWindow && !found; ++k)
      for (j = k > kWindow ? k - kWindow : 0; j <= std::min(k, kWindow); ++j) {
        i = k - j;
        if (c + i <= text.size() && p + j <= spelled.size() && agree(text, c + i, spelled, p + j)) {
          found = true;
          break;
        }
      }
    if (!found) return std::nullopt;
    for (size_t q = p; q < p + j; ++q) a.at[q] = c;
    if (i > 0 && j > 0) a.rewritten.push_back({p, p + j, c, c + i});
    c += i;
    p += j;
  }
  if (text.size() - c > kWindow) return std::nullopt;
  a.at[spelled.size()] = text.size();  // text after the last token's bytes (absorbed whitespace) is its own
  return a;
}

// A token's bytes as they stand in the text. decode() of one token alone may drop the space a leading
// "▁" stands for (SentencePiece decoders strip it at the start of the output); it is put back.
std::string token_bytes(const Tokenizer& tokenizer, int32_t id) {
  auto bytes = tokenizer.decode(std::span(&id, 1));
  if (!bytes.starts_with(' ') && tokenizer.id_to_token(id).starts_with("\xE2\x96\x81"))
    bytes.insert(0, 1, ' ');
  return bytes;
}

}  // namespace

std::optional<std::vector<ByteRange>> align_token_bytes(std::string_view text,
                                                        const std::vector<std::string>& token_bytes) {
  std::string spelled;
  spelled.reserve(text.size() + 16);
  std::vector<size_t> starts;
  starts.reserve(token_bytes.size() + 1);
  for (const auto& bytes : token_bytes) {
    starts.push_back(spelled.size());
    spelled += bytes;
  }
  starts.push_back(spelled.size());
  auto a = align(text, spelled);
  if (!a) return std::nullopt;
  const size_t n = token_bytes.size();
  std::vector<ByteRange> ranges(n);
  for (size_t t = 0; t < n; ++t) ranges[t] = {a->at[starts[t]], a->at[starts[t + 1]]};
  if (n > 0) ranges.front().first = 0;  // text before the first token's bytes is its own
  // Every token spelling part of a rewritten stretch stands for all of it, as HF's offsets say (the
  // byte-fallback tokens of one character all carry the character's offsets).
  size_t t = 0;
  for (const auto& r : a->rewritten) {
    while (t < n && starts[t + 1] <= r.spelled_begin) ++t;
    for (size_t u = t; u < n && starts[u] < r.spelled_end; ++u)
      ranges[u] = {std::min(ranges[u].first, r.text_begin), std::max(ranges[u].second, r.text_end)};
  }
  return ranges;
}

std::optional<std::vector<ByteRange>> token_byte_ranges(const Tokenizer& tokenizer, std::string_view text,
                                                        std::span<const int32_t> ids) {
  std::vector<std::string> bytes;
  bytes.reserve(ids.size());
  for (int32_t id : ids) bytes.push_back(token_bytes(tokenizer, id));
  return align_token_bytes(text, bytes);
}

void mark_overlapping(std::span<const ByteRange> tokens, std::vector<ByteRange> spans,
                      std::span<uint8_t> mask) {
  std::stable_sort(spans.begin(), spans.end(),
                   [](const ByteRange& a, const ByteRange& b) { return a.first < b.first; });
  size_t s = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    while (s < spans.size() && tokens[t].first >= spans[s].second) ++s;
    if (s == spans.size()) break;
    if (tokens[t].second > spans[s].first) mask[t] = 1;
  }
}

}  // namespace pt
