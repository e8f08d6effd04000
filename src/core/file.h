// Files: read-only memory maps for datasets and checkpoints, and atomic writes (temporary file, fsync,
// rename, fsync of the directory) so an interrupted save never leaves a half-written file in place.
// A failed write throws WriteError naming the file, how much of it was written and the space left, so
// that callers can say what their whole output needs.
#pragma once

#include "core/error.h"

#include <cstddef>
#include <cstdint>
#include <optional>
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

// A create, write, fsync or rename that failed. When the filesystem, a quota or the process's file size
// limit (RLIMIT_FSIZE) ran out, the message says how much of the file was written and what is free.
struct WriteError : Error {
  using Error::Error;
};

// Bytes an unprivileged writer may still use on the filesystem holding path (or its nearest existing
// parent directory); nullopt when that cannot be found out.
std::optional<uint64_t> free_disk_bytes(const std::string& path);

// "15.9 MB (15934832 bytes)": decimal units, as disks are sold and df -H prints them.
std::string format_bytes(uint64_t bytes);

// fsync of a directory, so that the renames and creations in it survive a crash. Best effort: some
// filesystems do not sync directories.
void sync_directory(const std::string& dir);

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
