// tokenizer.json (data/tokenizer/tokenizer_json.cpp). A tokenizer that loads encodes any bytes (text,
// its own special tokens, invalid UTF-8) to ids below its vocab size that decode, and names its specials
// by ids it has.
#include "data/tokenizer/tokenizer.h"
#include "fuzz_util.h"

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<pt::Tokenizer> tok;
  if (!pt::fuzz::parses(
          [&] { tok.emplace(pt::Tokenizer::from_json(pt::fuzz::as_text(data, size), "fuzz")); }))
    return 0;
  const int32_t vocab = tok->vocab_size();
  PT_FUZZ_CHECK(vocab >= 0);
  auto in_vocab = [&](int32_t id) { return id >= 0 && id < vocab; };
  for (std::string_view text :
       {std::string_view("Hello, world! It's 2024.\n\n  caf\xC3\xA9 na\xC3\xAFve \xE6\x97\xA5\xE6\x9C\xAC "
                         "\xF0\x9F\x99\x82\t<|endoftext|><|im_start|>user\r\n x"),
        std::string_view("\xFF\xFE\x80 \xC3 broken\xE2\x82 utf-8 \xED\xA0\x80"), std::string_view()}) {
    auto ids = tok->encode(text);
    for (int32_t id : ids) {
      PT_FUZZ_CHECK(in_vocab(id));
      (void)tok->id_to_token(id);
    }
    (void)tok->decode(ids);
  }
  for (auto id : {tok->eos_id(), tok->bos_id(), tok->pad_id()}) PT_FUZZ_CHECK(!id || in_vocab(*id));
  for (std::string_view token : {"<|endoftext|>", "a", "\xC4\xA0the"})
    if (auto id = tok->token_to_id(token)) PT_FUZZ_CHECK(in_vocab(*id));
  return 0;
}
