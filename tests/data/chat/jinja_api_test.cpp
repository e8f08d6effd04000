// The public API: parse once and render many contexts, dict order from the JSON given, concurrent renders
// of one template, strftime_now's clock.
#include <thread>
#include <vector>

#include "data/chat/jinja_test_util.h"

namespace pt::jinja::testing {
namespace {

TEST(JinjaApi, DictsIterateInTheContextsKeyOrder) {
  Template t =
      Template::parse("{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}{{ d | tojson }}", "t");
  const char* json = R"({"d": {"b": 1, "a": {"z": 0, "y": 1}}})";
  // ordered_json keeps the record's order, as Python's json.loads does; nlohmann::json sorts keys.
  EXPECT_EQ(t.render(nlohmann::ordered_json::parse(json)).text,
            R"(b=1 a={'z': 0, 'y': 1} {"b": 1, "a": {"z": 0, "y": 1}})");
  EXPECT_EQ(t.render(nlohmann::json::parse(json)).text,
            R"(a={'y': 1, 'z': 0} b=1 {"a": {"y": 1, "z": 0}, "b": 1})");
}

TEST(JinjaApi, OneParseManyRendersFromManyThreads) {
  Template t = Template::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "<{{ m.role }}>{{ m.content | trim }}{% generation %}{{ loop.index }}{% endgeneration %}{% endfor %}{{ "
      "ns.n }}",
      "chat");
  auto context = [](int i) {
    nlohmann::ordered_json c;
    for (int k = 0; k <= i % 5; ++k)
      c["messages"].push_back(
          {{"role", k % 2 ? "assistant" : "user"}, {"content", " turn " + std::to_string(k) + " "}});
    return c;
  };
  std::vector<Rendered> expected;
  for (int i = 0; i < 5; ++i) expected.push_back(t.render(context(i)));
  EXPECT_EQ(expected[1].text, "<user>turn 01<assistant>turn 122");
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < 500; ++i) {
        Rendered r = t.render(context(i));
        mismatches[w] += r.text != expected[i % 5].text || r.generation != expected[i % 5].generation;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(JinjaApi, StrftimeNowUsesTheGivenClock) {
  // Local time like Python's datetime.now(); the fixed instant's seconds do not depend on the zone.
  EXPECT_EQ(render("{{ strftime_now('%S %f %%f %z%Z') }}"), "00 500000 %f ");
  Template t = Template::parse("{{ strftime_now('%Y') | int > 2000 }}", "t");
  EXPECT_EQ(t.render(nlohmann::ordered_json::object()).text, "True");
}

TEST(JinjaApi, ContextVariablesShadowGlobals) {
  EXPECT_EQ(render("{{ range }}", R"({"range": "mine"})"), "mine");
  EXPECT_EQ(render("{{ messages | length }} {{ add_generation_prompt }}",
                   R"({"messages": [1, 2], "add_generation_prompt": true})"),
            "2 True");
}

}  // namespace
}  // namespace pt::jinja::testing
