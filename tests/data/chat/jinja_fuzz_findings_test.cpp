// Chat templates that the fuzzer (fuzz/chat_template.cpp) found mishandled. Their files are kept in
// fuzz/regressions/chat_template/.
#include "jinja_test_util.h"

namespace pt::jinja::testing {
namespace {

// seq * n ran n rounds even for an empty seq, so '' * 10**18 hung; Python answers at once. A result
// too large for memory is a TemplateError (jinja2: MemoryError), not an allocation failure.
TEST(JinjaFuzzFindings, RepeatingIsBoundedByItsResult) {
  EXPECT_EQ(render("[{{ '' * 1000000000000000000 }}]"), "[]");
  EXPECT_EQ(render("{{ ([] * 1000000000000000000) | length }} {{ (() * 4611686018427387904) | length }}"),
            "0 0");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'x' * -5 }}"), "ababab [1, 1] ");
  EXPECT_THROW(render("{{ 'a' * 1000000000000000000 }}"), TemplateError);
  EXPECT_THROW(render("{{ [1, 2] * 4611686018427387904 }}"), TemplateError);  // 2 * 2^62 overflows
}

}  // namespace
}  // namespace pt::jinja::testing
