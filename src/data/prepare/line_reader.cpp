#include "data/prepare/line_reader.h"

#include "core/error.h"

#include <cerrno>
#include <cstring>

namespace pt {

namespace {
constexpr size_t kBlockBytes = size_t{1} << 20;
}

LineReader::LineReader(std::string path) : path_(std::move(path)), buf_(kBlockBytes, '\0') {
  file_ = std::fopen(path_.c_str(), "rb");
  if (!file_) fail("cannot open input {}: {}; check the path", path_, std::strerror(errno));
}

LineReader::~LineReader() {
  if (file_) std::fclose(file_);
}

bool LineReader::refill() {
  if (eof_) return false;
  size_t unread = end_ - begin_;
  std::memmove(buf_.data(), buf_.data() + begin_, unread);
  begin_ = 0;
  end_ = unread;
  if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);  // a line longer than the buffer
  size_t got = std::fread(buf_.data() + end_, 1, buf_.size() - end_, file_);
  if (got == 0) {
    if (std::ferror(file_)) fail("cannot read input {}: {}", path_, std::strerror(errno));
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

bool LineReader::next(std::string_view& line) {
  size_t scanned = 0;  // bytes of the pending line already searched for '\n'
  bool had_newline = true;
  for (;;) {
    const char* start = buf_.data() + begin_;
    auto* nl = static_cast<const char*>(std::memchr(start + scanned, '\n', end_ - begin_ - scanned));
    if (nl) {
      size_t len = static_cast<size_t>(nl - start);
      line = std::string_view(start, len);
      begin_ += len + 1;
      break;
    }
    scanned = end_ - begin_;
    if (!refill()) {
      if (begin_ == end_) return false;
      line = std::string_view(buf_.data() + begin_, end_ - begin_);  // last line without "\n"
      begin_ = end_;
      had_newline = false;
      break;
    }
  }
  ++line_number_;
  line_offset_ = consumed_;
  consumed_ += line.size() + (had_newline ? 1 : 0);
  return true;
}

}  // namespace pt
