// A training record as read from the input, before tokenization: a list of text segments, each with
// the role it plays (for the chat template) and whether the model learns to produce it (loss).
//   {"text": s}                          -> one segment, loss
//   {"prompt": p, "completion": c}       -> p without loss, c with loss
//   {"messages": [{"role", "content"}]}  -> one segment per message, loss on assistant messages
// Unknown extra fields are ignored; the three kinds are mutually exclusive.
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace pt {

enum class Role { kNone, kSystem, kUser, kAssistant };

struct Segment {
  Role role = Role::kNone;
  std::string text;
  bool loss = false;
};

struct Record {
  bool chat = false;  // segments are chat messages, to be laid out by the chat template
  std::vector<Segment> segments;
};

// Why a record cannot be used: a stable short kind ("malformed-json") and a message saying what was
// expected and what to do.
struct RecordProblem {
  std::string kind;
  std::string message;
};

// One JSON Lines record. The parser is scratch space reused across calls (one per thread).
std::variant<Record, RecordProblem> parse_json_record(std::string_view line, simdjson::dom::parser& parser);

// One plain-text document.
Record text_record(std::string text);

}  // namespace pt
