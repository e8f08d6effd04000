// Pre-tokenized records, in the columns TRL's SFTTrainer reads from an already processed dataset (one
// with "input_ids"), taken as they are: no tokenizer pass, no BOS or EOS added.
//   input_ids        token ids, each below the tokenizer's vocab size (required, not empty)
//   labels           per token -100 (no loss) or the token's own id: HF's unshifted labels, as TRL writes
//   them attention_mask   1 for a real token, 0 for padding: padding at either end is dropped, padding
//   between
//                    real tokens is refused (an example is one unbroken sequence)
//   completion_mask  1 on the completion of a prompt-completion example (TRL's completion_only_loss)
//   assistant_masks  1 on assistant tokens (transformers' return_assistant_tokens_mask)
// Masks are 0/1 or false/true, one per token. A token is a loss target when every field given says so,
// as TRL builds labels from the masks (with labels given too, they must agree to give loss); with none of
// them every token is. Records packed by TRL ("seq_lengths") are refused: they hold several examples.
#pragma once

#include "data/prepare/record.h"

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <variant>

namespace pt {

// Ids are checked against vocab_size when it is given.
std::variant<EncodedExample, RecordProblem> parse_token_record(simdjson::dom::object record,
                                                               std::optional<int32_t> vocab_size);

}  // namespace pt
