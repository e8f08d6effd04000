#include "model/sparsity.h"

#include "core/device.h"
#include "core/error.h"
#include "ops/counter_hash.h"
#include "ops/elementwise.h"
#include "ops/sparse24.h"
#include "ops/sparse_linear.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

namespace pt {

const char* ffn_linear_name(FfnLinear which) { return which == FfnLinear::gate_up ? "gate_up" : "down"; }

void SparsityConfig::validate(const ModelConfig& model, int64_t total_steps) const {
  if (!enabled) return;
  if (!gate_up && !down) fail("--sparse-layers: name at least one of gate_up and down");
  // Transposable masks cover aligned 4x4 blocks of [2F, C] and [C, F]; F % 4 also keeps the blocks of the
  // fused gate|up matrix inside gate or up, so each HF tensor has a mask of its own.
  if (model.hidden_size % 4 != 0 || model.intermediate_size % 4 != 0)
    fail(
        "--sparse24: 2:4 masks need hidden_size and intermediate_size to be multiples of 4 (got {} and {}); "
        "choose another model size or train dense",
        model.hidden_size, model.intermediate_size);
  if (mask_every <= 0) fail("--mask-every must be positive (got {})", mask_every);
  if (!(masked_decay >= 0) || !std::isfinite(masked_decay))
    fail("--masked-decay must be 0 or positive (got {})", masked_decay);
  if (masked_decay_warmup < 0)
    fail("--masked-decay-warmup must be 0 or positive (got {})", masked_decay_warmup);
  if (!(dense_finetune >= 0 && dense_finetune < 1))
    fail("--dense-finetune is the fraction of the steps trained dense at the end: in [0, 1) (got {})",
         dense_finetune);
  if (dense_warmup < 0) fail("--dense-warmup must be 0 or positive (got {})", dense_warmup);
  const SparsitySchedule schedule(*this, total_steps);
  if (schedule.sparse_begin() >= schedule.sparse_end())
    fail(
        "--sparse24: no step of the {} trains sparse (--dense-warmup {} and --dense-finetune {} leave steps "
        "[{}, {})); lower them or raise --steps",
        total_steps, dense_warmup, dense_finetune, schedule.sparse_begin(), schedule.sparse_end());
}

std::string SparsityConfig::layers() const {
  return gate_up && down ? "gate_up,down" : gate_up ? "gate_up" : "down";
}

WeightGrad parse_weight_grad(const std::string& text) {
  if (text == "auto") return WeightGrad::automatic;
  if (text == "mvue") return WeightGrad::mvue;
  if (text == "dense") return WeightGrad::dense;
  fail("--sparse-dw takes auto, mvue or dense (got \"{}\")", text);
}

const char* weight_grad_name(WeightGrad mode) {
  switch (mode) {
    case WeightGrad::automatic: return "auto";
    case WeightGrad::mvue: return "mvue";
    case WeightGrad::dense: return "dense";
  }
  return "?";
}

WeightGrad SparsityConfig::weight_grad_on(Device device) const {
  if (weight_grad != WeightGrad::automatic) return weight_grad;
  return ops::sparse_weight_grad_gemm(device) ? WeightGrad::automatic : WeightGrad::dense;
}

void parse_sparse_layers(const std::string& list, SparsityConfig& config) {
  config.gate_up = config.down = false;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string name = list.substr(start, comma - start);
    if (name == "gate_up")
      config.gate_up = true;
    else if (name == "down")
      config.down = true;
    else
      fail("--sparse-layers takes gate_up, down or gate_up,down (got \"{}\" in \"{}\")", name, list);
    start = comma + 1;
  }
}

SparsitySchedule::SparsitySchedule(const SparsityConfig& c, int64_t total_steps)
    : begin_(c.dense_warmup),
      end_(total_steps - std::llround(c.dense_finetune * static_cast<double>(total_steps))),
      every_(std::max<int64_t>(1, c.mask_every)),
      decay_warmup_(c.masked_decay_warmup),
      decay_(c.masked_decay) {
  if (!c.enabled) begin_ = end_ = 0;
}

double SparsitySchedule::decay_at(int64_t step) const {
  if (!sparse_at(step)) return 0;
  if (decay_warmup_ <= 0) return decay_;
  const double ramp = static_cast<double>(step - begin_ + 1) / static_cast<double>(decay_warmup_);
  return decay_ * std::min(1.0, ramp);
}

namespace {

uint64_t splitmix64(uint64_t x) { return ops::mix64(x + 0x9E3779B97F4A7C15ull); }

}  // namespace

uint64_t MvueSeed::at(int layer, FfnLinear which) const {
  uint64_t h = splitmix64(run_seed);
  for (uint64_t v : {static_cast<uint64_t>(step), static_cast<uint64_t>(micro_batch),
                     static_cast<uint64_t>(layer), static_cast<uint64_t>(which)})
    h = splitmix64(h ^ v);
  return h;
}

FfnMasks::FfnMasks(const ModelConfig& model, const SparsityConfig& config, Device device)
    : layout_(model), arena_(device) {
  const int64_t C = model.hidden_size, F = model.intermediate_size, U = model.mlp_up_rows();
  std::vector<int> handles;
  int64_t largest = 0;
  for (int l = 0; l < model.num_hidden_layers; ++l) {
    const LayerParams& p = layout_.layer(l);
    if (config.sparse(FfnLinear::gate_up))
      linears_.push_back({l, FfnLinear::gate_up, p.w_up, U, C, {}});
    if (config.sparse(FfnLinear::down)) linears_.push_back({l, FfnLinear::down, p.w_down, C, F, {}});
  }
  for (const Linear& l : linears_) {
    handles.push_back(arena_.reserve(DType::u8, {l.rows, l.cols}));
    largest = std::max(largest, l.rows * l.cols);
  }
  const int scratch = arena_.reserve(DType::u8, {largest});
  arena_.allocate();
  for (size_t i = 0; i < linears_.size(); ++i) linears_[i].mask = arena_.view(handles[i]);
  scratch_ = arena_.view(scratch);
}

const Tensor* FfnMasks::find(int layer, FfnLinear which) const {
  for (const Linear& l : linears_)
    if (l.layer == layer && l.which == which) return &l.mask;
  return nullptr;
}

Tensor FfnMasks::weight(const Tensor& flat, const Linear& l) const {
  if (flat.numel() != layout_.total() || flat.device != arena_.device())
    fail("2:4 masks: the flat weights {} do not fit the model ({} parameters on {})", flat.str(),
         layout_.total(), device_name(arena_.device()));
  return Tensor(static_cast<char*>(flat.data) + l.offset * dtype_size(flat.dtype), flat.dtype,
                {l.rows, l.cols}, flat.device);
}

MaskUpdate FfnMasks::recompute(const Tensor& master_params) {
  MaskUpdate u;
  u.first = !computed_;
  for (const Linear& l : linears_) {
    const Tensor fresh(scratch_.data, DType::u8, {l.rows, l.cols}, scratch_.device);
    ops::transposable_mask24(weight(master_params, l), fresh);
    if (!u.first) u.flips += ops::mask_flips(fresh, l.mask);
    u.entries += l.mask.numel();
    ops::copy(fresh, l.mask);
  }
  computed_ = true;
  return u;
}

void FfnMasks::masked_decay(const Tensor& master_params, double lambda, const Tensor& grads) const {
  PT_ASSERT(computed_);
  for (const Linear& l : linears_)
    ops::masked_decay(weight(master_params, l), l.mask, lambda, weight(grads, l));
}

std::vector<FfnMasks::Piece> FfnMasks::pieces_in(int64_t begin, int64_t n) const {
  std::vector<Piece> out;
  for (const Linear& l : linears_) {
    const int64_t b = std::max(begin, l.offset), e = std::min(begin + n, l.offset + l.mask.numel());
    if (b >= e) continue;
    out.push_back(
        {b, e - b,
         Tensor(static_cast<uint8_t*>(l.mask.data) + (b - l.offset), DType::u8, {1, e - b}, l.mask.device)});
  }
  // The linears are listed by layer, gate|up before down, which is their order in the flat layout.
  PT_ASSERT(std::is_sorted(out.begin(), out.end(),
                           [](const Piece& a, const Piece& b) { return a.offset < b.offset; }));
  return out;
}

namespace {

// Elements [at, at + n) of a range tensor as a [1, n] view (the element-wise ops take 2-D tensors).
Tensor row_of(const Tensor& range, int64_t at, int64_t n) {
  return Tensor(static_cast<char*>(range.data) + at * dtype_size(range.dtype), range.dtype, {1, n},
                range.device);
}

void check_range(const char* op, const Tensor& master_range, const Tensor& other, Device device) {
  if (master_range.ndim != 1 || other.ndim != 1 || master_range.numel() != other.numel() ||
      master_range.device != device || other.device != device)
    fail("2:4 masks: {} takes two flat ranges of one length on {}, got {} and {}", op, device_name(device),
         master_range.str(), other.str());
}

}  // namespace

void FfnMasks::masked_decay_range(const Tensor& master_range, int64_t begin, double lambda,
                                  const Tensor& grad_range) const {
  PT_ASSERT(computed_);
  check_range("masked_decay_range", master_range, grad_range, arena_.device());
  for (const Piece& p : pieces_in(begin, master_range.numel()))
    ops::masked_decay(row_of(master_range, p.offset - begin, p.length), p.mask, lambda,
                      row_of(grad_range, p.offset - begin, p.length));
}

void FfnMasks::masked_cast_range(const Tensor& master_range, int64_t begin, const Tensor& out_range) const {
  PT_ASSERT(computed_);
  check_range("masked_cast_range", master_range, out_range, arena_.device());
  // Dense stretches are cast, sparse ones cast through their masks, each element written once.
  int64_t at = 0;
  auto dense_to = [&](int64_t end) {
    if (end > at) ops::cast(row_of(master_range, at, end - at), row_of(out_range, at, end - at));
  };
  for (const Piece& p : pieces_in(begin, master_range.numel())) {
    dense_to(p.offset - begin);
    ops::apply_mask(row_of(master_range, p.offset - begin, p.length), p.mask,
                    row_of(out_range, p.offset - begin, p.length));
    at = p.offset - begin + p.length;
  }
  dense_to(master_range.numel());
}

void FfnMasks::apply_on_host(std::span<float> params) const {
  PT_ASSERT(computed_ && static_cast<int64_t>(params.size()) == layout_.total());
  const Tensor flat = Tensor::of(params.data(), {layout_.total()});
  std::vector<uint8_t> mask;
  for (const Linear& l : linears_) {
    mask.resize(static_cast<size_t>(l.mask.numel()));
    copy_bytes(mask.data(), false, l.mask.data, l.mask.device == Device::cuda, mask.size());
    const Tensor w(static_cast<char*>(flat.data) + l.offset * 4, DType::f32, {l.rows, l.cols});
    ops::apply_mask(w, Tensor::of(mask.data(), {l.rows, l.cols}), w);
  }
}

std::vector<FfnMasks::Part> FfnMasks::parts(const Linear& l) const {
  // The HF weights inside the linear's rows (gate and up make one; the others are one each).
  std::vector<Part> out;
  for (const ParamInfo& p : layout_.params())
    if (p.offset >= l.offset && p.offset < l.offset + l.rows * l.cols)
      out.push_back({p.name, (p.offset - l.offset) / l.cols, p.numel / l.cols});
  return out;
}

std::vector<MaskTensor> FfnMasks::to_host() const {
  PT_ASSERT(computed_);
  std::vector<MaskTensor> out;
  for (const Linear& l : linears_) {
    std::vector<uint8_t> all(static_cast<size_t>(l.mask.numel()));
    copy_bytes(all.data(), false, l.mask.data, l.mask.device == Device::cuda, all.size());
    for (const Part& part : parts(l)) {
      const auto begin = all.begin() + part.row * l.cols, end = begin + part.rows * l.cols;
      out.push_back({part.name, {part.rows, l.cols}, std::vector<uint8_t>(begin, end)});
    }
  }
  return out;
}

void FfnMasks::from_host(const std::vector<MaskTensor>& masks, const std::string& origin) {
  for (const Linear& l : linears_) {
    for (const Part& part : parts(l)) {
      auto it =
          std::find_if(masks.begin(), masks.end(), [&](const MaskTensor& m) { return m.name == part.name; });
      if (it == masks.end())
        fail(
            "{}: no 2:4 mask for {} (a run with other --sparse-layers saved it); resume with the same "
            "flags or start afresh with --no-resume",
            origin, part.name);
      if (it->shape != std::vector<int64_t>{part.rows, l.cols} ||
          static_cast<int64_t>(it->values.size()) != part.rows * l.cols)
        fail("{}: the 2:4 mask of {} has shape [{}], expected [{}, {}]", origin, part.name,
             fmt::join(it->shape, ", "), part.rows, l.cols);
      copy_bytes(static_cast<uint8_t*>(l.mask.data) + part.row * l.cols, l.mask.device == Device::cuda,
                 it->values.data(), false, it->values.size());
    }
  }
  computed_ = true;
}

}  // namespace pt
