#include "data/tokenizer/tokenizer.h"

#include "core/error.h"
#include "core/file.h"
#include "data/tokenizer/tokenizer_impl.h"

namespace pt {

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_file(const std::string& path) { return from_json(read_file(path), path); }

Tokenizer Tokenizer::from_json(std::string_view json, const std::string& origin) {
  return Tokenizer(std::make_unique<Impl>(json, origin));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  encode_append(text, ids);
  return ids;
}

void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& out) const {
  encode_impl(text, false, out);
}

void Tokenizer::encode_continuation_append(std::string_view text, std::vector<int32_t>& out) const {
  encode_impl(text, true, out);
}

void Tokenizer::encode_impl(std::string_view text, bool continuation, std::vector<int32_t>& out) const {
  const Impl& t = *impl_;
  // Scratch reused across calls on this thread; encode_impl never re-enters itself.
  thread_local std::vector<TextSegment> raw_segments, segments;
  thread_local Pieces pieces;
  raw_segments.clear();
  // at_start: the text begins the input (Metaspace's prepend_scheme "first" only prefixes that one);
  // follows: it directly continues earlier text (no prefix at all).
  auto encode_plain = [&](std::string_view plain, bool at_start, bool follows) {
    t.pretokenizer.split(plain, pieces, at_start, follows);
    std::visit(
        [&](const auto& model) {
          for (std::string_view piece : pieces.list) model.encode_word(piece, out);
        },
        t.model);
  };
  if (t.raw_added.empty()) {
    raw_segments.push_back({text, -1});
  } else {
    t.raw_added.split(text, raw_segments);
  }
  for (const TextSegment& raw : raw_segments) {
    if (raw.id >= 0) {
      out.push_back(raw.id);
      continue;
    }
    bool first = raw.text.data() == text.data();
    bool follows = first && continuation;
    bool at_start = first && !continuation;
    std::string normalized;
    std::string_view plain = raw.text;
    if (!t.normalizer.empty()) plain = normalized = t.normalizer.apply(raw.text, &at_start, !follows);
    if (t.normalized_added.empty()) {
      encode_plain(plain, at_start, follows);
      continue;
    }
    segments.clear();
    t.normalized_added.split(plain, segments);
    for (const TextSegment& s : segments) {
      if (s.id >= 0) {
        out.push_back(s.id);
      } else {
        bool text_start = s.text.data() == plain.data();
        encode_plain(s.text, at_start && text_start, follows && text_start);
      }
    }
  }
}

std::vector<int32_t> Tokenizer::encode_with_special_tokens(std::string_view text) const {
  const PostProcessor& post = impl_->post_processor;
  std::vector<int32_t> ids(post.prefix);
  encode_append(text, ids);
  ids.insert(ids.end(), post.suffix.begin(), post.suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size() || !impl_->used[static_cast<size_t>(id)])
      fail("cannot decode token id {}: the tokenizer has no such id (vocab size {})", id, vocab_size());
    tokens.push_back(impl_->spelling[static_cast<size_t>(id)]);
  }
  return impl_->decoder.decode(std::move(tokens));
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->ids.find(token);
  if (it == impl_->ids.end()) return std::nullopt;
  return it->second;
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size() || !impl_->used[static_cast<size_t>(id)])
    fail("token id {} is not in the tokenizer (vocab size {})", id, vocab_size());
  return impl_->spelling[static_cast<size_t>(id)];
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->spelling.size()); }

bool Tokenizer::has_id(int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->used[static_cast<size_t>(id)];
}

std::span<const int32_t> Tokenizer::special_ids() const { return impl_->special_ids; }

std::optional<std::string> Tokenizer::continuing_subword_prefix() const {
  if (const auto* wordpiece = std::get_if<WordPieceModel>(&impl_->model))
    return wordpiece->continuing_subword_prefix();
  return std::nullopt;
}

uint64_t Tokenizer::hash() const { return impl_->hash; }

namespace {
std::optional<int32_t> first_of(const Tokenizer& t, std::initializer_list<std::string_view> names) {
  for (std::string_view name : names)
    if (auto id = t.token_to_id(name)) return id;
  return std::nullopt;
}

// The post-processor's single token before or after a sequence ([CLS], [SEP]), when there is exactly one.
std::optional<int32_t> only(const std::vector<int32_t>& ids) {
  if (ids.size() != 1) return std::nullopt;
  return ids.front();
}
}  // namespace

std::optional<int32_t> Tokenizer::eos_id() const {
  auto named = first_of(*this, {"<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>", "[EOS]"});
  return named ? named : only(impl_->post_processor.suffix);
}

std::optional<int32_t> Tokenizer::bos_id() const {
  auto named = first_of(*this, {"<|begin_of_text|>", "<|startoftext|>", "<s>", "<bos>", "<|bos|>", "[BOS]"});
  return named ? named : only(impl_->post_processor.prefix);
}

std::optional<int32_t> Tokenizer::pad_id() const {
  return first_of(*this, {"<|pad|>", "<pad>", "<|padding|>", "[PAD]", "<|finetune_right_pad_id|>"});
}

}  // namespace pt
