// Shared by the prepare and dataset tests: temporary directories, input files, the fixture tokenizer
// (256 byte-level tokens, no merges, specials <|endoftext|> <|im_start|> <|im_end|> <|pad|>) and
// variants of it, and a quiet prepare call.
#pragma once

#include "core/file.h"
#include "data/dataset.h"
#include "data/prepare/prepare.h"
#include "data/tokenizer/tokenizer.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

namespace pt::test {

inline std::filesystem::path temp_dir(const std::string& name) {
  auto dir =
      std::filesystem::temp_directory_path() / ("packtrain_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string write_input(const std::filesystem::path& dir, const std::string& name,
                               const std::string& text) {
  auto path = (dir / name).string();
  write_file_atomic(path, text);
  return path;
}

inline std::string fixture_tokenizer() { return std::string(PACKTRAIN_FIXTURES) + "/prepare/tokenizer.json"; }

// The fixture tokenizer with its added tokens edited: `drop` removed, `add` appended with fresh ids.
inline std::string tokenizer_variant(const std::filesystem::path& dir, const std::vector<std::string>& drop,
                                     const std::vector<std::string>& add) {
  auto json = nlohmann::json::parse(read_file(fixture_tokenizer()));
  auto& added = json["added_tokens"];
  int next_id = 0;
  for (const auto& t : added) next_id = std::max(next_id, t["id"].get<int>() + 1);
  nlohmann::json kept = nlohmann::json::array();
  for (const auto& t : added)
    if (std::find(drop.begin(), drop.end(), t["content"].get<std::string>()) == drop.end()) kept.push_back(t);
  for (const auto& content : add) {
    auto t = added[0];
    t["id"] = next_id++;
    t["content"] = content;
    kept.push_back(t);
  }
  added = kept;
  auto path = (dir / "tokenizer_variant.json").string();
  write_file_atomic(path, json.dump(2));
  return path;
}

inline PrepareOptions quiet_options(const std::filesystem::path& dir, std::vector<std::string> inputs) {
  PrepareOptions o;
  o.inputs = std::move(inputs);
  o.tokenizer_path = fixture_tokenizer();
  o.output_dir = (dir / "out").string();
  o.val_fraction = 0;
  o.threads = 2;
  o.show_progress = false;
  return o;
}

inline std::vector<uint32_t> ids(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }

template <class T>
std::vector<T> to_vector(std::span<const T> s) {
  return {s.begin(), s.end()};
}

}  // namespace pt::test
