#include "data/prepare/encoder.h"

#include "core/error.h"

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
}  // namespace

std::string_view chat_template_name(ChatTemplate t) {
  return t == ChatTemplate::kChatML ? "chatml" : "plain";
}

Encoder::Encoder(const Tokenizer& tokenizer, bool add_bos, bool add_eos) : tokenizer_(tokenizer) {
  if (add_bos) {
    bos_ = tokenizer.bos_id();
    if (!bos_) fail("--add-bos: the tokenizer has no BOS token; drop --add-bos");
  }
  if (add_eos) eos_ = tokenizer.eos_id();
  auto start = tokenizer.token_to_id("<|im_start|>"), end = tokenizer.token_to_id("<|im_end|>");
  if (start && end) im_start_ = start, im_end_ = end;
}

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

void Encoder::encode(const Record& record, EncodedExample& out, std::vector<int32_t>& scratch) const {
  out.tokens.clear();
  out.loss_mask.clear();
  if (bos_) append_id(*bos_, false, out);
  for (const auto& segment : record.segments) {
    if (record.chat) {
      append_message(segment, out, scratch);
    } else {
      append_text(segment.text, segment.loss, out, scratch);
    }
  }
  if (eos_) append_id(*eos_, !record.segments.empty() && record.segments.back().loss, out);
}

}  // namespace pt
