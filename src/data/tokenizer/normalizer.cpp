#include "data/tokenizer/normalizer.h"

#include "core/error.h"

#include <utf8proc.h>

#include <cstdlib>

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

std::string normalize(std::string_view text, NormalForm form) {
  std::string out;
  out.reserve(text.size());
  size_t run_start = 0, i = 0;
  while (i < text.size()) {
    utf8proc_int32_t cp;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + i),
                              static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    if (n > 0) {
      i += static_cast<size_t>(n);
      continue;
    }
    normalize_valid(text.substr(run_start, i - run_start), form, out);
    out += text[i];  // an invalid byte stays as it is
    run_start = ++i;
  }
  normalize_valid(text.substr(run_start), form, out);
  return out;
}

}  // namespace

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (NormalForm form : steps_) s = normalize(s, form);
  return s;
}

}  // namespace pt
