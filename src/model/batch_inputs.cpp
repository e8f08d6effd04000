#include "model/batch_inputs.h"

#include "core/error.h"

#include <algorithm>

namespace pt {

std::vector<int32_t> loss_targets(const Batch& batch) {
  if (batch.objective == Objective::kMaskedLm) return batch.labels;
  std::vector<int32_t> targets(batch.labels.size(), kIgnoreLabel);
  for (size_t t = 0; t + 1 < batch.labels.size(); ++t)
    if ((t + 1) % static_cast<size_t>(batch.row_len) != 0) targets[t] = batch.labels[t + 1];
  return targets;
}

namespace {

// The segment table as attention reads it; a packer bug surfaces here as an error, not as wrong attention.
void check_segments(const Batch& batch) {
  const auto& cu = batch.cu_seqlens;
  const int64_t T = batch.num_tokens();
  if (cu.size() < 2 || cu.front() != 0 || cu.back() != T)
    fail(
        "batch: cu_seqlens must run from 0 to the batch's {} tokens in at least one segment (it has {} "
        "entries, {} .. {}); the packer that built it is at fault",
        T, cu.size(), cu.empty() ? 0 : cu.front(), cu.empty() ? 0 : cu.back());
  for (size_t s = 1; s < cu.size(); ++s)
    if (cu[s] < cu[s - 1])
      fail("batch: cu_seqlens decreases at segment {} ({} after {}); the packer that built it is at fault",
           s - 1, cu[s], cu[s - 1]);
  // Rows that are exactly one segment each give attention their real lengths.
  if (cu.size() - 1 != static_cast<size_t>(batch.rows)) return;
  if (batch.row_real_len.size() != cu.size() - 1)
    fail("batch: {} row lengths for {} rows; the packer that built it is at fault", batch.row_real_len.size(),
         batch.rows);
  for (size_t s = 0; s + 1 < cu.size(); ++s)
    if (batch.row_real_len[s] < 0 || batch.row_real_len[s] > cu[s + 1] - cu[s])
      fail("batch: row {} has {} real tokens, outside [0, {}]; the packer that built it is at fault", s,
           batch.row_real_len[s], cu[s + 1] - cu[s]);
}

void check_sizes(const Batch& batch) {
  const auto T = static_cast<size_t>(batch.num_tokens());
  if (batch.input_ids.size() != T || batch.labels.size() != T || batch.position_ids.size() != T)
    fail(
        "batch: {} rows of {} tokens but {} ids, {} labels and {} position ids; the packer that built it is "
        "at fault",
        batch.rows, batch.row_len, batch.input_ids.size(), batch.labels.size(), batch.position_ids.size());
}

// A slot's ints: ids, positions and targets [T] each, cu_seqlens [T + 1], valid lengths [T] and the
// labelled rows [T], for the model's T = max_tokens.
constexpr int64_t slot_ints(int64_t T) { return 6 * T + 1; }

// Whether the head runs on the labelled tokens gathered rather than on all T: always for masked LM, and for
// causal LM where at least 1/16 of the tokens have no target. Each row it skips saves three GEMMs of
// hidden x vocab and the loss over the vocab; the gather and the gradient's scatter copy about two rows of
// hidden per token. At 1/16 skipped and a 32k vocabulary that is about 6x in the skipping's favour; below,
// as in concat batches (one token a row has no target), the copies would cost more than they save.
bool gathers_labelled(Objective objective, int64_t tokens, int64_t labelled) {
  return objective == Objective::kMaskedLm || (tokens - labelled) * 16 >= tokens;
}

}  // namespace

BatchInputs::BatchInputs(Device device, int64_t max_tokens, int64_t vocab_size, int64_t position_limit,
                         Objective objective)
    : max_tokens_(max_tokens),
      vocab_size_(vocab_size),
      position_limit_(position_limit),
      objective_(objective),
      arena_(device) {
  for (Slot& s : slots_) {
    const int64_t ints = slot_ints(max_tokens);
    s.handle = arena_.reserve(DType::i32, {ints});
    s.upload = std::make_unique<ops::UploadSlot>(device, static_cast<size_t>(ints) * 4);
  }
  arena_.allocate();
}

BatchInputs::Ticket BatchInputs::stage(const Batch& batch, HeadRows rows) {
  const int slot = next_ahead_;
  next_ahead_ = (next_ahead_ + 1) % kAheadSlots;
  return stage_into(slot, batch, rows);
}

BatchInputs::Ticket BatchInputs::stage_now(const Batch& batch, HeadRows rows) {
  return stage_into(kNowSlot, batch, rows);
}

BatchInputs::Ticket BatchInputs::stage_into(int slot, const Batch& batch, HeadRows rows) {
  const int64_t T = batch.num_tokens(), Tm = max_tokens_;
  if (T == 0) fail("empty batch");
  if (T > Tm)
    fail("a batch of {} tokens exceeds the model's activation arena ({} tokens); lower the batch size", T,
         Tm);
  if (batch.objective != objective_)
    fail(
        "batch: {} batch for a model that trains on {} batches; train a decoder on causal-LM batches and "
        "an encoder (BERT) on masked-LM batches (--objective {})",
        batch.objective == Objective::kMaskedLm ? "a masked-LM" : "a causal-LM",
        objective_ == Objective::kMaskedLm ? "masked-LM" : "causal-LM",
        objective_ == Objective::kMaskedLm ? "mlm" : "causal");
  check_sizes(batch);
  check_segments(batch);
  Slot& s = slots_[static_cast<size_t>(slot)];
  auto* host = reinterpret_cast<int32_t*>(s.upload->host());
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = batch.input_ids[static_cast<size_t>(t)];
    if (id < 0 || id >= vocab_size_)
      fail(
          "batch: token {} has id {}, outside the model's vocabulary of {}; check the tokenizer's vocab size "
          "against the model's",
          t, id, vocab_size_);
    host[t] = id;
  }
  int32_t max_position = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t p = batch.position_ids[static_cast<size_t>(t)];
    if (p < 0) fail("batch: token {} has position id {}; position ids must be >= 0", t, p);
    if (position_limit_ > 0 && p >= position_limit_)
      fail(
          "batch: token {} has position id {}, outside the model's {} learned positions (n_positions); "
          "prepare the data with --max-len {} or less",
          t, p, position_limit_, position_limit_);
    max_position = std::max(max_position, p);
    host[Tm + t] = p;
  }
  const std::vector<int32_t> targets = loss_targets(batch);
  const int64_t shift = objective_ == Objective::kCausalLm ? 1 : 0;  // the token whose label a target is
  int64_t labelled = 0;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t target = targets[static_cast<size_t>(t)];
    if (target == kIgnoreLabel) continue;
    if (target < 0 || target >= vocab_size_)
      fail("batch: label of token {} is {}, neither in the vocabulary of {} nor the ignore label {}",
           t + shift, target, vocab_size_, kIgnoreLabel);
    ++labelled;
  }
  s.gathered = rows == HeadRows::labelled && gathers_labelled(objective_, T, labelled);
  if (s.gathered) {  // the labelled tokens and their targets, compacted
    int64_t r = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (targets[static_cast<size_t>(t)] == kIgnoreLabel) continue;
      host[2 * Tm + r] = targets[static_cast<size_t>(t)];
      host[5 * Tm + 1 + r++] = static_cast<int32_t>(t);
    }
    s.head_rows = labelled;
  } else {
    std::copy(targets.begin(), targets.end(), host + 2 * Tm);
    s.head_rows = T;
  }
  std::copy(batch.cu_seqlens.begin(), batch.cu_seqlens.end(), host + 3 * Tm);
  s.tokens = T;
  s.max_position = max_position;
  s.segments = static_cast<int64_t>(batch.cu_seqlens.size()) - 1;
  s.valid_lens = s.segments == batch.rows;
  if (s.valid_lens) std::copy(batch.row_real_len.begin(), batch.row_real_len.end(), host + 4 * Tm + 1);
  s.upload->send(arena_.view(s.handle).data);
  s.serial = ++serial_;
  return {slot, s.serial};
}

BatchInputs::View BatchInputs::acquire(const Ticket& ticket) {
  if (ticket.slot < 0 || ticket.slot > kNowSlot ||
      slots_[static_cast<size_t>(ticket.slot)].serial != ticket.serial)
    fail(
        "BatchInputs: this staged batch has been replaced by a later one (more than {} batches staged ahead "
        "of their passes); stage each batch after the pass two before it is queued",
        kAheadSlots);
  Slot& s = slots_[static_cast<size_t>(ticket.slot)];
  s.upload->acquire();
  auto* base = static_cast<int32_t*>(arena_.view(s.handle).data);
  const Device device = arena_.device();
  const int64_t T = s.tokens, Tm = max_tokens_;
  auto ints = [&](int64_t offset, int64_t n) { return Tensor(base + offset, DType::i32, {n}, device); };
  return {ints(0, T),
          ints(Tm, T),
          ints(2 * Tm, s.head_rows),
          ints(3 * Tm, s.segments + 1),
          s.valid_lens ? ints(4 * Tm + 1, s.segments) : Tensor(),
          s.gathered ? ints(5 * Tm + 1, s.head_rows) : Tensor(),
          T,
          s.segments,
          s.head_rows,
          s.gathered,
          s.max_position};
}

void BatchInputs::release(const Ticket& ticket) {
  slots_[static_cast<size_t>(ticket.slot)].upload->release();
}

}  // namespace pt
