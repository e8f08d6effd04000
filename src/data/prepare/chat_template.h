// Which layout chat records get (docs/formats.md, "Chat records"), from `--chat-template`:
//   auto (default)  the model's own template when the tokenizer's directory holds one, else the built-in
//                   ChatML layout when the tokenizer has <|im_start|> and <|im_end|>, else the plain one
//   chatml, plain   that built-in layout (encoder.h)
//   PATH            the model's template from PATH: a model directory, a tokenizer_config.json, or a .jinja
//                   file (special tokens then from the tokenizer_config.json beside it, else beside the
//                   tokenizer)
// A model's templates are read as transformers loads them: chat_template.jinja ("default") and
// additional_chat_templates/NAME.jinja beside tokenizer_config.json win over its "chat_template" entry (a
// string, or a list of {"name", "template"}). "default" is used unless --chat-template-name names another.
// Special tokens (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token) come from
// tokenizer_config.json as strings or {"content": ...} objects, and each must be a token of the tokenizer.
#pragma once

#include "data/tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pt {

enum class ChatLayout { kChatML, kPlain, kModel };

struct ChatTemplateChoice {
  ChatLayout layout = ChatLayout::kPlain;
  bool by_flag = false;  // named by --chat-template (else chosen by auto)
  // kModel only:
  std::string name;                 // "default" or the --chat-template-name
  std::string file;                 // where the template text was read
  std::string source;               // the template text
  std::string special_tokens_file;  // where the special tokens were read ("" when nowhere)
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();  // {"bos_token": "<s>", ...}
  bool generation_blocks = false;  // the template marks assistant output with {% generation %}
};

// Throws pt::Error naming the flag and file when the choice cannot be made or read.
ChatTemplateChoice choose_chat_template(std::string_view flag, std::string_view name,
                                        const std::string& tokenizer_path, const Tokenizer& tokenizer);

std::string_view layout_name(ChatLayout layout);              // "chatml", "plain", "model"
std::string describe(const ChatTemplateChoice& c);            // one line for the console
nlohmann::ordered_json to_json(const ChatTemplateChoice& c);  // metadata.json's tokenizer.chat_template

// The model's BOS and EOS: with a model's template, the bos_token and eos_token its tokenizer_config.json
// names (what TRL appends to texts; nullopt when the tokenizer has no such token), else found by their
// usual names (Tokenizer::bos_id, eos_id).
std::optional<int32_t> model_bos_id(const ChatTemplateChoice& c, const Tokenizer& tokenizer);
std::optional<int32_t> model_eos_id(const ChatTemplateChoice& c, const Tokenizer& tokenizer);

// Whether the template has a {% generation %} block, spelled as transformers looks for it.
bool has_generation_blocks(std::string_view source);

}  // namespace pt
