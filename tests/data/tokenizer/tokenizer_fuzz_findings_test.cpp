// tokenizer.json inputs that the fuzzer (fuzz/tokenizer_json.cpp) found mishandled: each is now refused
// with a pt::Error naming the file and the field. Their files are kept in fuzz/regressions/tokenizer_json/.
#include "core/error.h"
#include "core/file.h"
#include "data/tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace pt {
namespace {

nlohmann::json fixture() {
  return nlohmann::json::parse(read_file(std::string(PACKTRAIN_FIXTURES) + "/prepare/tokenizer.json"));
}

void expect_refused(const std::string& text, const std::vector<std::string>& needles) {
  try {
    Tokenizer::from_json(text, "tok.json");
    FAIL() << "accepted";
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

// A number beyond a double is nlohmann's out_of_range, not a parse_error: it escaped the handler.
TEST(TokenizerFuzzFindings, NumberBeyondADoubleIsMalformedJson) {
  expect_refused(R"({"model": {"type": "BPE", "dropout": 1e400}})", {"tok.json", "malformed JSON"});
}

// Ids index dense tables: one stray id of 2^31 - 1 (in the vocab or an added token) asked for 64 GB.
TEST(TokenizerFuzzFindings, IdsFarPastTheTokenCountAreRefused) {
  auto j = fixture();
  j["model"]["vocab"]["zzz"] = 2147483647;
  expect_refused(j.dump(), {"tok.json", "/model/vocab (token \"zzz\")", "below"});
  j = fixture();
  j["added_tokens"].push_back({{"id", 2000000000}, {"content", "<x>"}, {"special", true}});
  expect_refused(j.dump(), {"tok.json", "/added_tokens/4/id", "below"});
  // Ids within twice the token count (plus 1024) still load, holes and all.
  j = fixture();
  j["added_tokens"].push_back({{"id", 1500}, {"content", "<x>"}, {"special", true}});
  EXPECT_EQ(Tokenizer::from_json(j.dump(), "tok.json").vocab_size(), 1501);
}

}  // namespace
}  // namespace pt
