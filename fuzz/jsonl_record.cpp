// JSON Lines records (data/prepare/record.h): one input is one line of a .jsonl file, read under both
// rules prepare uses (built-in chat layouts; messages kept whole for a model's chat template). A record
// that parses is one of: pre-tokenized ids below the vocab with a 0/1 mask each; template messages, each
// an object with a string role, an assistant among them; or segments of valid UTF-8 (simdjson checked it)
// with one to learn, whose text comes back exactly from the test tokenizer (byte-level BPE, no normalizer).
#include "data/prepare/record.h"
#include "data/tokenizer/tokenizer.h"
#include "fuzz_util.h"

#include <variant>

namespace {

const pt::Tokenizer& tokenizer() {
  static const auto t = pt::Tokenizer::from_file(PACKTRAIN_FIXTURES "/prepare/tokenizer.json");
  return t;
}

void check(const pt::Record& record, const pt::RecordRules& rules) {
  if (record.tokens) {
    const auto& e = *record.tokens;
    PT_FUZZ_CHECK(record.segments.empty() && !e.tokens.empty() && e.tokens.size() == e.loss_mask.size());
    for (uint32_t id : e.tokens) PT_FUZZ_CHECK(id < static_cast<uint32_t>(*rules.vocab_size));
    for (uint8_t m : e.loss_mask) PT_FUZZ_CHECK(m <= 1);
    return;
  }
  if (rules.template_messages && record.chat) {
    PT_FUZZ_CHECK(record.segments.empty() && record.messages.is_array());
    bool assistant = false;
    for (const auto& m : record.messages) {
      PT_FUZZ_CHECK(m.is_object() && m.contains("role") && m["role"].is_string());
      assistant |= m["role"] == "assistant";
    }
    PT_FUZZ_CHECK(assistant);
    return;
  }
  PT_FUZZ_CHECK(!record.segments.empty());
  bool loss = false;
  for (const auto& s : record.segments) {
    loss |= s.loss;
    PT_FUZZ_CHECK(record.chat == (s.role != pt::Role::kNone));
    PT_FUZZ_CHECK(simdjson::validate_utf8(s.text.data(), s.text.size()));
    PT_FUZZ_CHECK(tokenizer().decode(tokenizer().encode(s.text)) == s.text);
  }
  PT_FUZZ_CHECK(loss);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static simdjson::dom::parser parser;  // scratch reused across records, as each prepare thread does
  for (bool template_messages : {false, true}) {
    const pt::RecordRules rules{.template_messages = template_messages,
                                .vocab_size = tokenizer().vocab_size()};
    auto parsed = pt::parse_json_record(pt::fuzz::as_text(data, size), parser, rules);
    if (const auto* problem = std::get_if<pt::RecordProblem>(&parsed))
      PT_FUZZ_CHECK(!problem->kind.empty() && !problem->message.empty());
    else
      check(std::get<pt::Record>(parsed), rules);
  }
  return 0;
}
