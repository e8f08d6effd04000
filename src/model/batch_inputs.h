// A batch's integer inputs on the model's device: token ids, position ids, targets (the labels aligned with
// the logits), cu_seqlens and, when every row is one attention segment, the rows' real lengths; and where the
// LM head runs on the labelled tokens alone, those tokens.
//
// stage() checks them on the host, where a packer bug or an id beyond the vocabulary becomes a named error
// rather than wrong attention or an out-of-range read, and the device kernels need not report back (which
// would make the host wait for the device in every pass). Then it sends them to a device slot: on cuda
// from pinned memory on a side stream (ops/upload.h), so staging the next batch while a pass runs hides
// the copy. Two slots alternate for batches staged ahead of their pass; a third serves passes that follow
// at once.
#pragma once

#include "core/arena.h"
#include "data/packing/batch.h"
#include "ops/upload.h"

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace pt {

// Targets aligned with the logits, from HF-convention labels (data/packing/batch.h): for causal LM
// target[t] = labels[t + 1] within a row, -100 at the last token of every row (nothing follows it there);
// for masked LM the labels themselves (the logits at t predict the token at t).
std::vector<int32_t> loss_targets(const Batch& batch);

// The tokens the LM head computes logits for. The loss needs only the labelled ones' (those with a target):
// masked LM's 15% or so, an SFT batch's answers. Every token's serve generation and tests that read them.
enum class HeadRows { labelled, every };

class BatchInputs {
 public:
  // A staged batch: valid until its slot is staged again.
  struct Ticket {
    int slot = -1;
    uint64_t serial = 0;
  };
  // What a pass reads: tensors on the device, sized to the batch; valid_lens is empty unless every row is
  // one segment (padding, concat), whose pad tails attention then skips. The head's rows are every token,
  // or where `gathered`, the labelled tokens listed in ascending order in label_rows [head_rows] (empty
  // otherwise); targets [head_rows] holds the rows' targets.
  struct View {
    Tensor ids, positions, targets, cu_seqlens, valid_lens, label_rows;
    int64_t tokens = 0, segments = 0;
    int64_t head_rows = 0;     // the logits' rows: tokens, or the labelled tokens where gathered
    bool gathered = false;     // the head runs on the labelled tokens gathered from the last layer's output
    int32_t max_position = 0;  // the largest position id (dynamic rotary scaling depends on it)
  };

  // position_limit > 0: position ids must stay below it (a model with that many learned positions).
  // objective: the one the model trains on; a batch of the other is an error.
  BatchInputs(Device device, int64_t max_tokens, int64_t vocab_size, int64_t position_limit = 0,
              Objective objective = Objective::kCausalLm);

  // For a pass queued later: the ahead slots alternate, so the next batch can be staged while a pass runs.
  // With HeadRows::labelled the head runs on the labelled tokens gathered wherever masked LM's objective or
  // enough unlabelled tokens make that pay (gathers_labelled in the .cpp), else on every token.
  Ticket stage(const Batch& batch, HeadRows rows = HeadRows::labelled);
  // For a pass queued right after (evaluation, single passes), in a slot of its own.
  Ticket stage_now(const Batch& batch, HeadRows rows = HeadRows::labelled);
  // Compute work queued from now on sees the ticket's inputs. Fails for a ticket whose slot was staged again.
  View acquire(const Ticket& ticket);
  // Every pass that reads the ticket's slot is queued; the slot may be staged again after them.
  void release(const Ticket& ticket);
  int64_t bytes() const { return arena_.bytes(); }  // on the device: every slot

 private:
  static constexpr int kAheadSlots = 2, kNowSlot = 2;
  struct Slot {
    int handle = -1;
    std::unique_ptr<ops::UploadSlot> upload;
    uint64_t serial = 0;
    int64_t tokens = 0, segments = 0, head_rows = 0;
    int32_t max_position = 0;
    bool valid_lens = false, gathered = false;
  };
  Ticket stage_into(int slot, const Batch& batch, HeadRows rows);

  int64_t max_tokens_, vocab_size_, position_limit_;
  Objective objective_;
  Arena arena_;
  std::array<Slot, kAheadSlots + 1> slots_;
  int next_ahead_ = 0;
  uint64_t serial_ = 0;
};

}  // namespace pt
