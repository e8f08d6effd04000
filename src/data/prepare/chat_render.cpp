#include "data/prepare/chat_render.h"

#include <fmt/format.h>

#include <algorithm>

namespace pt {

namespace {

// Bytes two texts share at their start, backed off to a character boundary.
size_t common_prefix(std::string_view a, std::string_view b) {
  size_t n = 0, limit = std::min(a.size(), b.size());
  while (n < limit && a[n] == b[n]) ++n;
  auto continuation = [](std::string_view s, size_t i) {
    return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
  };
  while (n > 0 && (continuation(a, n) || continuation(b, n))) --n;
  return n;
}

std::string origin_of(const ChatTemplateChoice& c) {
  return c.name == "default" ? c.file : fmt::format("{} (chat template \"{}\")", c.file, c.name);
}
}  // namespace

ChatRenderer::ChatRenderer(const ChatTemplateChoice& choice)
    : template_(jinja::Template::parse(choice.source, origin_of(choice))),
      context_(choice.special_tokens),
      options_{.now = std::chrono::system_clock::now()},
      generation_blocks_(choice.generation_blocks) {
  // transformers passes these as None when the caller gives none, so templates see them defined.
  context_["tools"] = nullptr;
  context_["documents"] = nullptr;
}

std::string ChatRenderer::render_first(const nlohmann::ordered_json& messages, size_t count,
                                       bool generation_prompt) const {
  auto context = context_;
  context["messages"] =
      nlohmann::ordered_json(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(count));
  context["add_generation_prompt"] = generation_prompt;
  return template_.render(context, options_).text;
}

RenderedChat ChatRenderer::render(const nlohmann::ordered_json& messages) const {
  RenderedChat out;
  if (generation_blocks_) {
    auto context = context_;
    context["messages"] = messages;
    context["add_generation_prompt"] = false;
    auto rendered = template_.render(context, options_);
    out.text = std::move(rendered.text);
    out.loss_spans = std::move(rendered.generation);
    out.cut_ends.assign(out.loss_spans.size(), 0);
    return out;
  }
  out.text = render_first(messages, messages.size(), false);
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.contains("role") || m["role"] != "assistant") continue;
    auto before = render_first(messages, i, false);
    auto prompt = render_first(messages, i, true);
    auto turn = i + 1 == messages.size() ? out.text : render_first(messages, i + 1, false);
    // What add_generation_prompt does not change is the conversation so far: the message's rendering
    // must go on from all of it, or the text before the span would not be what the model sees.
    size_t settled = common_prefix(before, prompt);
    size_t begin = common_prefix(prompt, turn), end = common_prefix(turn, out.text);
    if (begin < settled) {
      out.unstable.push_back(i);
    } else if (begin < end) {
      out.loss_spans.emplace_back(begin, end);
      out.cut_ends.push_back(end < turn.size());
    } else if (begin < turn.size()) {
      out.unstable.push_back(i);
    }
  }
  return out;
}

}  // namespace pt
