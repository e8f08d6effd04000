// Unicode normalisation steps of tokenizer.json ("NFC", "NFD", "NFKC", "NFKD", and Sequences of them),
// via utf8proc. Runs of invalid UTF-8 (which HF cannot be given) pass through unchanged so every byte
// string can still be encoded.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pt {

enum class NormalForm { NFC, NFD, NFKC, NFKD };

class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(std::vector<NormalForm> steps) : steps_(std::move(steps)) {}

  bool empty() const { return steps_.empty(); }
  std::string apply(std::string_view text) const;

 private:
  std::vector<NormalForm> steps_;
};

}  // namespace pt
