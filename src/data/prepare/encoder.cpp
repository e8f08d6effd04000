#include "data/prepare/encoder.h"

#include "core/error.h"
#include "data/prepare/chat_render.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace pt {

namespace {
std::string_view role_name(Role role, bool capitalized) {
  switch (role) {
    case Role::kSystem:
      return capitalized ? "System" : "system";
    case Role::kUser:
      return capitalized ? "User" : "user";
    case Role::kAssistant:
      return capitalized ? "Assistant" : "assistant";
    case Role::kNone:
      break;
  }
  return "";
}

// "message 1", "messages 1, 3"
std::string message_list(const std::vector<size_t>& indices) {
  std::string out = indices.size() == 1 ? "message " : "messages ";
  for (size_t i = 0; i < indices.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", indices[i]);
  return out;
}
}  // namespace

Encoder::Encoder(const Tokenizer& tokenizer, bool add_bos, bool add_eos, const ChatTemplateChoice& chat)
    : tokenizer_(tokenizer) {
  // A bos_token or eos_token of tokenizer_config.json that is no token is the sign of another model's file.
  auto named = [&](const char* key) {
    auto it = chat.special_tokens.find(key);
    return it == chat.special_tokens.end() ? std::string() : it->get<std::string>();
  };
  if (add_bos) {
    bos_ = model_bos_id(chat, tokenizer);
    if (!bos_ && !named("bos_token").empty())
      fail(
          "--add-bos: bos_token \"{}\" of {} is not a token of the tokenizer; give the tokenizer_config.json "
          "of the tokenizer's own model",
          named("bos_token"), chat.special_tokens_file);
    if (!bos_) fail("--add-bos: the tokenizer has no BOS token; drop --add-bos");
  }
  if (add_eos) {
    eos_ = model_eos_id(chat, tokenizer);
    if (!eos_ && !named("eos_token").empty())
      fail(
          "eos_token \"{}\" of {} is not a token of the tokenizer; give the tokenizer_config.json of the "
          "tokenizer's own model, or pass --no-eos",
          named("eos_token"), chat.special_tokens_file);
  }
  if (chat.layout == ChatLayout::kChatML) {
    im_start_ = tokenizer.token_to_id("<|im_start|>");
    im_end_ = tokenizer.token_to_id("<|im_end|>");
    PT_ASSERT(im_start_ && im_end_);
  }
  if (chat.layout == ChatLayout::kModel) {
    try {
      renderer_ = std::make_unique<ChatRenderer>(chat);
    } catch (const Error& e) {
      fail(
          "{}; chat records cannot be laid out with this template: fix it, name another with "
          "--chat-template, or use a built-in layout (--chat-template chatml or plain)",
          e.what());
    }
  }
}

Encoder::~Encoder() = default;

void Encoder::append_id(int32_t id, bool loss, EncodedExample& out) {
  out.tokens.push_back(static_cast<uint32_t>(id));
  out.loss_mask.push_back(loss ? 1 : 0);
}

void Encoder::append_text(std::string_view text, bool loss, EncodedExample& out,
                          std::vector<int32_t>& scratch) const {
  scratch.clear();
  tokenizer_.encode_append(text, scratch);
  for (int32_t id : scratch) append_id(id, loss, out);
}

void Encoder::append_message(const Segment& message, EncodedExample& out,
                             std::vector<int32_t>& scratch) const {
  if (im_start_) {
    append_id(*im_start_, false, out);
    append_text(std::string(role_name(message.role, false)) + "\n", false, out, scratch);
    append_text(message.text, message.loss, out, scratch);
    append_id(*im_end_, message.loss, out);
    append_text("\n", false, out, scratch);
  } else {
    append_text(std::string(role_name(message.role, true)) + ": ", false, out, scratch);
    append_text(message.text, message.loss, out, scratch);
    append_text("\n\n", message.loss, out, scratch);
  }
}

bool Encoder::encode_with_template(const nlohmann::ordered_json& messages, EncodedExample& out,
                                   std::vector<int32_t>& scratch, std::vector<RecordIssue>& issues) const {
  RenderedChat chat;
  try {
    chat = renderer_->render(messages);
  } catch (const Error& e) {
    issues.push_back({"template-error",
                      fmt::format("the chat template failed on this conversation: {}", e.what()), "skipped"});
    return false;
  }
  scratch.clear();
  tokenizer_.encode_append(chat.text, scratch);
  auto ranges = token_byte_ranges(tokenizer_, chat.text, scratch);
  if (!ranges) {
    issues.push_back(
        {"token-alignment",
         "the tokens do not spell the rendered conversation closely enough to tell which of them "
         "are the assistant's (the tokenizer rewrites the text); report it with this record",
         "skipped"});
    return false;
  }
  // The template writes BOS itself where the model wants one; --add-bos adds it only where it did not.
  size_t first = bos_ && (scratch.empty() || scratch.front() != *bos_) ? 1 : 0;
  out.tokens.resize(first);
  out.loss_mask.assign(first + scratch.size(), 0);
  if (first) out.tokens[0] = static_cast<uint32_t>(*bos_);
  for (int32_t id : scratch) out.tokens.push_back(static_cast<uint32_t>(id));
  // A span cut where the message's rendering and the conversation part ends before a token across the cut.
  for (size_t k = 0; k < chat.loss_spans.size(); ++k) {
    if (!chat.cut_ends[k]) continue;
    auto& end = chat.loss_spans[k].second;
    auto after = std::upper_bound(ranges->begin(), ranges->end(), end,
                                  [](size_t at, const ByteRange& r) { return at < r.first; });
    if (after != ranges->begin() && std::prev(after)->first < end && end < std::prev(after)->second)
      end = std::max(chat.loss_spans[k].first, std::prev(after)->first);
  }
  mark_overlapping(*ranges, chat.loss_spans, std::span(out.loss_mask).subspan(first));
  bool any_loss = std::any_of(out.loss_mask.begin(), out.loss_mask.end(), [](uint8_t m) { return m != 0; });

  if (!chat.unstable.empty()) {
    auto message = fmt::format(
        "the chat template is not prefix-stable for assistant {}: rendered with the rest of the "
        "conversation, {} (or the conversation before {}) differs from what the model sees and writes at "
        "inference, so {} no loss",
        message_list(chat.unstable), chat.unstable.size() == 1 ? "it" : "they",
        chat.unstable.size() == 1 ? "it" : "them", chat.unstable.size() == 1 ? "it carries" : "they carry");
    if (!any_loss) {
      issues.push_back({"unstable-template",
                        message +
                            "; no assistant message is left to learn from: end the conversation there, or "
                            "use a template with {% generation %} blocks",
                        "skipped"});
      return false;
    }
    issues.push_back(
        {"unstable-template", message, fmt::format("kept without loss on {}", message_list(chat.unstable))});
  }
  if (!any_loss) {
    issues.push_back(
        {"empty-example",
         renderer_->generation_blocks()
             ? "the chat template rendered no {% generation %} block for this conversation, so "
               "nothing to learn; remove the record"
             : "the assistant messages render to nothing, so nothing to learn; remove the record",
         "skipped"});
    return false;
  }
  return true;
}

bool Encoder::encode(const Record& record, EncodedExample& out, std::vector<int32_t>& scratch,
                     std::vector<RecordIssue>& issues) const {
  out.tokens.clear();
  out.loss_mask.clear();
  if (record.tokens) {
    out = *record.tokens;
    return true;
  }
  if (record.chat && renderer_) return encode_with_template(record.messages, out, scratch, issues);
  if (bos_) append_id(*bos_, false, out);
  for (const auto& segment : record.segments) {
    if (record.chat) {
      append_message(segment, out, scratch);
    } else {
      append_text(segment.text, segment.loss, out, scratch);
    }
  }
  if (eos_) append_id(*eos_, !record.segments.empty() && record.segments.back().loss, out);
  return true;
}

}  // namespace pt
