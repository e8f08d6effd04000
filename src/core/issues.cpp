#include "core/issues.h"

#include "core/log.h"

namespace pt {

void InputIssues::report(const Location& where, const std::string& kind, const std::string& message,
                         const std::string& action) {
  if (strict_) fail("{}: {} [{}] (--strict stops at the first bad record)", where.str(), message, kind);
  ++total_;
  ++counts_[kind];
  if (total_ <= max_printed_) {
    log_warn("{}: {} [{}]; record {}", where.str(), message, kind, action);
  } else if (total_ == max_printed_ + 1) {
    log_warn("further bad records are counted, not printed; see the summary");
  }
}

int64_t InputIssues::count(const std::string& kind) const {
  auto it = counts_.find(kind);
  return it == counts_.end() ? 0 : it->second;
}

std::string InputIssues::summary() const {
  std::string out;
  for (const auto& [kind, n] : counts_) out += fmt::format("  {:<24} {}\n", kind, n);
  return out;
}

}  // namespace pt
