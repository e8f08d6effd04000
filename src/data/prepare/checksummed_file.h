// An output data file written through pt::AtomicWriter with buffering and a running xxh64, so its
// checksum is known when it is committed without reading it back.
#pragma once

#include "core/file.h"

#include <xxhash.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pt {

struct FileDigest {
  uint64_t bytes = 0;
  uint64_t xxh64 = 0;
};

class ChecksummedFile {
 public:
  explicit ChecksummedFile(std::string path);
  ~ChecksummedFile();
  ChecksummedFile(const ChecksummedFile&) = delete;
  ChecksummedFile& operator=(const ChecksummedFile&) = delete;

  template <class T>
  void append(const std::vector<T>& values, size_t begin, size_t end) {
    append_bytes(values.data() + begin, (end - begin) * sizeof(T));
  }
  void append_bytes(const void* data, size_t n);
  FileDigest commit();  // flushes, renames into place; the writer is done

 private:
  void flush();

  AtomicWriter file_;
  XXH64_state_t* state_;
  std::vector<char> buffer_;
  uint64_t bytes_ = 0;
};

}  // namespace pt
