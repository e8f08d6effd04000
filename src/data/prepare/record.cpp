#include "data/prepare/record.h"

#include <fmt/format.h>

#include <optional>

namespace pt {

namespace {

constexpr std::string_view kExpected =
    R"(expected {"text": ...}, {"prompt": ..., "completion": ...} or {"messages": [{"role": ..., "content": ...}]})";

RecordProblem problem(std::string kind, std::string message) { return {std::move(kind), std::move(message)}; }

std::string_view type_name(simdjson::dom::element_type t) {
  using T = simdjson::dom::element_type;
  switch (t) {
    case T::ARRAY:
      return "an array";
    case T::OBJECT:
      return "an object";
    case T::INT64:
    case T::UINT64:
    case T::DOUBLE:
      return "a number";
    case T::STRING:
      return "a string";
    case T::BOOL:
      return "a boolean";
    case T::NULL_VALUE:
      return "null";
    default:
      return "a value";
  }
}

// A string field: absent (nullopt with no problem), a string, or mistyped.
std::optional<std::string_view> string_field(simdjson::dom::object obj, std::string_view key,
                                             std::string_view where, std::optional<RecordProblem>& err) {
  simdjson::dom::element value;
  if (obj.at_key(key).get(value) != simdjson::SUCCESS) return std::nullopt;
  std::string_view s;
  if (value.get(s) != simdjson::SUCCESS) {
    err = problem("mistyped-field", fmt::format("{}\"{}\" is {}, expected a string; fix the record", where,
                                                key, type_name(value.type())));
    return std::nullopt;
  }
  return s;
}

std::optional<Role> parse_role(std::string_view role) {
  if (role == "system") return Role::kSystem;
  if (role == "user") return Role::kUser;
  if (role == "assistant") return Role::kAssistant;
  return std::nullopt;
}

std::variant<Record, RecordProblem> parse_messages(simdjson::dom::element value) {
  simdjson::dom::array messages;
  if (value.get(messages) != simdjson::SUCCESS)
    return problem("mistyped-field",
                   fmt::format("\"messages\" is {}, expected an array of {{\"role\", \"content\"}} "
                               "objects; fix the record",
                               type_name(value.type())));
  Record record{.chat = true, .segments = {}};
  bool has_assistant = false;
  size_t i = 0;
  for (simdjson::dom::element m : messages) {
    auto where = fmt::format("messages[{}]: ", i++);
    simdjson::dom::object msg;
    if (m.get(msg) != simdjson::SUCCESS)
      return problem("mistyped-field",
                     fmt::format("{}is {}, expected an object with \"role\" and \"content\"; fix "
                                 "the record",
                                 where, type_name(m.type())));
    std::optional<RecordProblem> err;
    auto role_name = string_field(msg, "role", where, err);
    auto content = string_field(msg, "content", where, err);
    if (err) return *err;
    if (!role_name || !content)
      return problem("missing-field",
                     fmt::format("{}has no \"{}\"; every message needs \"role\" and \"content\"", where,
                                 role_name ? "content" : "role"));
    auto role = parse_role(*role_name);
    if (!role)
      return problem("unknown-role",
                     fmt::format("{}role \"{}\" is not one of system, user, assistant; fix the "
                                 "record",
                                 where, *role_name));
    has_assistant |= *role == Role::kAssistant;
    record.segments.push_back({*role, std::string(*content), *role == Role::kAssistant});
  }
  if (!has_assistant)
    return problem("empty-example",
                   "the conversation has no assistant message, so nothing to learn; add one or "
                   "remove the record");
  return record;
}

}  // namespace

std::variant<Record, RecordProblem> parse_json_record(std::string_view line, simdjson::dom::parser& parser) {
  simdjson::dom::element root;
  if (auto error = parser.parse(line.data(), line.size()).get(root); error != simdjson::SUCCESS) {
    if (error == simdjson::UTF8_ERROR)
      return problem("invalid-utf8", "the line is not valid UTF-8; re-encode the file as UTF-8");
    return problem("malformed-json",
                   fmt::format("not valid JSON ({}); {}", simdjson::error_message(error), kExpected));
  }
  simdjson::dom::object obj;
  if (root.get(obj) != simdjson::SUCCESS)
    return problem("malformed-json",
                   fmt::format("the line is {}, not a JSON object; {}", type_name(root.type()), kExpected));

  bool has_text = obj.at_key("text").error() == simdjson::SUCCESS;
  bool has_prompt = obj.at_key("prompt").error() == simdjson::SUCCESS;
  bool has_completion = obj.at_key("completion").error() == simdjson::SUCCESS;
  simdjson::dom::element messages;
  bool has_messages = obj.at_key("messages").get(messages) == simdjson::SUCCESS;
  int kinds = int{has_text} + int{has_prompt || has_completion} + int{has_messages};
  if (kinds > 1)
    return problem("ambiguous-record", fmt::format("the record has fields of more than one kind (text, "
                                                   "prompt/completion, messages); {}",
                                                   kExpected));
  if (kinds == 0)
    return problem("missing-field",
                   fmt::format("no \"text\", \"prompt\" or \"messages\" field; {}", kExpected));
  if (has_messages) return parse_messages(messages);

  std::optional<RecordProblem> err;
  if (has_text) {
    auto text = string_field(obj, "text", "", err);
    if (err) return *err;
    if (text->empty()) return problem("empty-example", "\"text\" is empty; remove the record");
    return text_record(std::string(*text));
  }
  auto prompt = string_field(obj, "prompt", "", err);
  auto completion = string_field(obj, "completion", "", err);
  if (err) return *err;
  if (!prompt || !completion)
    return problem("missing-field",
                   fmt::format("\"{}\" without \"{}\"; a prompt record needs both",
                               prompt ? "prompt" : "completion", prompt ? "completion" : "prompt"));
  if (completion->empty())
    return problem("empty-example", "\"completion\" is empty, so nothing to learn; remove the record");
  return Record{.chat = false,
                .segments = {{Role::kNone, std::string(*prompt), false},
                             {Role::kNone, std::string(*completion), true}}};
}

Record text_record(std::string text) {
  return Record{.chat = false, .segments = {{Role::kNone, std::move(text), true}}};
}

}  // namespace pt
