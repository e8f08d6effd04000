// Hash maps keyed by std::string that can be probed with a std::string_view without allocating.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace pt {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

}  // namespace pt
