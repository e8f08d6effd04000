#include "distributed/state_offload.h"

#include "core/error.h"
#include "distributed/zero.h"
#include "ops/elementwise.h"

#include <algorithm>

namespace pt::dist {

namespace {

constexpr int kSlots = 2;

// The q8 absmax values of the flat range [begin, end) (whole tensors): [first, last).
struct AbsmaxRange {
  int64_t first, last;
};
AbsmaxRange absmax_range(const ParameterLayout& layout, int64_t begin, int64_t end) {
  return {range_quant_blocks(layout.params(), 0, begin), range_quant_blocks(layout.params(), 0, end)};
}

// Each slot's tensors reserved in `arena`: a block's worth of masters and moments, and absmax values.
std::vector<int> reserve_slots(Arena& arena, const ParameterLayout& layout, ops::MomentFormat moments,
                               DType masters) {
  int64_t elements = 0, absmax = 0;
  for (const ParameterLayout::Block& b : layout.blocks()) {
    elements = std::max(elements, b.end - b.begin);
    const AbsmaxRange r = absmax_range(layout, b.begin, b.end);
    absmax = std::max(absmax, r.last - r.first);
  }
  const DType moment = ops::moment_dtype(moments);
  std::vector<int> handles;
  for (int s = 0; s < kSlots; ++s) {
    handles.push_back(arena.reserve(masters, {elements}));
    handles.push_back(arena.reserve(moment, {elements}));
    handles.push_back(arena.reserve(moment, {elements}));
    if (moments == ops::MomentFormat::q8) {
      handles.push_back(arena.reserve(DType::f32, {absmax}));
      handles.push_back(arena.reserve(DType::f32, {absmax}));
    }
  }
  return handles;
}

}  // namespace

int64_t StateOffload::slot_bytes(const ParameterLayout& layout, ops::MomentFormat moments, DType masters) {
  Arena arena(Device::cpu);  // never allocated: its reservations are the figure
  reserve_slots(arena, layout, moments, masters);
  return arena.bytes();
}

StateOffload::StateOffload(const ParameterLayout& layout, const StateTensors& host, Device device)
    : layout_(layout), host_(host), arena_(device), transfer_(device, kSlots) {
  const ops::MomentFormat format = ops::moment_format_of(host.m.dtype);
  const std::vector<int> h = reserve_slots(arena_, layout, format, host.masters.dtype);
  arena_.allocate();
  const size_t per_slot = h.size() / kSlots;
  for (size_t s = 0; s < kSlots; ++s) {
    const int* slot = &h[s * per_slot];
    Slot out;
    out.state.masters = arena_.view(slot[0]);
    out.state.m = arena_.view(slot[1]);
    out.state.v = arena_.view(slot[2]);
    if (per_slot == 5) out.state.m_absmax = arena_.view(slot[3]), out.state.v_absmax = arena_.view(slot[4]);
    slots_.push_back(out);
  }
}

std::vector<ops::StateTransfer::Copy> StateOffload::copies(const Slot& slot, int64_t begin, int64_t end,
                                                           bool to_device, bool with_moments) const {
  std::vector<ops::StateTransfer::Copy> out;
  auto add = [&](const Tensor& host, const Tensor& device, int64_t first, int64_t n) {
    const Tensor h = host.elements(first, n), d = device.elements(0, n);
    out.push_back(to_device ? ops::StateTransfer::Copy{d.data, h.data, static_cast<size_t>(d.bytes())}
                            : ops::StateTransfer::Copy{h.data, d.data, static_cast<size_t>(d.bytes())});
  };
  add(host_.masters, slot.state.masters, begin, end - begin);
  if (!with_moments) return out;
  add(host_.m, slot.state.m, begin, end - begin);
  add(host_.v, slot.state.v, begin, end - begin);
  if (!host_.m_absmax.empty()) {
    const AbsmaxRange r = absmax_range(layout_, begin, end);
    add(host_.m_absmax, slot.state.m_absmax, r.first, r.last - r.first);
    add(host_.v_absmax, slot.state.v_absmax, r.first, r.last - r.first);
  }
  return out;
}

int StateOffload::fetched(int64_t begin, int64_t end, bool with_moments) {
  for (int s = 0; s < kSlots; ++s) {
    const Slot& slot = slots_[static_cast<size_t>(s)];
    if (slot.begin == begin && slot.end == end) return s;  // prefetched, with its moments
  }
  const int s = next_;
  next_ = (next_ + 1) % kSlots;
  Slot& slot = slots_[static_cast<size_t>(s)];
  const auto c = copies(slot, begin, end, /*to_device=*/true, with_moments);
  transfer_.fetch(s, c);
  slot.begin = with_moments ? begin : -1, slot.end = with_moments ? end : -1;
  return s;
}

void StateOffload::prefetch(int64_t begin, int64_t end) { fetched(begin, end, /*with_moments=*/true); }

void StateOffload::update(int64_t begin, int64_t end, std::span<const ops::AdamWTensor> entries,
                          const ops::AdamWConfig& config, int64_t step, const Tensor& working) {
  const int s = fetched(begin, end, /*with_moments=*/true);
  Slot& slot = slots_[static_cast<size_t>(s)];
  transfer_.acquire(s);
  const int64_t first_absmax = host_.m_absmax.empty() ? 0 : absmax_range(layout_, begin, end).first;
  std::vector<ops::AdamWTensor> rebased;
  for (ops::AdamWTensor t : entries) {
    const int64_t n = t.param.numel(), off = t.offset - begin;
    PT_ASSERT(off >= 0 && off + n <= end - begin);
    t.param = slot.state.masters.elements(off, n);
    t.m = slot.state.m.elements(off, n);
    t.v = slot.state.v.elements(off, n);
    if (!t.m_absmax.empty()) {
      const int64_t a =
          (static_cast<const float*>(t.m_absmax.data) - host_.m_absmax.ptr<float>()) - first_absmax;
      t.m_absmax = slot.state.m_absmax.elements(a, t.m_absmax.numel());
      t.v_absmax = slot.state.v_absmax.elements(a, t.v_absmax.numel());
    }
    rebased.push_back(t);
  }
  ops::adamw_step(rebased, config, step);
  ops::cast(slot.state.masters.elements(0, end - begin), working);
  const auto c = copies(slot, begin, end, /*to_device=*/false, /*with_moments=*/true);
  transfer_.write_back(s, c);
  slot.begin = slot.end = -1;
}

void StateOffload::load_working(int64_t begin, int64_t end, const Tensor& working) {
  const int s = fetched(begin, end, /*with_moments=*/false);
  transfer_.acquire(s);
  ops::cast(slots_[static_cast<size_t>(s)].state.masters.elements(0, end - begin), working);
  transfer_.write_back(s, {});  // nothing to copy back: the slot is free once the cast has read it
}

}  // namespace pt::dist
