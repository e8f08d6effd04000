// JSON Lines records that the fuzzer (fuzz/jsonl_record.cpp) found mishandled. Their files are kept in
// fuzz/regressions/jsonl_record/.
#include "data/prepare/record.h"

#include <gtest/gtest.h>

#include <variant>

namespace pt {
namespace {

// Of duplicate keys, the checks read the first (simdjson's at_key) while the messages handed to the chat
// template kept the last: {"role": "assistant", ..., "role": "bob"} passed the assistant check and reached
// the template as "bob". Both now take the first.
TEST(RecordFuzzFindings, DuplicateKeysReadTheSameForChecksAndTemplate) {
  simdjson::dom::parser parser;
  RecordRules rules;
  rules.template_messages = true;
  auto parsed = parse_json_record(
      R"({"messages": [{"role": "assistant", "content": "x", "role": "bob", "content": "y"}]})", parser,
      rules);
  ASSERT_TRUE(std::holds_alternative<Record>(parsed));
  const auto& message = std::get<Record>(parsed).messages.at(0);
  EXPECT_EQ(message.at("role"), "assistant");
  EXPECT_EQ(message.at("content"), "x");
}

}  // namespace
}  // namespace pt
