// Turns a Record into token ids and a loss mask (1 where the token is a loss target), laying chat
// records out with a chat template. Special tokens are inserted by id, never by tokenizing their text.
//
// ChatML (the tokenizer has <|im_start|> and <|im_end|>), per message:
//   <|im_start|> "{role}\n" "{content}" <|im_end|> "\n"
//   loss on an assistant message's content and its <|im_end|>.
// Plain fallback (otherwise), per message:
//   "{Role}: " "{content}" "\n\n"      with Role one of System, User, Assistant
//   loss on an assistant message's content and its "\n\n".
// Every example then gets EOS (when the tokenizer has one and add_eos), a loss target when the record's
// last segment is (a text, a completion, an assistant message last), and BOS first with add_bos.
// Segments are tokenized separately, so the tokens of a prompt never merge with its completion's.
#pragma once

#include "data/prepare/record.h"
#include "data/tokenizer/tokenizer.h"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace pt {

struct EncodedExample {
  std::vector<uint32_t> tokens;
  std::vector<uint8_t> loss_mask;
};

enum class ChatTemplate { kChatML, kPlain };

class Encoder {
 public:
  // Throws pt::Error when add_bos is asked of a tokenizer without BOS.
  Encoder(const Tokenizer& tokenizer, bool add_bos, bool add_eos);

  // Thread-safe: `out` and `scratch` belong to the caller.
  void encode(const Record& record, EncodedExample& out, std::vector<int32_t>& scratch) const;
  ChatTemplate chat_template() const { return im_start_ ? ChatTemplate::kChatML : ChatTemplate::kPlain; }

 private:
  void append_text(std::string_view text, bool loss, EncodedExample& out,
                   std::vector<int32_t>& scratch) const;
  static void append_id(int32_t id, bool loss, EncodedExample& out);
  void append_message(const Segment& message, EncodedExample& out, std::vector<int32_t>& scratch) const;

  const Tokenizer& tokenizer_;
  std::optional<int32_t> bos_, eos_, im_start_, im_end_;
};

std::string_view chat_template_name(ChatTemplate t);  // "chatml", "plain"

}  // namespace pt
