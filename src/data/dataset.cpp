#include "data/dataset.h"

#include "core/error.h"

#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include <algorithm>
#include <filesystem>
#include <limits>
#include <utility>

namespace pt {

namespace {

constexpr std::string_view kRedo = "re-run `packtrain prepare` to rebuild the dataset";

struct MappedSplit {
  MappedFile tokens, mask, offsets;
};

// A validated split's views and the mapped files that back them.
struct SplitViews {
  std::shared_ptr<const MappedSplit> files;
  std::span<const uint32_t> tokens;
  std::span<const uint8_t> mask;
  std::span<const uint64_t> offsets;
};

// A count from metadata.json: a JSON integer that T holds (nlohmann's get converts a float unchecked,
// undefined past T's range, and wraps an integer).
template <class T>
T parse_integer(const nlohmann::json& value, const std::string& what) {
  const bool fits = value.is_number_unsigned()  ? std::in_range<T>(value.get<uint64_t>())
                    : value.is_number_integer() ? std::in_range<T>(value.get<int64_t>())
                                                : false;
  if (!fits)
    fail("{} is {}, not an integer from {} to {}; {}", what, value.dump(), std::numeric_limits<T>::min(),
         std::numeric_limits<T>::max(), kRedo);
  return value.get<T>();
}

uint64_t parse_hex64(const nlohmann::json& value, const std::string& what) {
  auto s = value.get<std::string>();
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos)
    fail("{} is not a 16-digit hex number", what);
  return std::stoull(s, nullptr, 16);
}

template <class T>
std::span<const T> as_span(const MappedFile& file) {
  return {reinterpret_cast<const T*>(file.bytes().data()), file.size() / sizeof(T)};
}

// Maps one data file and checks it against metadata.json's record of it.
MappedFile open_data_file(const std::filesystem::path& dir, const std::string& split, const std::string& name,
                          const nlohmann::json& split_meta, uint64_t expected_bytes, bool verify_checksums) {
  auto path = (dir / split / name).string();
  if (!std::filesystem::exists(path)) fail("{} is missing; {}", path, kRedo);
  MappedFile file(path);
  const auto& record = split_meta.at("files").at(name);
  auto recorded_bytes = parse_integer<uint64_t>(record.at("bytes"), path + " size in metadata.json");
  if (file.size() != recorded_bytes || recorded_bytes != expected_bytes)
    fail(
        "{} has {} bytes, but metadata.json records {} (and its counts imply {}): the file is truncated or "
        "was "
        "changed; {}",
        path, file.size(), recorded_bytes, expected_bytes, kRedo);
  if (verify_checksums) {
    uint64_t expected = parse_hex64(record.at("xxh64"), path + " checksum in metadata.json");
    uint64_t actual = XXH64(file.bytes().data(), file.size(), 0);
    if (actual != expected)
      fail(
          "{} fails its checksum (xxh64 {:016x}, metadata.json records {:016x}): the file is corrupt or was "
          "changed; {}",
          path, actual, expected, kRedo);
  }
  return file;
}

SplitViews open_split(const std::filesystem::path& dir, const std::string& name, const nlohmann::json& meta,
                      int32_t vocab_size, bool verify_checksums) {
  const auto& split_meta = meta.at("splits").at(name);
  const auto where = fmt::format("{}: splits.{}", (dir / "metadata.json").string(), name);
  auto examples = parse_integer<uint64_t>(split_meta.at("examples"), where + ".examples");
  auto tokens = parse_integer<uint64_t>(split_meta.at("tokens"), where + ".tokens");
  // Sizes that wrap past 64 bits would match a short file: 2^64 - 1 examples asked for an empty offsets.bin,
  // whose first entry was then read.
  uint64_t token_bytes = 0, offset_bytes = 0;
  if (__builtin_mul_overflow(tokens, sizeof(uint32_t), &token_bytes) ||
      __builtin_add_overflow(examples, 1, &offset_bytes) ||
      __builtin_mul_overflow(offset_bytes, sizeof(uint64_t), &offset_bytes))
    fail("{}: {} examples of {} tokens do not fit in a file; {}", where, examples, tokens, kRedo);
  auto files = std::make_shared<MappedSplit>(
      MappedSplit{open_data_file(dir, name, "tokens.bin", split_meta, token_bytes, verify_checksums),
                  open_data_file(dir, name, "loss_mask.bin", split_meta, tokens, verify_checksums),
                  open_data_file(dir, name, "offsets.bin", split_meta, offset_bytes, verify_checksums)});

  auto offsets = as_span<uint64_t>(files->offsets);
  auto offsets_path = (dir / name / "offsets.bin").string();
  if (offsets.front() != 0)
    fail("{}: the first offset is {}, expected 0; {}", offsets_path, offsets.front(), kRedo);
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      fail("{}: offsets decrease at example {} ({} then {}); {}", offsets_path, i - 1, offsets[i - 1],
           offsets[i], kRedo);
  if (offsets.back() != tokens)
    fail("{}: the last offset is {}, expected the token count {}; {}", offsets_path, offsets.back(), tokens,
         kRedo);

  auto ids = as_span<uint32_t>(files->tokens);
  auto bad = std::find_if(ids.begin(), ids.end(),
                          [&](uint32_t id) { return id >= static_cast<uint32_t>(vocab_size); });
  if (bad != ids.end())
    fail("{}: token {} has id {}, not below the vocabulary size {}; {}", (dir / name / "tokens.bin").string(),
         bad - ids.begin(), *bad, vocab_size, kRedo);

  auto mask = as_span<uint8_t>(files->mask);
  return {std::move(files), ids, mask, offsets};
}

}  // namespace

DatasetSplit DatasetSplit::from_vectors(std::vector<uint32_t> tokens, std::vector<uint8_t> loss_mask,
                                        std::vector<uint64_t> offsets) {
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != tokens.size() ||
      loss_mask.size() != tokens.size())
    fail(
        "DatasetSplit::from_vectors: offsets must run from 0 to the token count ({}) and the loss mask "
        "must have one entry per token ({})",
        tokens.size(), loss_mask.size());
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1])
      fail("DatasetSplit::from_vectors: offsets decrease at example {}", i - 1);
  struct Owned {
    std::vector<uint32_t> tokens;
    std::vector<uint8_t> mask;
    std::vector<uint64_t> offsets;
  };
  auto owned = std::make_shared<Owned>(Owned{std::move(tokens), std::move(loss_mask), std::move(offsets)});
  DatasetSplit split;
  split.tokens_ = owned->tokens;
  split.mask_ = owned->mask;
  split.offsets_ = owned->offsets;
  split.storage_ = std::move(owned);
  return split;
}

PreparedDataset PreparedDataset::open(const std::string& dir, bool verify_checksums) {
  std::filesystem::path root(dir);
  auto metadata_path = (root / "metadata.json").string();
  if (!std::filesystem::exists(metadata_path))
    fail(
        "{} is not a prepared dataset: {} is missing (prepare did not finish, or this is the wrong "
        "directory); {}",
        dir, metadata_path, kRedo);
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(read_file(metadata_path));
  } catch (const nlohmann::json::exception& e) {
    fail("{} is not valid JSON ({}); {}", metadata_path, e.what(), kRedo);
  }
  PreparedDataset ds;
  ds.dir_ = dir;
  try {
    auto version = parse_integer<int>(meta.at("format_version"), metadata_path + ": format_version");
    if (version != kDatasetFormatVersion)
      fail("{}: dataset format version {}, but this build reads version {}; {}", metadata_path, version,
           kDatasetFormatVersion, kRedo);
    const auto& tokenizer = meta.at("tokenizer");
    ds.tokenizer_hash_ = parse_hex64(tokenizer.at("hash"), metadata_path + ": tokenizer.hash");
    ds.vocab_size_ =
        parse_integer<int32_t>(tokenizer.at("vocab_size"), metadata_path + ": tokenizer.vocab_size");
    if (ds.vocab_size_ <= 0)
      fail("{}: tokenizer.vocab_size is {}, not positive; {}", metadata_path, ds.vocab_size_, kRedo);
    for (auto [name, split] : {std::pair{"train", &ds.train_}, std::pair{"val", &ds.val_}}) {
      auto views = open_split(root, name, meta, ds.vocab_size_, verify_checksums);
      split->tokens_ = views.tokens;
      split->mask_ = views.mask;
      split->offsets_ = views.offsets;
      split->storage_ = std::move(views.files);
    }
  } catch (const nlohmann::json::exception& e) {
    fail("{} lacks a field or has one of the wrong type ({}); {}", metadata_path, e.what(), kRedo);
  }
  return ds;
}

}  // namespace pt
