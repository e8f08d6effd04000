// A training record as read from the input, before tokenization: a list of text segments, each with
// the role it plays (for a built-in chat layout) and whether the model learns to produce it (loss).
//   {"text": s}                          -> one segment, loss
//   {"prompt": p, "completion": c}       -> p without loss, c with loss
//   {"messages": [{"role", "content"}]}  -> one segment per message, loss on assistant messages; for a
//                                           model's chat template, the messages as given instead
//   {"input_ids": [...], ...}            -> tokens and loss taken as they are (token_record.h)
// Unknown extra fields are ignored; text, prompt/completion and messages are mutually exclusive. A record
// with "input_ids" is pre-tokenized whatever else it holds: TRL keeps the source columns beside the
// tokens it writes, and treats any dataset with input_ids as already processed.
#pragma once

#include <simdjson.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
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

// Token ids and a loss mask (1 where the token is a loss target).
struct EncodedExample {
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> loss_mask;
};

struct Record {
  bool chat = false;  // segments (or messages) are chat messages, to be laid out by the chat template
  std::vector<Segment> segments;
  // Chat records read for a model's chat template: the messages as the template sees them (keys whose
  // value is null dropped, reasoning fields aliased, as transformers does; key order kept, as templates
  // may print whole objects); segments stay empty.
  nlohmann::ordered_json messages;
  std::optional<EncodedExample> tokens;  // pre-tokenized records
};

// Why a record cannot be used: a stable short kind ("malformed-json") and a message saying what was
// expected and what to do.
struct RecordProblem {
  std::string kind;
  std::string message;
};

// A problem met while processing a record, and what became of the record.
struct RecordIssue {
  std::string kind, message, action;  // as for InputIssues::report
};

// How records are read; the same for every record of a run.
struct RecordRules {
  // Messages are kept whole for a model's chat template: any role, any other fields (tool calls,
  // reasoning, content parts). Otherwise roles must be system, user or assistant and content a string.
  bool template_messages = false;
  std::optional<int32_t> vocab_size;  // pre-tokenized ids must be below it (unset: not checked)
};

// One JSON Lines record. The parser is scratch space reused across calls (one per thread).
std::variant<Record, RecordProblem> parse_json_record(std::string_view line, simdjson::dom::parser& parser,
                                                      const RecordRules& rules = {});

// One plain-text document.
Record text_record(std::string text);

// "an array", "a string", ... for messages about mistyped fields.
std::string_view json_type_name(simdjson::dom::element_type t);

}  // namespace pt
