// Cuts one input file into chunks of raw records, about chunk_bytes of text each, so prepare holds one
// chunk in memory at a time whatever the input size. JSON Lines: one record per non-blank line (blank
// lines are skipped). Plain text: one document per run of non-blank lines; documents are separated by
// one or more blank (empty or whitespace-only) lines, and a document's lines are joined with "\n".
#pragma once

#include "core/error.h"
#include "data/prepare/line_reader.h"
#include "data/prepare/options.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pt {

struct RawRecord {
  size_t begin = 0, size = 0;  // text is InputChunk::data[begin, begin + size)
  int64_t line = -1;           // JSON Lines: 1-based line
  int64_t byte_offset = -1;    // plain text: where the document starts
};

struct InputChunk {
  std::string file;
  std::string data;
  std::vector<RawRecord> records;

  std::string_view text(const RawRecord& r) const { return std::string_view(data).substr(r.begin, r.size); }
  Location where(const RawRecord& r) const { return {file, r.line, r.byte_offset}; }
};

class InputReader {
 public:
  // format must be resolved (kJsonl or kText).
  InputReader(const std::string& path, InputFormat format, size_t chunk_bytes);

  // Replaces `chunk` with the next records; false when the file is exhausted.
  bool next(InputChunk& chunk);
  uint64_t bytes_consumed() const { return lines_.bytes_consumed(); }

 private:
  LineReader lines_;
  InputFormat format_;
  size_t chunk_bytes_;
};

}  // namespace pt
