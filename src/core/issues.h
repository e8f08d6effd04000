// Bad-record bookkeeping for inputs where the user chose to skip or repair bad records: each one is
// reported with its location, counted by kind, and summarised at the end. In strict mode the first one
// is an error. Thread-compatible: callers serialise access (records are reported in input order).
#pragma once

#include "core/error.h"

#include <cstdint>
#include <map>
#include <string>

namespace pt {

class InputIssues {
 public:
  explicit InputIssues(bool strict, int max_printed = 20) : strict_(strict), max_printed_(max_printed) {}

  // kind: a short stable name ("malformed-json", "truncated"); message says what was wrong and what to do.
  // `action` says what happened to the record ("skipped", "truncated", "split").
  void report(const Location& where, const std::string& kind, const std::string& message,
              const std::string& action);

  int64_t count(const std::string& kind) const;
  int64_t total() const { return total_; }
  const std::map<std::string, int64_t>& counts() const { return counts_; }
  // One line per kind; empty when nothing was reported.
  std::string summary() const;

 private:
  bool strict_;
  int max_printed_;
  int64_t total_ = 0;
  std::map<std::string, int64_t> counts_;
};

}  // namespace pt
