#include "data/prepare/input_reader.h"

namespace pt {

namespace {
bool is_blank(std::string_view line) { return line.find_first_not_of(" \t\r\f\v") == std::string_view::npos; }
std::string_view without_cr(std::string_view line) {
  return line.ends_with('\r') ? line.substr(0, line.size() - 1) : line;
}
}  // namespace

InputReader::InputReader(const std::string& path, InputFormat format, size_t chunk_bytes)
    : lines_(path), format_(format), chunk_bytes_(chunk_bytes) {
  PT_ASSERT(format != InputFormat::kAuto);
}

bool InputReader::next(InputChunk& chunk) {
  chunk.file = lines_.path();
  chunk.data.clear();
  chunk.records.clear();
  std::string_view line;
  bool in_document = false;  // plain text: the last record may still grow
  while (lines_.next(line)) {
    if (lines_.line_number() == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // UTF-8 BOM
    if (is_blank(line)) {
      in_document = false;
      if (chunk.data.size() >= chunk_bytes_) break;
      continue;
    }
    if (format_ == InputFormat::kJsonl) {
      chunk.records.push_back({chunk.data.size(), line.size(), lines_.line_number(), -1});
      chunk.data.append(line);
      if (chunk.data.size() >= chunk_bytes_) break;
    } else if (in_document) {
      auto& doc = chunk.records.back();
      chunk.data += '\n';
      chunk.data.append(without_cr(line));
      doc.size = chunk.data.size() - doc.begin;
    } else {
      line = without_cr(line);
      chunk.records.push_back(
          {chunk.data.size(), line.size(), -1, static_cast<int64_t>(lines_.line_offset())});
      chunk.data.append(line);
      in_document = true;
    }
  }
  return !chunk.records.empty();
}

}  // namespace pt
