// Reading tokenizer.json into Tokenizer::Impl. Everything packtrain cannot reproduce exactly is
// rejected with the file, the JSON path of the field and what is supported.
#include "core/error.h"
#include "data/tokenizer/byte_level.h"
#include "data/tokenizer/tokenizer_impl.h"

#include <utf8proc.h>
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
    } catch (const json::exception& e) {  // out_of_range: a number beyond a double
      fail("{}: malformed JSON: {}; expected a tokenizer.json saved by HF tokenizers", origin_, e.what());
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

  // An optional string field, `fallback` when missing or null.
  std::string string_or(const json& obj, const std::string& path, const char* key,
                        const std::string& fallback) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    return string(*it, path + "/" + key);
  }

  const std::string& origin() const { return origin_; }

 private:
  std::string origin_;
};

// A Replace's pattern ({"String": ...} or {"Regex": ...}) and content, for a normalizer or a decoder.
struct ReplaceSpec {
  std::string literal;
  std::shared_ptr<const Regex> regex;
  std::string content;
};

ReplaceSpec read_replace(const Reader& r, const json& node, const std::string& path) {
  ReplaceSpec spec;
  const json& pattern = r.field(node, path, "pattern");
  spec.content = r.string(r.field(node, path, "content"), path + "/content");
  if (pattern.is_object() && pattern.contains("String")) {
    spec.literal = r.string(pattern["String"], path + "/pattern/String");
    if (spec.literal.empty())
      r.error(path + "/pattern/String", "is empty; a Replace needs something to replace");
  } else if (pattern.is_object() && pattern.contains("Regex")) {
    std::string regex = r.string(pattern["Regex"], path + "/pattern/Regex");
    // HF expands $1 / ${name} group references in a regex Replace's content; packtrain does not.
    if (spec.content.find('$') != std::string::npos)
      r.error(path + "/content", "refers to regex groups ($); only a plain replacement string is supported");
    spec.regex = std::make_shared<const Regex>(regex, r.origin() + ": " + path + "/pattern");
  } else {
    r.error(path + "/pattern", "must be {\"String\": ...} or {\"Regex\": ...}");
  }
  return spec;
}

// A field holding one character (Metaspace's replacement, Strip's content), as UTF-8.
std::string read_char(const Reader& r, const json& node, const std::string& path, const char* key) {
  std::string c = r.string(r.field(node, path, key), path + "/" + key);
  utf8proc_int32_t cp;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(c.data()),
                            static_cast<utf8proc_ssize_t>(c.size()), &cp);
  if (c.empty() || n != static_cast<utf8proc_ssize_t>(c.size()))
    r.error(path + "/" + key, fmt::format("is \"{}\"; it must be a single character", c));
  return c;
}

// prepend_scheme, or the add_prefix_space of files written before it existed, checked as HF does.
PrependScheme read_prepend_scheme(const Reader& r, const json& node, const std::string& path) {
  PrependScheme scheme = PrependScheme::Always;
  auto it = node.find("prepend_scheme");
  if (it != node.end() && !it->is_null()) {
    std::string name = r.string(*it, path + "/prepend_scheme");
    if (name == "always") {
      scheme = PrependScheme::Always;
    } else if (name == "first") {
      scheme = PrependScheme::First;
    } else if (name == "never") {
      scheme = PrependScheme::Never;
    } else {
      r.error(path + "/prepend_scheme", fmt::format("is \"{}\"; expected always, first or never", name));
    }
  }
  if (!r.flag(node, path, "add_prefix_space", true) && scheme != PrependScheme::Never)
    r.error(path + "/add_prefix_space",
            "is false but prepend_scheme is not \"never\"; HF tokenizers refuses this combination too");
  return scheme;
}

size_t read_count(const Reader& r, const json& node, const std::string& path, const char* key) {
  const json& value = r.field(node, path, key);
  if (!value.is_number_unsigned()) r.error(path + "/" + key, "must be a non-negative integer");
  return value.get<size_t>();
}

void read_normalizer(const Reader& r, const json& node, const std::string& path, Normalizer& out) {
  if (node.is_null()) return;
  std::string type = r.type(node, path);
  if (type == "Sequence") {
    const json& list = r.field(node, path, "normalizers");
    if (!list.is_array()) r.error(path + "/normalizers", "must be an array");
    for (size_t i = 0; i < list.size(); ++i)
      read_normalizer(r, list[i], fmt::format("{}/normalizers/{}", path, i), out);
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    out.add_normal_form(type == "NFC"    ? NormalForm::NFC
                        : type == "NFD"  ? NormalForm::NFD
                        : type == "NFKC" ? NormalForm::NFKC
                                         : NormalForm::NFKD);
  } else if (type == "Prepend") {
    out.add_prepend(r.string(r.field(node, path, "prepend"), path + "/prepend"));
  } else if (type == "Replace") {
    ReplaceSpec spec = read_replace(r, node, path);
    if (spec.regex) {
      out.add_replace(std::move(spec.regex), std::move(spec.content));
    } else {
      out.add_replace(std::move(spec.literal), std::move(spec.content));
    }
  } else if (type == "BertNormalizer") {
    BertNormalizerOptions options;  // missing fields take HF's defaults
    options.clean_text = r.flag(node, path, "clean_text", true);
    options.handle_chinese_chars = r.flag(node, path, "handle_chinese_chars", true);
    options.lowercase = r.flag(node, path, "lowercase", true);
    options.strip_accents = r.flag(node, path, "strip_accents", options.lowercase);
    out.add_bert(options);
  } else {
    r.error(path + "/type", fmt::format("is \"{}\"; supported normalizers: NFC, NFD, NFKC, NFKD, Prepend, "
                                        "Replace, BertNormalizer and a Sequence of them (or null)",
                                        type));
  }
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
  // HF runs later steps on the byte-level spelling; packtrain's pieces stay raw bytes.
  if (type != "Sequence" && out.has_byte_level())
    r.error(path, fmt::format("is a {} after a ByteLevel pre-tokenizer; packtrain supports ByteLevel only as "
                              "the last step",
                              type));
  if (type == "Sequence") {
    const json& list = r.field(node, path, "pretokenizers");
    if (!list.is_array()) r.error(path + "/pretokenizers", "must be an array");
    for (size_t i = 0; i < list.size(); ++i)
      read_pretokenizer(r, list[i], fmt::format("{}/pretokenizers/{}", path, i), out);
  } else if (type == "ByteLevel") {
    out.add_byte_level(r.flag(node, path, "add_prefix_space", true), r.flag(node, path, "use_regex", true));
  } else if (type == "Metaspace") {
    out.add_metaspace(read_char(r, node, path, "replacement"), read_prepend_scheme(r, node, path),
                      r.flag(node, path, "split", true));
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
  } else if (type == "BertPreTokenizer") {
    out.add_bert();
  } else {
    r.error(path + "/type",
            fmt::format("is \"{}\"; supported pre-tokenizers: ByteLevel, Metaspace, Split, BertPreTokenizer "
                        "and a Sequence of them (or null)",
                        type));
  }
}

void read_decoder(const Reader& r, const json& node, const std::string& path, Decoder& out) {
  std::string type = r.type(node, path);
  if (type == "Sequence") {
    const json& list = r.field(node, path, "decoders");
    if (!list.is_array()) r.error(path + "/decoders", "must be an array");
    for (size_t i = 0; i < list.size(); ++i)
      read_decoder(r, list[i], fmt::format("{}/decoders/{}", path, i), out);
  } else if (type == "ByteLevel") {
    out.add_byte_level();
  } else if (type == "Replace") {
    ReplaceSpec spec = read_replace(r, node, path);
    if (spec.regex) {
      out.add_replace(std::move(spec.regex), std::move(spec.content));
    } else {
      out.add_replace(std::move(spec.literal), std::move(spec.content));
    }
  } else if (type == "ByteFallback") {
    out.add_byte_fallback();
  } else if (type == "Fuse") {
    out.add_fuse();
  } else if (type == "Strip") {
    out.add_strip(read_char(r, node, path, "content"), read_count(r, node, path, "start"),
                  read_count(r, node, path, "stop"));
  } else if (type == "Metaspace") {
    out.add_metaspace(read_char(r, node, path, "replacement"),
                      read_prepend_scheme(r, node, path) != PrependScheme::Never);
  } else if (type == "WordPiece") {
    out.add_wordpiece(r.string_or(node, path, "prefix", "##"), r.flag(node, path, "cleanup", true));
  } else {
    r.error(path + "/type", fmt::format("is \"{}\"; supported decoders: ByteLevel, Replace, ByteFallback, "
                                        "Fuse, Strip, Metaspace, WordPiece and a Sequence of them (or null)",
                                        type));
  }
}

// BPE fields whose non-default values change results in ways packtrain does not reproduce.
void reject_unsupported_bpe_options(const Reader& r, const json& model) {
  if (model.contains("dropout") && !model["dropout"].is_null() &&
      !(model["dropout"].is_number() && model["dropout"].get<double>() == 0.0))
    r.error("/model/dropout",
            "is set; only null or 0 is supported (BPE dropout is a training-time augmentation)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      r.error(std::string("/model/") + key, "is set; only null or \"\" is supported");
  }
}

// A [token, id] pair of BertProcessing and RobertaProcessing ("cls", "sep").
int32_t read_token_pair(const Reader& r, const json& node, const std::string& path, const char* key) {
  const json& pair = r.field(node, path, key);
  if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_number_integer())
    r.error(path + "/" + key, "must be a pair [token, id]");
  return pair[1].get<int32_t>();
}

// A piece of a template must leave the type id at 0: packtrain gives no token type ids.
void require_type_zero(const Reader& r, const json& piece, const std::string& path) {
  auto it = piece.find("type_id");
  if (it != piece.end() && !(it->is_number_unsigned() && it->get<uint64_t>() == 0))
    r.error(path + "/type_id",
            fmt::format("is {}; packtrain gives no token type ids, so only 0 is supported", it->dump()));
}

// TemplateProcessing's "single" template; its "pair" template is not used.
void read_template(const Reader& r, const json& node, const std::string& path, PostProcessor& out) {
  const json& single = r.field(node, path, "single");
  const json& specials = r.field(node, path, "special_tokens");
  if (!single.is_array()) r.error(path + "/single", "must be an array");
  if (!specials.is_object()) r.error(path + "/special_tokens", "must be an object");
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (size_t i = 0; i < single.size(); ++i) {
    std::string piece_path = fmt::format("{}/single/{}", path, i);
    const json& piece = single[i];
    if (piece.is_object() && piece.contains("Sequence")) {
      const json& sequence = piece["Sequence"];
      std::string id =
          r.string(r.field(sequence, piece_path + "/Sequence", "id"), piece_path + "/Sequence/id");
      if (id != "A")
        r.error(piece_path + "/Sequence/id",
                fmt::format("is \"{}\"; a single-sequence template holds only $A", id));
      if (seen_sequence) r.error(piece_path, "is a second $A; a single-sequence template holds $A once");
      require_type_zero(r, sequence, piece_path + "/Sequence");
      seen_sequence = true;
    } else if (piece.is_object() && piece.contains("SpecialToken")) {
      const json& special = piece["SpecialToken"];
      std::string name =
          r.string(r.field(special, piece_path + "/SpecialToken", "id"), piece_path + "/SpecialToken/id");
      require_type_zero(r, special, piece_path + "/SpecialToken");
      std::string token_path = path + "/special_tokens/" + name;
      if (!specials.contains(name)) r.error(token_path, "is missing; the template names it");
      const json& ids = r.field(specials[name], token_path, "ids");
      if (!ids.is_array()) r.error(token_path + "/ids", "must be an array of token ids");
      for (const json& id : ids) {
        if (!id.is_number_integer()) r.error(token_path + "/ids", "must be an array of token ids");
        (seen_sequence ? after : before).push_back(id.get<int32_t>());
      }
    } else {
      r.error(piece_path, "must be {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  if (!seen_sequence) r.error(path + "/single", "has no $A; the template would drop the text");
  out.prefix = std::move(before);
  out.suffix = std::move(after);
}

void read_post_processor(const Reader& r, const json& node, const std::string& path, PostProcessor& out) {
  std::string type = r.type(node, path);
  if (type == "Sequence") {
    const json& list = r.field(node, path, "processors");
    if (!list.is_array()) r.error(path + "/processors", "must be an array");
    for (size_t i = 0; i < list.size(); ++i)
      read_post_processor(r, list[i], fmt::format("{}/processors/{}", path, i), out);
    return;
  }
  if (type == "ByteLevel") return;  // it only trims offsets
  if (type != "BertProcessing" && type != "RobertaProcessing" && type != "TemplateProcessing")
    r.error(path + "/type", fmt::format("is \"{}\"; supported post-processors: BertProcessing, "
                                        "RobertaProcessing, TemplateProcessing, ByteLevel and a Sequence of "
                                        "them (or null)",
                                        type));
  // HF hands a later step each piece of an earlier step's output as a sequence of its own.
  if (out.adds_tokens)
    r.error(path, fmt::format("is a {} after another post-processor that adds tokens; packtrain supports one "
                              "such step in a Sequence",
                              type));
  out.adds_tokens = true;
  if (type == "TemplateProcessing") {
    read_template(r, node, path, out);
  } else {
    out.prefix = {read_token_pair(r, node, path, "cls")};
    out.suffix = {read_token_pair(r, node, path, "sep")};
  }
}

// The BPE model from its vocabulary (raw bytes for byte-level models) and the merges and options of
// /model.
BpeModel read_bpe(const Reader& r, const json& model, StringMap<int32_t> vocab, bool byte_level) {
  reject_unsupported_bpe_options(r, model);
  const json& vocab_node = model["vocab"];
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
      auto it = vocab_node.find(token);
      if (it == vocab_node.end())
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
  options.utf8_symbols = !byte_level;
  options.byte_fallback = r.flag(model, "/model", "byte_fallback", false);
  if (byte_level && options.byte_fallback) {
    // Harmless when every byte has its token (byte fallback never triggers); otherwise HF would look
    // up <0xNN> for the bytes of the byte-level spelling, which packtrain does not reproduce.
    for (const std::string& c : byte_level_chars())
      if (!vocab_node.contains(c))
        r.error("/model/byte_fallback",
                "is true with a ByteLevel pre-tokenizer and a vocabulary missing some bytes; only "
                "SentencePiece-style (non-ByteLevel) models may use byte fallback");
    options.byte_fallback = false;
  }
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    std::string unk = r.string(model["unk_token"], "/model/unk_token");
    auto it = vocab_node.find(unk);
    if (it == vocab_node.end())
      r.error("/model/unk_token", fmt::format("\"{}\" is not in /model/vocab", unk));
    options.unk_id = it->get<int32_t>();
  }
  return BpeModel(std::move(vocab), merges, options);
}

WordPieceModel read_wordpiece(const Reader& r, const json& model, StringMap<int32_t> vocab) {
  WordPieceOptions options;
  // HF fails at the first unknown word when unk_token is not a token; packtrain refuses the file.
  std::string unk = r.string_or(model, "/model", "unk_token", "[UNK]");
  auto it = vocab.find(unk);
  if (it == vocab.end())
    r.error("/model/unk_token",
            fmt::format("\"{}\" is not in /model/vocab; WordPiece needs its unknown token", unk));
  options.unk_id = it->second;
  options.continuing_subword_prefix = r.string_or(model, "/model", "continuing_subword_prefix", "##");
  if (model.contains("max_input_chars_per_word"))
    options.max_input_chars_per_word = read_count(r, model, "/model", "max_input_chars_per_word");
  return WordPieceModel(std::move(vocab), std::move(options));
}

}  // namespace

Tokenizer::Impl::Impl(std::string_view text, const std::string& origin) {
  Reader r(origin);
  json root = r.parse(text);
  if (!root.is_object()) r.error("(the document)", "must be a JSON object");
  std::string canonical = root.dump();  // sorted keys, no whitespace
  hash = XXH64(canonical.data(), canonical.size(), 0);

  const json& model_node = r.field(root, "", "model");
  std::string model_type = r.type(model_node, "/model");
  if (model_type != "BPE" && model_type != "WordPiece")
    r.error("/model/type", fmt::format("is \"{}\"; packtrain supports BPE and WordPiece models", model_type));

  if (root.contains("normalizer")) read_normalizer(r, root["normalizer"], "/normalizer", normalizer);
  const json& pre = r.field(root, "", "pre_tokenizer");
  if (!pre.is_null()) read_pretokenizer(r, pre, "/pre_tokenizer", pretokenizer);
  // With a ByteLevel step the vocabulary is spelled in GPT-2's byte alphabet and BPE runs on bytes;
  // without one (SentencePiece-style) tokens are plain text and BPE starts from characters.
  bool byte_level = pretokenizer.has_byte_level();
  if (byte_level && model_type == "WordPiece")
    r.error("/pre_tokenizer",
            "has a ByteLevel step before a WordPiece model; packtrain runs WordPiece on "
            "plain text only (as BERT's BertPreTokenizer gives it)");
  if (root.contains("decoder") && !root["decoder"].is_null()) {
    read_decoder(r, root["decoder"], "/decoder", decoder);
  } else {
    decoder = Decoder::none();
  }

  const json& vocab = r.field(model_node, "/model", "vocab");
  if (!vocab.is_object()) r.error("/model/vocab", "must be an object of token -> id");
  // Ids index dense tables (and a model's embedding rows), so one far past the number of tokens is refused
  // rather than allocated for (2^31 - 1 asked for 64 GB): below twice the tokens given, plus 1024.
  const json* added = root.contains("added_tokens") ? &root["added_tokens"] : nullptr;
  const size_t listed = vocab.size() + (added && added->is_array() ? added->size() : 0);
  const int64_t id_limit = std::min<int64_t>(static_cast<int64_t>(2 * listed + 1024), INT32_MAX);
  auto assign = [&](int32_t id, const std::string& token) {
    auto n = static_cast<size_t>(id) + 1;
    if (spelling.size() < n) {
      spelling.resize(n);
      used.resize(n);
    }
    spelling[static_cast<size_t>(id)] = token;
    used[static_cast<size_t>(id)] = true;
    ids[token] = id;
  };
  StringMap<int32_t> model_vocab;
  for (const auto& [token, value] : vocab.items()) {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() >= id_limit)
      r.error(fmt::format("/model/vocab (token \"{}\")", token),
              fmt::format("must map to a non-negative integer id below {}", id_limit));
    auto id = value.get<int32_t>();
    if (!byte_level) {
      model_vocab.emplace(token, id);
    } else if (auto raw = byte_level_decode(token)) {
      model_vocab.emplace(*raw, id);  // tokens outside the byte alphabet cannot come out of byte-level BPE
    }
    assign(id, token);
  }

  if (model_type == "BPE") {
    model = read_bpe(r, model_node, std::move(model_vocab), byte_level);
  } else {
    model = read_wordpiece(r, model_node, std::move(model_vocab));
  }

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
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= id_limit)
        r.error(path + "/id", fmt::format("must be a non-negative integer below {}", id_limit));
      token.id = id.get<int32_t>();
      token.content = r.string(r.field(t, path, "content"), path + "/content");
      token.special = r.flag(t, path, "special", false);
      token.single_word = r.flag(t, path, "single_word", false);
      token.lstrip = r.flag(t, path, "lstrip", false);
      token.rstrip = r.flag(t, path, "rstrip", false);
      token.normalized = r.flag(t, path, "normalized", !token.special);
      assign(token.id, token.content);
      if (token.special) special_ids.push_back(token.id);
      if (token.normalized) {
        normalized_patterns.push_back(normalizer.apply(token.content));
        normalized_tokens.push_back(std::move(token));
      } else {
        raw_patterns.push_back(token.content);
        raw_tokens.push_back(std::move(token));
      }
    }
  }
  std::sort(special_ids.begin(), special_ids.end());
  special_ids.erase(std::unique(special_ids.begin(), special_ids.end()), special_ids.end());
  raw_added = AddedTokenMatcher(std::move(raw_tokens), raw_patterns);
  normalized_added = AddedTokenMatcher(std::move(normalized_tokens), normalized_patterns);

  if (root.contains("post_processor") && !root["post_processor"].is_null()) {
    read_post_processor(r, root["post_processor"], "/post_processor", post_processor);
    for (const auto* list : {&post_processor.prefix, &post_processor.suffix})
      for (int32_t id : *list)
        if (id < 0 || id >= static_cast<int64_t>(used.size()) || !used[static_cast<size_t>(id)])
          r.error("/post_processor", fmt::format("adds token id {}, which is no token of the tokenizer", id));
  }
}

}  // namespace pt
