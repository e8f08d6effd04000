// Which tokens of a rendered chat carry loss, given byte ranges of the text (the assistant's parts).
//
// The text is tokenized once; each token's byte range in it is recovered by aligning the tokens' bytes
// (each token decoded alone, with the space of a leading "▁" kept) with the text. For byte-level BPE the
// two are the same bytes and every range is exact. Where the tokenizer changed the text, the bytes differ
// for a stretch and the alignment resynchronises after it (the shortest stretch after which 4 bytes agree
// again, up to 128 bytes on either side):
//   - bytes only in the tokens (the "▁" a SentencePiece tokenizer prepends) belong to where they were
//     added; a token made only of such bytes gets an empty range there;
//   - text bytes no token spells (whitespace an rstrip added token absorbs) go to the token before;
//   - a stretch spelled with other bytes (normalisation, byte-fallback tokens decoded alone) is covered
//     by every token spelling part of it, as HF's offsets give each byte-fallback token its character.
// The Tokenizer has no offsets of its own; with them this would be exact everywhere.
#pragma once

#include "data/tokenizer/tokenizer.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pt {

using ByteRange = std::pair<size_t, size_t>;  // [first, second) in bytes

// Byte range of each of `ids` in `text`, starts never decreasing, together covering the text. Nullopt
// when the tokens do not spell the text (no resynchronisation within 128 bytes).
std::optional<std::vector<ByteRange>> token_byte_ranges(const Tokenizer& tokenizer, std::string_view text,
                                                        std::span<const int32_t> ids);

// The same, from each token's bytes (what token_byte_ranges aligns).
std::optional<std::vector<ByteRange>> align_token_bytes(std::string_view text,
                                                        const std::vector<std::string>& token_bytes);

// As transformers' return_assistant_tokens_mask: sets mask[t] = 1 for every token overlapping one of
// `spans`, i.e. one that starts before a span ends and ends after it starts (an empty token inside a
// span counts). Spans are taken in order of their start.
void mark_overlapping(std::span<const ByteRange> tokens, std::vector<ByteRange> spans,
                      std::span<uint8_t> mask);

}  // namespace pt
