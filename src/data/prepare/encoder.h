// Turns a Record into token ids and a loss mask (1 where the token is a loss target), laying chat
// records out with the chosen chat template (chat_template.h).
//
// A model's chat template (chat_render.h): the conversation is rendered and the text tokenized once, as
// transformers' apply_chat_template(tokenize=True) does (no special tokens added; those the template
// writes are recognised). Tokens overlapping the loss spans carry loss (token_spans.h). No EOS is added,
// as TRL adds none to conversations (the template ends each turn itself), and --add-bos adds BOS (the
// config's bos_token) only when the template did not write one.
//
// The built-in layouts insert special tokens by id, never by tokenizing their text:
// ChatML (the tokenizer has <|im_start|> and <|im_end|>), per message:
//   <|im_start|> "{role}\n" "{content}" <|im_end|> "\n"
//   loss on an assistant message's content and its <|im_end|>.
// Plain, per message:
//   "{Role}: " "{content}" "\n\n"      with Role one of System, User, Assistant
//   loss on an assistant message's content and its "\n\n".
// Every example of the built-in layouts, texts and prompt-completion records then gets EOS (the model's,
// chat_template.h, when there is one and add_eos), a loss target when the record's last segment is (a
// text, a completion, an assistant message last), and BOS first with add_bos. Segments are tokenized
// separately, so the tokens of a prompt never merge with its completion's.
//
// Pre-tokenized records are taken as they are: no BOS, no EOS.
#pragma once

#include "data/prepare/chat_template.h"
#include "data/prepare/record.h"
#include "data/tokenizer/tokenizer.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace pt {

class ChatRenderer;

class Encoder {
 public:
  // Throws pt::Error when add_bos is asked of a tokenizer without BOS, or the chat template does not parse.
  Encoder(const Tokenizer& tokenizer, bool add_bos, bool add_eos, const ChatTemplateChoice& chat);
  ~Encoder();

  // Thread-safe: `out`, `scratch` and `issues` belong to the caller. False (with an issue saying why)
  // when the record gives no example; issues may also tell of alterations of a record that does.
  bool encode(const Record& record, EncodedExample& out, std::vector<int32_t>& scratch,
              std::vector<RecordIssue>& issues) const;

 private:
  void append_text(std::string_view text, bool loss, EncodedExample& out,
                   std::vector<int32_t>& scratch) const;
  static void append_id(int32_t id, bool loss, EncodedExample& out);
  void append_message(const Segment& message, EncodedExample& out, std::vector<int32_t>& scratch) const;
  bool encode_with_template(const nlohmann::ordered_json& messages, EncodedExample& out,
                            std::vector<int32_t>& scratch, std::vector<RecordIssue>& issues) const;

  const Tokenizer& tokenizer_;
  std::optional<int32_t> bos_, eos_, im_start_, im_end_;
  std::unique_ptr<ChatRenderer> renderer_;  // a model's chat template
};

}  // namespace pt
