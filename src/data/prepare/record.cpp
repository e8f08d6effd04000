#include "data/prepare/record.h"

#include "data/prepare/token_record.h"

#include <fmt/format.h>

#include <optional>

namespace pt {

namespace {

constexpr std::string_view kExpected =
    R"(expected {"text": ...}, {"prompt": ..., "completion": ...}, {"messages": [{"role": ..., "content": ...}]} or {"input_ids": [...]})";

RecordProblem problem(std::string kind, std::string message) { return {std::move(kind), std::move(message)}; }

std::string_view type_name(simdjson::dom::element_type t) { return json_type_name(t); }

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

template <class T>
T scalar(simdjson::dom::element e) {
  T value{};
  return e.get(value) == simdjson::SUCCESS ? value : T{};
}

// The element's type is checked first, so each get() below succeeds.
nlohmann::ordered_json to_json(simdjson::dom::element e) {
  using T = simdjson::dom::element_type;
  switch (e.type()) {
    case T::ARRAY: {
      auto out = nlohmann::ordered_json::array();
      simdjson::dom::array array;
      if (e.get(array) == simdjson::SUCCESS)
        for (simdjson::dom::element v : array) out.push_back(to_json(v));
      return out;
    }
    case T::OBJECT: {
      auto out = nlohmann::ordered_json::object();
      simdjson::dom::object object;
      if (e.get(object) == simdjson::SUCCESS)
        for (auto field : object)  // the first of duplicate keys, as at_key finds it
          out.emplace(std::string(field.key), to_json(field.value));
      return out;
    }
    case T::INT64:
      return scalar<int64_t>(e);
    case T::UINT64:
      return scalar<uint64_t>(e);
    case T::DOUBLE:
      return scalar<double>(e);
    case T::STRING:
      return std::string(scalar<std::string_view>(e));
    case T::BOOL:
      return scalar<bool>(e);
    case T::NULL_VALUE:
      break;
  }
  return nullptr;
}

// A message as transformers hands it to a chat template: keys whose value is null are dropped (many
// templates print "None" or fail on them), and reasoning given under any of its names is also readable
// as "reasoning_content" and "thinking".
nlohmann::ordered_json template_message(simdjson::dom::object msg) {
  auto given = nlohmann::ordered_json::object();
  // Of duplicate keys the first, as at_key reads "role" (emplace keeps it): with the last, {"role":
  // "assistant", "role": "bob"} would pass the assistant check and reach the template as "bob".
  for (auto field : msg)
    if (!field.value.is_null()) given.emplace(std::string(field.key), to_json(field.value));
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    auto it = given.find(key);
    if (it == given.end()) continue;
    // Python's {"thinking": reasoning, **message, "reasoning_content": reasoning}, in that key order.
    auto reasoning = *it;
    auto out = nlohmann::ordered_json::object();
    out["thinking"] = reasoning;
    for (auto& [k, v] : given.items()) out[k] = std::move(v);
    out["reasoning_content"] = std::move(reasoning);
    return out;
  }
  return given;
}

// For a model's chat template: each message needs a string "role"; the rest is the template's to read.
std::variant<Record, RecordProblem> parse_template_messages(simdjson::dom::array messages) {
  Record record{.chat = true, .segments = {}, .messages = nlohmann::ordered_json::array(), .tokens = {}};
  bool has_assistant = false;
  size_t i = 0;
  for (simdjson::dom::element m : messages) {
    auto where = fmt::format("messages[{}]: ", i++);
    simdjson::dom::object msg;
    if (m.get(msg) != simdjson::SUCCESS)
      return problem("mistyped-field",
                     fmt::format("{}is {}, expected an object with \"role\"; fix the record", where,
                                 type_name(m.type())));
    std::optional<RecordProblem> err;
    auto role = string_field(msg, "role", where, err);
    if (err) return *err;
    if (!role)
      return problem("missing-field", fmt::format("{}has no \"role\"; every message needs one", where));
    has_assistant |= *role == "assistant";
    record.messages.push_back(template_message(msg));
  }
  if (!has_assistant)
    return problem("empty-example",
                   "the conversation has no assistant message, so nothing to learn; add one or "
                   "remove the record");
  return record;
}

std::variant<Record, RecordProblem> parse_messages(simdjson::dom::element value, const RecordRules& rules) {
  simdjson::dom::array messages;
  if (value.get(messages) != simdjson::SUCCESS)
    return problem("mistyped-field",
                   fmt::format("\"messages\" is {}, expected an array of {{\"role\", \"content\"}} "
                               "objects; fix the record",
                               type_name(value.type())));
  if (rules.template_messages) return parse_template_messages(messages);
  Record record{.chat = true, .segments = {}, .messages = {}, .tokens = {}};
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

std::string_view json_type_name(simdjson::dom::element_type t) {
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
  }
  return "a value";
}

std::variant<Record, RecordProblem> parse_json_record(std::string_view line, simdjson::dom::parser& parser,
                                                      const RecordRules& rules) {
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
  if (obj.at_key("input_ids").error() == simdjson::SUCCESS) {
    auto tokens = parse_token_record(obj, rules.vocab_size);
    if (auto* p = std::get_if<RecordProblem>(&tokens)) return std::move(*p);
    return Record{
        .chat = false, .segments = {}, .messages = {}, .tokens = std::get<EncodedExample>(std::move(tokens))};
  }

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
    return problem(
        "missing-field",
        fmt::format("no \"text\", \"prompt\", \"messages\" or \"input_ids\" field; {}", kExpected));
  if (has_messages) return parse_messages(messages, rules);

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
  return Record{
      .chat = false,
      .segments = {{Role::kNone, std::string(*prompt), false}, {Role::kNone, std::string(*completion), true}},
      .messages = {},
      .tokens = {}};
}

Record text_record(std::string text) {
  return Record{
      .chat = false, .segments = {{Role::kNone, std::move(text), true}}, .messages = {}, .tokens = {}};
}

}  // namespace pt
