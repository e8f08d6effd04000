#include "data/tokenizer/pretokenizer.h"

namespace pt {

void PreTokenizer::add_split(std::shared_ptr<const Regex> regex, SplitBehavior behavior, bool invert) {
  steps_.push_back({std::move(regex), behavior, invert, false});
}

void PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  static const auto gpt2 = std::make_shared<const Regex>(kGpt2Pattern, "the GPT-2 pattern");
  steps_.push_back({use_regex ? gpt2 : nullptr, SplitBehavior::Isolated, false, add_prefix_space});
  has_byte_level_ = true;
}

void PreTokenizer::split(std::string_view text, Pieces& out) const {
  out.clear();
  if (!text.empty()) out.list.push_back(text);
  for (const Step& step : steps_) {
    out.scratch.clear();
    for (std::string_view piece : out.list) apply(step, piece, out, out.scratch);
    out.list.swap(out.scratch);
  }
}

void PreTokenizer::apply(const Step& step, std::string_view piece, Pieces& pieces,
                         std::vector<std::string_view>& out) const {
  if (step.add_prefix_space && piece.front() != ' ') {
    std::string& prefixed = pieces.owned.emplace_back();
    prefixed.reserve(piece.size() + 1);
    prefixed += ' ';
    prefixed += piece;
    piece = prefixed;
  }
  if (!step.regex) {
    out.push_back(piece);
    return;
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

  auto emit = [&](size_t b, size_t e) {
    if (e > b) out.push_back(piece.substr(b, e - b));
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
}

}  // namespace pt
