#include "data/prepare/length_policy.h"

#include <fmt/format.h>

#include <algorithm>

namespace pt {

namespace {
bool has_loss(const EncodedExample& e, size_t begin, size_t end) {
  return std::any_of(e.loss_mask.begin() + static_cast<std::ptrdiff_t>(begin),
                     e.loss_mask.begin() + static_cast<std::ptrdiff_t>(end),
                     [](uint8_t m) { return m != 0; });
}

void keep_prefix(EncodedExample& e, size_t n) {
  e.tokens.resize(n);
  e.loss_mask.resize(n);
}
}  // namespace

LengthOutcome apply_length_policy(LongPolicy policy, int64_t max_len, EncodedExample& example) {
  size_t n = example.tokens.size(), limit = static_cast<size_t>(max_len);
  LengthOutcome out;
  if (n <= limit) {
    out.piece_lengths.push_back(static_cast<uint32_t>(n));
    return out;
  }
  switch (policy) {
    case LongPolicy::kDrop:
      out.action = fmt::format("skipped ({} tokens > --max-len {})", n, max_len);
      keep_prefix(example, 0);
      break;
    case LongPolicy::kTruncate:
      if (has_loss(example, 0, limit)) {
        out.piece_lengths.push_back(static_cast<uint32_t>(limit));
        out.action = fmt::format("truncated from {} to {} tokens", n, max_len);
        keep_prefix(example, limit);
      } else {
        out.action = fmt::format("skipped ({} tokens; its first {} have no loss target)", n, max_len);
        keep_prefix(example, 0);
      }
      break;
    case LongPolicy::kSplit: {
      size_t kept = 0, pieces = 0, dropped = 0;
      for (size_t begin = 0; begin < n; begin += limit) {
        size_t end = std::min(n, begin + limit);
        ++pieces;
        if (!has_loss(example, begin, end)) {
          ++dropped;
          continue;
        }
        // Compacts kept pieces to the front; kept <= begin, so nothing unread is overwritten.
        std::copy(example.tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                  example.tokens.begin() + static_cast<std::ptrdiff_t>(end),
                  example.tokens.begin() + static_cast<std::ptrdiff_t>(kept));
        std::copy(example.loss_mask.begin() + static_cast<std::ptrdiff_t>(begin),
                  example.loss_mask.begin() + static_cast<std::ptrdiff_t>(end),
                  example.loss_mask.begin() + static_cast<std::ptrdiff_t>(kept));
        kept += end - begin;
        out.piece_lengths.push_back(static_cast<uint32_t>(end - begin));
      }
      keep_prefix(example, kept);
      out.action = fmt::format("split ({} tokens into {} pieces of <= {}{})", n, pieces, max_len,
                               dropped ? fmt::format(", {} without a loss target dropped", dropped) : "");
      break;
    }
  }
  return out;
}

}  // namespace pt
