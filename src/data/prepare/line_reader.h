// Buffered line-by-line reading of a file of any size, with each line's number and byte offset, so bad
// records can be reported as file:line or file@byte.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace pt {

class LineReader {
 public:
  explicit LineReader(std::string path);  // throws pt::Error naming the path
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its "\n" (a trailing "\r" is kept); valid until the next call. False at EOF.
  bool next(std::string_view& line);
  int64_t line_number() const { return line_number_; }   // 1-based number of the last line returned
  uint64_t line_offset() const { return line_offset_; }  // byte offset of the last line returned
  uint64_t bytes_consumed() const { return consumed_; }  // bytes up to the end of the last line
  const std::string& path() const { return path_; }

 private:
  bool refill();  // moves the unread tail to the front and reads more; false when nothing was added

  std::string path_;
  std::FILE* file_ = nullptr;
  std::string buf_;
  size_t begin_ = 0, end_ = 0;  // unread bytes are buf_[begin_, end_)
  bool eof_ = false;
  int64_t line_number_ = 0;
  uint64_t line_offset_ = 0, consumed_ = 0;
};

}  // namespace pt
