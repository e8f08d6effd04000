#include "data/tokenizer/pretokenizer.h"

#include "data/tokenizer/bert_chars.h"
#include "data/tokenizer/utf8.h"

namespace pt {

void PreTokenizer::add_split(std::shared_ptr<const Regex> regex, SplitBehavior behavior, bool invert) {
  Step step;
  step.regex = std::move(regex);
  step.behavior = behavior;
  step.invert = invert;
  steps_.push_back(std::move(step));
}

void PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  static const auto gpt2 = std::make_shared<const Regex>(kGpt2Pattern, "the GPT-2 pattern");
  Step step;
  step.kind = Kind::ByteLevel;
  if (use_regex) step.regex = gpt2;
  step.add_prefix_space = add_prefix_space;
  steps_.push_back(std::move(step));
  has_byte_level_ = true;
}

void PreTokenizer::add_metaspace(std::string replacement, PrependScheme scheme, bool split) {
  Step step;
  step.kind = Kind::Metaspace;
  step.replacement = std::move(replacement);
  step.scheme = scheme;
  step.split = split;
  steps_.push_back(std::move(step));
}

void PreTokenizer::add_bert() {
  Step step;
  step.kind = Kind::Bert;
  steps_.push_back(std::move(step));
}

void PreTokenizer::split(std::string_view text, Pieces& out, bool at_start, bool continuation) const {
  out.clear();
  if (!text.empty()) out.list.push_back(text);
  // Whether out.list[0] begins where `text` does (HF: at offsets_original().0 == 0 when at_start).
  bool first_at_text_start = true;
  for (const Step& step : steps_) {
    out.scratch.clear();
    bool next_first_at_text_start = false;
    for (size_t i = 0; i < out.list.size(); ++i) {
      bool text_start = i == 0 && first_at_text_start;
      bool starts =
          apply(step, out.list[i], text_start && at_start, !(text_start && continuation), out, out.scratch);
      if (i == 0) next_first_at_text_start = text_start && starts && !out.scratch.empty();
    }
    first_at_text_start = next_first_at_text_start;
    out.list.swap(out.scratch);
  }
}

void PreTokenizer::apply_metaspace(const Step& step, std::string_view piece, bool prepend, Pieces& pieces,
                                   std::vector<std::string_view>& out) {
  const std::string& rep = step.replacement;
  prepend = prepend && piece.front() != ' ' && !piece.starts_with(rep);
  std::string& s = pieces.owned.emplace_back();
  s.reserve(piece.size() + 2 * rep.size());
  if (prepend) s += rep;
  for (char c : piece) {
    if (c == ' ') {
      s += rep;
    } else {
      s += c;
    }
  }
  if (!step.split) {
    out.push_back(s);
    return;
  }
  // Every replacement character starts a piece (HF MergedWithNext on it).
  std::string_view view = s;
  size_t begin = 0;
  for (size_t hit = view.find(rep, 1); hit != std::string_view::npos;
       hit = view.find(rep, hit + rep.size())) {
    out.push_back(view.substr(begin, hit - begin));
    begin = hit;
  }
  out.push_back(view.substr(begin));
}

bool PreTokenizer::apply_bert(std::string_view piece, std::vector<std::string_view>& out) {
  size_t word_begin = 0, first_begin = std::string_view::npos;
  auto emit = [&](size_t begin, size_t end) {
    if (end <= begin) return;
    if (first_begin == std::string_view::npos) first_begin = begin;
    out.push_back(piece.substr(begin, end - begin));
  };
  for (size_t pos = 0; pos < piece.size();) {
    Utf8Char c = next_utf8_char(piece, pos);
    size_t end = pos + c.length;
    if (c.valid && (bert_whitespace(c.code_point) || bert_punctuation(c.code_point))) {
      emit(word_begin, pos);
      if (!bert_whitespace(c.code_point)) emit(pos, end);
      word_begin = end;
    }
    pos = end;
  }
  emit(word_begin, piece.size());
  return first_begin == 0;
}

bool PreTokenizer::apply(const Step& step, std::string_view piece, bool at_start, bool prefix, Pieces& pieces,
                         std::vector<std::string_view>& out) const {
  if (step.kind == Kind::Metaspace) {
    prefix =
        prefix && (step.scheme == PrependScheme::Always || (step.scheme == PrependScheme::First && at_start));
    apply_metaspace(step, piece, prefix, pieces, out);
    return true;  // a prepended character stands at the piece's start
  }
  if (step.kind == Kind::Bert) return apply_bert(piece, out);
  if (step.add_prefix_space && prefix && piece.front() != ' ') {
    std::string& prefixed = pieces.owned.emplace_back();
    prefixed.reserve(piece.size() + 1);
    prefixed += ' ';
    prefixed += piece;
    piece = prefixed;
  }
  if (!step.regex) {
    out.push_back(piece);
    return true;
  }
  // Segments covering the piece: matches and the gaps between them (HF Pattern::find_matches).
  struct Segment {
    size_t begin, end;
    bool match;
  };
  thread_local std::vector<std::pair<size_t, size_t>> matches;
  thread_local std::vector<Segment> segments;
  matches.clear();
  segments.clear();
  step.regex->find_all(piece, matches);
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (b > prev) segments.push_back({prev, b, step.invert});
    segments.push_back({b, e, !step.invert});
    prev = e;
  }
  if (prev < piece.size()) segments.push_back({prev, piece.size(), step.invert});

  size_t first_begin = piece.size();
  auto emit = [&](size_t b, size_t e) {
    if (e <= b) return;
    if (first_begin == piece.size()) first_begin = b;
    out.push_back(piece.substr(b, e - b));
  };
  switch (step.behavior) {
    case SplitBehavior::Removed:
      for (const Segment& s : segments)
        if (!s.match) emit(s.begin, s.end);
      break;
    case SplitBehavior::Isolated:
      for (const Segment& s : segments) emit(s.begin, s.end);
      break;
    case SplitBehavior::Contiguous: {
      // Consecutive segments of the same kind join (only matches can be adjacent).
      size_t begin = 0;
      for (size_t i = 0; i < segments.size(); ++i) {
        bool last = i + 1 == segments.size() || segments[i + 1].match != segments[i].match;
        if (last) {
          emit(begin, segments[i].end);
          if (i + 1 < segments.size()) begin = segments[i + 1].begin;
        }
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      // A match joins the piece before it, unless that piece is itself a match.
      std::vector<std::pair<size_t, size_t>> merged;
      bool previous_match = false;
      for (const Segment& s : segments) {
        if (s.match && !previous_match && !merged.empty()) {
          merged.back().second = s.end;
        } else {
          merged.emplace_back(s.begin, s.end);
        }
        previous_match = s.match;
      }
      for (auto [b, e] : merged) emit(b, e);
      break;
    }
    case SplitBehavior::MergedWithNext: {
      // Mirror image: a match joins the piece after it, unless that piece is itself a match.
      std::vector<std::pair<size_t, size_t>> merged;
      bool next_match = false;
      for (size_t i = segments.size(); i-- > 0;) {
        const Segment& s = segments[i];
        if (s.match && !next_match && !merged.empty()) {
          merged.back().first = s.begin;
        } else {
          merged.emplace_back(s.begin, s.end);
        }
        next_match = s.match;
      }
      for (size_t i = merged.size(); i-- > 0;) emit(merged[i].first, merged[i].second);
      break;
    }
  }
  return first_begin == 0;
}

}  // namespace pt
