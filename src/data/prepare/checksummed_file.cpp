#include "data/prepare/checksummed_file.h"

#include <cstring>

namespace pt {

namespace {
constexpr size_t kBufferBytes = size_t{1} << 20;
}

ChecksummedFile::ChecksummedFile(std::string path) : file_(std::move(path)), state_(XXH64_createState()) {
  XXH64_reset(state_, 0);
  buffer_.reserve(kBufferBytes);
}

ChecksummedFile::~ChecksummedFile() { XXH64_freeState(state_); }

void ChecksummedFile::append_bytes(const void* data, size_t n) {
  XXH64_update(state_, data, n);
  bytes_ += n;
  if (buffer_.size() + n > kBufferBytes) flush();
  if (n >= kBufferBytes) {
    file_.write(data, n);
  } else {
    auto p = static_cast<const char*>(data);
    buffer_.insert(buffer_.end(), p, p + n);
  }
}

void ChecksummedFile::flush() {
  file_.write(buffer_.data(), buffer_.size());
  buffer_.clear();
}

FileDigest ChecksummedFile::commit() {
  flush();
  file_.commit();
  return {bytes_, XXH64_digest(state_)};
}

}  // namespace pt
