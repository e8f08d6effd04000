#include "data/tokenizer/normalizer.h"

#include "core/error.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <utility>

namespace pt {

namespace {

int options_for(NormalForm form) {
  switch (form) {
    case NormalForm::NFC:
      return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case NormalForm::NFD:
      return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case NormalForm::NFKC:
      return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    case NormalForm::NFKD:
      return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  }
  return 0;
}

// Characters that utf8proc (Unicode 15) decomposes or gives a combining class but HF's older Unicode
// tables do not know, found by comparing every code point with HF tokenizers 0.23: HF leaves them as
// they are and they block composition and reordering like any starter, so they are passed through.
constexpr std::array<std::pair<char32_t, char32_t>, 46> kUnknownToHf{{
    {0x7FD, 0x7FD},     {0x898, 0x89F},     {0x8CA, 0x8D3},     {0x9FE, 0x9FE},     {0xC3C, 0xC3C},
    {0xD3B, 0xD3C},     {0xEBA, 0xEBA},     {0x1715, 0x1715},   {0x1ABF, 0x1ACE},   {0x1DF6, 0x1DFA},
    {0x32FF, 0x32FF},   {0xA7F2, 0xA7F4},   {0xA82C, 0xA82C},   {0xAB69, 0xAB69},   {0x10781, 0x10785},
    {0x10787, 0x107B0}, {0x107B2, 0x107BA}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF},
    {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E},
    {0x11839, 0x1183A}, {0x11938, 0x11938}, {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0},
    {0x11A34, 0x11A34}, {0x11A47, 0x11A47}, {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45},
    {0x11D97, 0x11D97}, {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1}, {0x1E030, 0x1E06D}, {0x1E08F, 0x1E08F},
    {0x1E130, 0x1E136}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF}, {0x1F16C, 0x1F16C},
    {0x1FBF0, 0x1FBF9},
}};

// Length of the UTF-8 character at `pos`, or 1 for a byte that does not start a valid one.
size_t char_length(std::string_view s, size_t pos) {
  utf8proc_int32_t cp;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + pos),
                            static_cast<utf8proc_ssize_t>(std::min<size_t>(s.size() - pos, 4)), &cp);
  return n > 0 ? static_cast<size_t>(n) : 1;
}

bool unknown_to_hf(utf8proc_int32_t cp) {
  auto c = static_cast<char32_t>(cp);
  if (c < kUnknownToHf.front().first) return false;
  auto it = std::upper_bound(kUnknownToHf.begin(), kUnknownToHf.end(), c,
                             [](char32_t v, const auto& range) { return v < range.first; });
  return it != kUnknownToHf.begin() && c <= std::prev(it)->second;
}

// Normalises valid UTF-8 (ASCII is its own normal form under every form, so it is copied as is).
void normalize_valid(std::string_view valid, NormalForm form, std::string& out) {
  bool ascii = true;
  for (char c : valid) ascii &= static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    out += valid;
    return;
  }
  utf8proc_uint8_t* result = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                        static_cast<utf8proc_ssize_t>(valid.size()), &result,
                        static_cast<utf8proc_option_t>(options_for(form)));
  if (n < 0) fail("unicode normalisation failed: {}", utf8proc_errmsg(n));
  out.append(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  std::free(result);
}

}  // namespace

std::string normalize_unicode(std::string_view text, NormalForm form) {
  std::string out;
  out.reserve(text.size());
  size_t run_start = 0, i = 0;
  while (i < text.size()) {
    utf8proc_int32_t cp;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                              static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n > 0 && !unknown_to_hf(cp)) {
      i += static_cast<size_t>(n);
      continue;
    }
    // An invalid byte, or a character HF does not normalise, stays as it is.
    size_t keep = n > 0 ? static_cast<size_t>(n) : 1;
    normalize_valid(text.substr(run_start, i - run_start), form, out);
    out += text.substr(i, keep);
    run_start = i += keep;
  }
  normalize_valid(text.substr(run_start), form, out);
  return out;
}

namespace {

// Replaces each [begin, end) of `matches` (in order, disjoint) by `content`. `lead` (in and out) is the
// length of the text's prefix that comes from the input's first character, as HF's alignments have it:
// a replacement belongs to the last character it removed.
std::string replace(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches,
                    std::string_view content, size_t& lead) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0, new_lead = 0;
  bool leading = lead > 0;  // still within the part that comes from the first character
  auto keep = [&](size_t begin, size_t end) {
    out += text.substr(begin, end - begin);
    if (!leading) return;
    new_lead += std::min(end, lead) - std::min(begin, lead);
    leading = end < lead;
  };
  for (auto [begin, end] : matches) {
    keep(pos, begin);
    out += content;
    if (leading) {
      if (end <= lead) new_lead += content.size();
      leading = end < lead;
    }
    pos = end;
  }
  keep(pos, text.size());
  lead = new_lead;
  return out;
}

}  // namespace

Normalizer::Normalizer(const std::vector<NormalForm>& forms) {
  for (NormalForm form : forms) add_normal_form(form);
}

void Normalizer::add_normal_form(NormalForm form) { steps_.push_back({Kind::NormalForm, form, {}, {}, {}}); }

void Normalizer::add_prepend(std::string prefix) {
  steps_.push_back({Kind::Prepend, {}, std::move(prefix), {}, {}});
}

void Normalizer::add_replace(std::string literal, std::string content) {
  PT_ASSERT(!literal.empty());
  steps_.push_back({Kind::Replace, {}, std::move(literal), {}, std::move(content)});
}

void Normalizer::add_replace(std::shared_ptr<const Regex> regex, std::string content) {
  steps_.push_back({Kind::Replace, {}, {}, std::move(regex), std::move(content)});
}

void Normalizer::add_bert(const BertNormalizerOptions& options) {
  Step step{Kind::Bert, {}, {}, {}, {}};
  step.bert = options;
  steps_.push_back(std::move(step));
}

std::string Normalizer::apply(std::string_view text, bool* at_start, bool prepend) const {
  std::string s(text);
  // Bytes at the front that come from the input's first character (HF: whose original offset is 0).
  size_t lead = 0;
  if (at_start && *at_start && !s.empty()) lead = char_length(s, 0);
  thread_local std::vector<std::pair<size_t, size_t>> matches;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::NormalForm: {
        std::string normal = normalize_unicode(s, step.form);
        if (lead > 0) {
          // What the leading part becomes on its own, as far as the whole text still starts with it
          // (a mark reordered in front comes from later); a character composed from the first one
          // still starts at offset 0.
          std::string alone = normalize_unicode(std::string_view(s).substr(0, lead), step.form);
          auto diff = std::mismatch(alone.begin(), alone.end(), normal.begin(), normal.end());
          lead = static_cast<size_t>(diff.first - alone.begin());
          while (lead > 0 && lead < normal.size() && (static_cast<uint8_t>(normal[lead]) & 0xC0) == 0x80)
            --lead;
          if (lead == 0 && !normal.empty()) lead = char_length(normal, 0);
        }
        s = std::move(normal);
        break;
      }
      case Kind::Bert: {
        std::string normal = bert_normalize(s, step.bert);
        if (lead > 0) {
          // As far as the text still starts with what the first character becomes on its own; nothing
          // when clean_text deleted it.
          std::string alone = bert_normalize(std::string_view(s).substr(0, lead), step.bert);
          auto diff = std::mismatch(alone.begin(), alone.end(), normal.begin(), normal.end());
          lead = static_cast<size_t>(diff.first - alone.begin());
          while (lead > 0 && lead < normal.size() && (static_cast<uint8_t>(normal[lead]) & 0xC0) == 0x80)
            --lead;
        }
        s = std::move(normal);
        break;
      }
      case Kind::Prepend:
        if (s.empty() || !prepend) break;
        s.insert(0, step.text);
        if (lead > 0) lead += step.text.size();
        break;
      case Kind::Replace:
        matches.clear();
        if (step.regex) {
          step.regex->find_all(s, matches);
        } else {
          for (size_t hit = s.find(step.text); hit != std::string::npos;
               hit = s.find(step.text, hit + step.text.size()))
            matches.emplace_back(hit, hit + step.text.size());
        }
        s = replace(s, matches, step.content, lead);
        break;
    }
  }
  if (at_start) *at_start = lead > 0;
  return s;
}

}  // namespace pt
