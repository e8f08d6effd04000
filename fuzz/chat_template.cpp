// Chat templates (data/chat/jinja.h): the input is a template's source, parsed and then rendered with a
// conversation of every kind prepare hands a template (system, user, assistant with reasoning and tool
// calls, tool results, content parts), tools, the special tokens and add_generation_prompt, at a fixed
// time. Refusals are TemplateErrors (pt::Errors); a render that works marks generation ranges inside its
// text (nested blocks give nested ranges, inner first, as in transformers; prepare sorts them).
#include "data/chat/jinja.h"
#include "fuzz_util.h"

#include <optional>

namespace {

const nlohmann::ordered_json& context() {
  static const auto c = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "What is 2+2? "}, {"type": "image"}]},
      {"role": "assistant", "content": "", "reasoning_content": "Add them.", "thinking": "Add them.",
       "tool_calls": [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}]},
      {"role": "tool", "name": "add", "content": "4"},
      {"role": "assistant", "content": "4. \u00e9\ud83d\ude42 <|im_end|>"}
    ],
    "tools": [{"type": "function", "function": {"name": "add", "description": "a + b",
               "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}],
    "add_generation_prompt": true,
    "bos_token": "<s>", "eos_token": "</s>", "pad_token": null, "unk_token": "<unk>"
  })");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<pt::jinja::Template> tmpl;
  if (!pt::fuzz::parses(
          [&] { tmpl.emplace(pt::jinja::Template::parse(pt::fuzz::as_text(data, size), "fuzz")); }))
    return 0;
  pt::jinja::RenderOptions options;
  options.now = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  std::optional<pt::jinja::Rendered> out;
  if (!pt::fuzz::parses([&] { out.emplace(tmpl->render(context(), options)); })) return 0;
  for (const auto& [begin, end] : out->generation) PT_FUZZ_CHECK(begin <= end && end <= out->text.size());
  return 0;
}
