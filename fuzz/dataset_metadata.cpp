// metadata.json of a prepared dataset (data/dataset.cpp PreparedDataset::open). The input is
// metadata.json, optionally followed by a NUL byte and the bytes of train/offsets.bin; the other data
// files are a fixed tiny dataset (prepared from four records with tests/fixtures/prepare/tokenizer.json).
// Checksums are verified unless the input brings its own offsets, so that the fuzzer reaches the checks
// of the offsets themselves. A dataset that opens has examples within its tokens and ids below its vocab.
#include "data/dataset.h"
#include "fuzz_util.h"

#include <array>
#include <optional>

namespace {

constexpr std::array<uint32_t, 35> kTrainTokens = {97,  98,  256, 104, 101, 108, 108, 111, 256, 257, 117, 115,
                                                   101, 114, 10,  104, 105, 258, 10,  257, 97,  115, 115, 105,
                                                   115, 116, 97,  110, 116, 10,  121, 111, 258, 10,  256};
constexpr std::array<uint8_t, 35> kTrainMask = {0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1};
constexpr std::array<uint64_t, 4> kTrainOffsets = {0, 3, 9, 35};
constexpr std::array<uint32_t, 3> kValTokens = {97, 98, 256};
constexpr std::array<uint8_t, 3> kValMask = {1, 1, 1};
constexpr std::array<uint64_t, 2> kValOffsets = {0, 3};

template <class T, size_t N>
void write_array(const std::filesystem::path& path, const std::array<T, N>& values) {
  pt::fuzz::write_bytes(path, values.data(), sizeof(T) * N);
}

const std::filesystem::path& dataset_dir() {
  static const std::filesystem::path dir = [] {
    auto d = pt::fuzz::scratch_dir() / "dataset";
    std::filesystem::create_directories(d / "train");
    std::filesystem::create_directories(d / "val");
    write_array(d / "train" / "tokens.bin", kTrainTokens);
    write_array(d / "train" / "loss_mask.bin", kTrainMask);
    write_array(d / "val" / "tokens.bin", kValTokens);
    write_array(d / "val" / "loss_mask.bin", kValMask);
    write_array(d / "val" / "offsets.bin", kValOffsets);
    return d;
  }();
  return dir;
}

void check_split(const pt::DatasetSplit& split, int32_t vocab_size) {
  int64_t tokens = 0;
  for (int64_t i = 0; i < split.size(); ++i) {
    auto e = split.example(i);
    PT_FUZZ_CHECK(split.length(i) >= 0 && e.tokens.size() == e.loss_mask.size());
    for (uint32_t id : e.tokens) PT_FUZZ_CHECK(id < static_cast<uint32_t>(vocab_size));
    tokens += split.length(i);
  }
  PT_FUZZ_CHECK(tokens == split.num_tokens());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = pt::fuzz::as_text(data, size);
  const size_t nul = input.find('\0');
  const std::string_view metadata = input.substr(0, nul);
  const auto& dir = dataset_dir();
  pt::fuzz::write_bytes(dir / "metadata.json", metadata.data(), metadata.size());
  if (nul == std::string_view::npos)
    write_array(dir / "train" / "offsets.bin", kTrainOffsets);
  else
    pt::fuzz::write_bytes(dir / "train" / "offsets.bin", data + nul + 1, size - nul - 1);
  std::optional<pt::PreparedDataset> ds;
  if (!pt::fuzz::parses(
          [&] { ds.emplace(pt::PreparedDataset::open(dir.string(), nul == std::string_view::npos)); }))
    return 0;
  PT_FUZZ_CHECK(ds->vocab_size() > 0);
  check_split(ds->train(), ds->vocab_size());
  check_split(ds->val(), ds->vocab_size());
  return 0;
}
