// Renders a conversation with a model's chat template as transformers' apply_chat_template does, and finds
// the bytes of the rendered text the model learns to produce (docs/formats.md, "Chat records").
//
// The template sees {messages, tools: none, documents: none, add_generation_prompt} and the special tokens
// (bos_token, eos_token, ...). The conversation is rendered with add_generation_prompt false. Loss spans:
//   - a template with {% generation %} blocks: the bytes rendered inside them (TRL's assistant_only_loss);
//   - otherwise, for each assistant message i, the bytes it adds after the generation prompt:
//       before_i = render(messages[:i])
//       prompt_i = render(messages[:i], add_generation_prompt=true)
//       turn_i   = render(messages[:i+1])
//     span_i = [begin_i, end_i) of the whole rendering R, where begin_i is where prompt_i and turn_i part
//     (TRL's prompt-completion loss starts where the two diverge: normally at the end of prompt_i) and
//     end_i where turn_i and R part (the end of turn_i when R goes on from it), all backed off to a
//     character boundary. turn_i must go on from the part of prompt_i that add_generation_prompt does
//     not change (where before_i and prompt_i part): a generation prompt may differ from how the message
//     is rendered (a thinking block it opens), the conversation before it may not. So the span is the
//     stretch of the message's own rendering that R shares, the text before it in R what the model sees
//     at inference, and no other message's text. A message for which that fails or leaves nothing (a
//     template that moves the system prompt into the last user turn, or drops earlier turns' reasoning)
//     carries no loss and is listed in `unstable`.
#pragma once

#include "data/chat/jinja.h"
#include "data/prepare/chat_template.h"
#include "data/prepare/token_spans.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace pt {

struct RenderedChat {
  std::string text;
  std::vector<ByteRange> loss_spans;  // in order
  // Per span: its end is where the message's rendering and R part, so a token of R across it is not the
  // message's (the encoder ends the span before such a token).
  std::vector<uint8_t> cut_ends;
  std::vector<size_t> unstable;  // assistant messages left without loss (indices into messages)
};

class ChatRenderer {
 public:
  explicit ChatRenderer(const ChatTemplateChoice& choice);  // parses the template once; throws pt::Error
  // Thread-safe. Throws pt::Error when the template fails (raise_exception, a type error...).
  RenderedChat render(const nlohmann::ordered_json& messages) const;
  bool generation_blocks() const { return generation_blocks_; }

 private:
  std::string render_first(const nlohmann::ordered_json& messages, size_t count,
                           bool generation_prompt) const;

  jinja::Template template_;
  nlohmann::ordered_json context_;  // everything but messages and add_generation_prompt
  jinja::RenderOptions options_;    // strftime_now() gives the time prepare started, for every record
  bool generation_blocks_;
};

}  // namespace pt
