// Reading tokenizer.json into Tokenizer::Impl. Everything packtrain cannot reproduce exactly is
// rejected with the file, the JSON path of the field and what is supported.
#include "core/error.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/tokenizer_impl.h"

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace pt {

namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void error(const std::string& path, const std::string& what) const {
    fail("{}: {} {}", origin_, path, what);
  }

  json parse(std::string_view text) const {
    try {
      return json::parse(text);
    } catch (const json::parse_error& e) {
      size_t byte = std::min(e.byte > 0 ? e.byte - 1 : 0, text.size());
      auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(byte), '\n');
      auto line_start = text.rfind('\n', byte == 0 ? 0 : byte - 1);
      size_t column = byte - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
      fail(
          "{}: malformed JSON at line {}, column {} (byte {}): {}; expected a tokenizer.json saved by HF "
          "tokenizers",
          origin_, line, column, byte, e.what());
    }
  }

  const json& field(const json& obj, const std::string& path, const char* key) const {
    if (!obj.is_object()) error(path, "must be a JSON object");
    auto it = obj.find(key);
    if (it == obj.end()) error(path + "/" + key, "is missing");
    return *it;
  }

  bool flag(const json& obj, const std::string& path, const char* key, bool fallback) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) error(path + "/" + key, "must be true or false");
    return it->get<bool>();
  }

  std::string string(const json& value, const std::string& path) const {
    if (!value.is_string()) error(path, "must be a string");
    return value.get<std::string>();
  }

  std::string type(const json& obj, const std::string& path) const {
    return string(field(obj, path, "type"), path + "/type");
  }

  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

NormalForm normal_form(const Reader& r, const std::string& type, const std::string& path) {
  if (type == "NFC") return NormalForm::NFC;
  if (type == "NFD") return NormalForm::NFD;
  if (type == "NFKC") return NormalForm::NFKC;
  if (type == "NFKD") return NormalForm::NFKD;
  r.error(path + "/type",
          fmt::format("is \"{}\"; supported normalizers: NFC, NFD, NFKC, NFKD and a Sequence of "
                      "them (or null)",
                      type));
}

void read_normalizer(const Reader& r, const json& node, const std::string& path,
                     std::vector<NormalForm>& steps) {
  if (node.is_null()) return;
  std::string type = r.type(node, path);
  if (type != "Sequence") {
    steps.push_back(normal_form(r, type, path));
    return;
  }
  const json& list = r.field(node, path, "normalizers");
  if (!list.is_array()) r.error(path + "/normalizers", "must be an array");
  for (size_t i = 0; i < list.size(); ++i)
    read_normalizer(r, list[i], fmt::format("{}/normalizers/{}", path, i), steps);
}

SplitBehavior split_behavior(const Reader& r, const std::string& name, const std::string& path) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  r.error(path, fmt::format("is \"{}\"; expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
                            "Contiguous",
                            name));
}

void read_pretokenizer(const Reader& r, const json& node, const std::string& path, PreTokenizer& out) {
  std::string type = r.type(node, path);
  if (type == "Sequence") {
    const json& list = r.field(node, path, "pretokenizers");
    if (!list.is_array()) r.error(path + "/pretokenizers", "must be an array");
    for (size_t i = 0; i < list.size(); ++i)
      read_pretokenizer(r, list[i], fmt::format("{}/pretokenizers/{}", path, i), out);
  } else if (type == "ByteLevel") {
    out.add_byte_level(r.flag(node, path, "add_prefix_space", true), r.flag(node, path, "use_regex", true));
  } else if (type == "Split") {
    const json& pattern = r.field(node, path, "pattern");
    std::string regex;
    if (pattern.is_object() && pattern.contains("Regex")) {
      regex = r.string(pattern["Regex"], path + "/pattern/Regex");
    } else if (pattern.is_object() && pattern.contains("String")) {
      regex = Regex::escape_literal(r.string(pattern["String"], path + "/pattern/String"));
    } else {
      r.error(path + "/pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
    }
    auto behavior =
        split_behavior(r, r.string(r.field(node, path, "behavior"), path + "/behavior"), path + "/behavior");
    out.add_split(std::make_shared<const Regex>(regex, r.origin() + ": " + path + "/pattern"), behavior,
                  r.flag(node, path, "invert", false));
  } else {
    r.error(path + "/type",
            fmt::format("is \"{}\"; supported pre-tokenizers: ByteLevel, Split and Sequence of "
                        "them (byte-level BPE as in GPT-2, Llama-3, Qwen2)",
                        type));
  }
}

// Model fields whose non-default values change results in ways packtrain does not reproduce.
void reject_unsupported_model_options(const Reader& r, const json& model) {
  std::string type = r.type(model, "/model");
  if (type != "BPE")
    r.error("/model/type", fmt::format("is \"{}\"; packtrain supports only byte-level \"BPE\" models", type));
  if (model.contains("dropout") && !model["dropout"].is_null())
    r.error("/model/dropout", "is set; only null is supported (BPE dropout is a training-time augmentation)");
  if (r.flag(model, "/model", "byte_fallback", false))
    r.error("/model/byte_fallback", "is true; only false is supported (byte-level BPE covers every byte)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      r.error(std::string("/model/") + key, "is set; only null is supported for byte-level BPE");
  }
}

}  // namespace

Tokenizer::Impl::Impl(std::string_view text, const std::string& origin) {
  Reader r(origin);
  json root = r.parse(text);
  if (!root.is_object()) r.error("(the document)", "must be a JSON object");
  std::string canonical = root.dump();  // sorted keys, no whitespace
  hash = XXH64(canonical.data(), canonical.size(), 0);

  const json& model = r.field(root, "", "model");
  reject_unsupported_model_options(r, model);

  const json& vocab = r.field(model, "/model", "vocab");
  if (!vocab.is_object()) r.error("/model/vocab", "must be an object of token -> id");
  auto assign = [&](int32_t id, const std::string& token, std::string decoded) {
    auto n = static_cast<size_t>(id) + 1;
    if (spelling.size() < n) {
      spelling.resize(n);
      bytes.resize(n);
      used.resize(n);
    }
    spelling[static_cast<size_t>(id)] = token;
    bytes[static_cast<size_t>(id)] = std::move(decoded);
    used[static_cast<size_t>(id)] = true;
    ids[token] = id;
  };
  StringMap<int32_t> bpe_vocab;
  for (const auto& [token, value] : vocab.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > INT32_MAX)
      r.error(fmt::format("/model/vocab (token \"{}\")", token), "must map to a non-negative integer id");
    auto id = value.get<int32_t>();
    auto raw = byte_level_decode(token);
    // Tokens outside the byte-level alphabet cannot come out of BPE; they decode to their own bytes.
    if (raw) bpe_vocab.emplace(*raw, id);
    assign(id, token, raw ? *raw : token);
  }

  const json& merges_node = r.field(model, "/model", "merges");
  if (!merges_node.is_array()) r.error("/model/merges", "must be an array");
  std::vector<BpeMerge> merges;
  merges.reserve(merges_node.size());
  for (size_t i = 0; i < merges_node.size(); ++i) {
    const json& m = merges_node[i];
    std::string path = fmt::format("/model/merges/{}", i);
    std::string left, right;
    if (m.is_string()) {
      auto s = m.get<std::string>();
      auto space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        r.error(path, fmt::format("is \"{}\"; a merge string must be two tokens separated by one space", s));
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      r.error(path, "must be a string \"a b\" or a pair [\"a\", \"b\"]");
    }
    auto lookup = [&](const std::string& token, const char* what) {
      auto it = vocab.find(token);
      if (it == vocab.end())
        r.error(path, fmt::format("(merge #{} \"{} {}\"): {} \"{}\" is not in /model/vocab", i + 1, left,
                                  right, what, token));
      return it->get<int32_t>();
    };
    int32_t a = lookup(left, "token"), b = lookup(right, "token"),
            merged = lookup(left + right, "merged token");
    merges.push_back({a, b, merged});
  }

  BpeOptions options;
  options.ignore_merges = r.flag(model, "/model", "ignore_merges", false);
  options.fuse_unk = r.flag(model, "/model", "fuse_unk", false);
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    std::string unk = r.string(model["unk_token"], "/model/unk_token");
    auto it = vocab.find(unk);
    if (it == vocab.end()) r.error("/model/unk_token", fmt::format("\"{}\" is not in /model/vocab", unk));
    options.unk_id = it->get<int32_t>();
  }
  bpe = BpeModel(std::move(bpe_vocab), merges, options);

  std::vector<NormalForm> forms;
  if (root.contains("normalizer")) read_normalizer(r, root["normalizer"], "/normalizer", forms);
  normalizer = Normalizer(forms);

  const json& pre = r.field(root, "", "pre_tokenizer");
  if (pre.is_null()) r.error("/pre_tokenizer", "is null; byte-level BPE needs a ByteLevel pre-tokenizer");
  read_pretokenizer(r, pre, "/pre_tokenizer", pretokenizer);
  if (!pretokenizer.has_byte_level())
    r.error("/pre_tokenizer", "has no ByteLevel step; packtrain supports byte-level BPE only");

  std::vector<AddedToken> raw_tokens, normalized_tokens;
  std::vector<std::string> raw_patterns, normalized_patterns;
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    const json& list = root["added_tokens"];
    if (!list.is_array()) r.error("/added_tokens", "must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      std::string path = fmt::format("/added_tokens/{}", i);
      const json& t = list[i];
      AddedToken token;
      const json& id = r.field(t, path, "id");
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        r.error(path + "/id", "must be a non-negative integer");
      token.id = id.get<int32_t>();
      token.content = r.string(r.field(t, path, "content"), path + "/content");
      token.special = r.flag(t, path, "special", false);
      token.single_word = r.flag(t, path, "single_word", false);
      token.lstrip = r.flag(t, path, "lstrip", false);
      token.rstrip = r.flag(t, path, "rstrip", false);
      token.normalized = r.flag(t, path, "normalized", !token.special);
      assign(token.id, token.content, token.content);
      if (token.normalized) {
        normalized_patterns.push_back(normalizer.apply(token.content));
        normalized_tokens.push_back(std::move(token));
      } else {
        raw_patterns.push_back(token.content);
        raw_tokens.push_back(std::move(token));
      }
    }
  }
  raw_added = AddedTokenMatcher(std::move(raw_tokens), raw_patterns);
  normalized_added = AddedTokenMatcher(std::move(normalized_tokens), normalized_patterns);
}

}  // namespace pt
