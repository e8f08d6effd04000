// The batch: the contract between data and model. Every packing strategy produces it; every backend
// consumes it. Tokens are laid out as `rows` rows of `row_len` tokens, flattened row-major.
//
// Labels follow the Hugging Face convention of the batch's objective, -100 where no loss is taken:
// - causal LM: labels[t] is the token at t itself (the model shifts: logits at t-1 predict labels[t]);
//   -100 on masked (prompt) tokens, padding, and the first token of every example, so that no example
//   is trained to predict across a boundary.
// - masked LM (data/packing/masked_lm.h): labels[t] is the original token at t where t was chosen for
//   masking, predicted by the logits at t itself (no shift); -100 everywhere else.
#pragma once

#include <cstdint>
#include <vector>

namespace pt {

inline constexpr int32_t kIgnoreLabel = -100;

enum class Objective {
  kCausalLm,  // next-token prediction (decoders)
  kMaskedLm,  // BERT's masked-token prediction (encoders)
};

// Where a run of a batch's tokens came from: tokens [begin, begin + length) of an example, at flattened
// offset `at`. Pieces are in batch order and cover every real token.
struct ExamplePiece {
  int64_t example = 0;  // index in the split the batch was packed from (data-parallel: the dataset's)
  int32_t begin = 0, at = 0, length = 0;
};

struct Batch {
  int32_t rows = 0;
  int32_t row_len = 0;
  std::vector<int32_t> input_ids;     // rows * row_len; padding slots hold pad_id
  std::vector<int32_t> labels;        // rows * row_len
  std::vector<int32_t> position_ids;  // rows * row_len; restart at 0 where attention restarts
  // Attention segments in flattened token coordinates: attention is causal within
  // [cu_seqlens[i], cu_seqlens[i+1]) and never crosses a boundary. Covers all rows*row_len tokens.
  // padding: one segment per row (pads trail the example, so causal attention keeps them out of it);
  // concat: one segment per row; concat-posid, flatten, bfd: one per example piece, plus a segment of
  // its own for the pad tail of a bfd row or of the epoch's last concat-posid row.
  std::vector<int32_t> cu_seqlens;
  int32_t max_seqlen = 0;  // longest segment, pad segments included
  // Real (non-pad) tokens per row, so a backend can skip the pad tail of each row.
  std::vector<int32_t> row_real_len;

  int64_t real_tokens = 0;       // tokens of examples
  int64_t processed_tokens = 0;  // rows * row_len: what the model computes on
  int64_t loss_tokens = 0;       // labels != -100
  int32_t examples = 0;          // examples that start in this batch
  int32_t examples_split = 0;    // examples that start here and run past their row (concat, concat-posid)
  Objective objective = Objective::kCausalLm;  // how labels are to be read (above)
  std::vector<ExamplePiece> pieces;

  int64_t num_tokens() const { return int64_t{rows} * row_len; }
};

}  // namespace pt
