// Files: read-only memory maps for datasets and checkpoints, and atomic writes (temporary file, fsync,
// rename, fsync of the directory) so an interrupted save never leaves a half-written file in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace pt {

class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);  // throws pt::Error naming the path
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {static_cast<const std::byte*>(data_), size_}; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  void* data_ = nullptr;
  size_t size_ = 0;
};

std::string read_file(const std::string& path);

// Writes through `path + ".tmp"`, fsyncs and renames, so readers see the old file or the new one.
class AtomicWriter {
 public:
  explicit AtomicWriter(std::string path);
  ~AtomicWriter();  // an uncommitted writer removes its temporary file
  AtomicWriter(const AtomicWriter&) = delete;
  AtomicWriter& operator=(const AtomicWriter&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  uint64_t bytes_written() const { return written_; }
  void commit();  // fsync, rename over `path`, fsync the directory

 private:
  std::string path_, tmp_path_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

void write_file_atomic(const std::string& path, std::string_view contents);

}  // namespace pt
