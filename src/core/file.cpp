#include "core/file.h"

#include "core/error.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pt {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open {}: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    fail("cannot stat {}: {}", path, std::strerror(errno));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      ::close(fd);
      fail("cannot map {}: {}", path, std::strerror(errno));
    }
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

MappedFile::MappedFile(MappedFile&& other) noexcept { *this = std::move(other); }

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, size_);
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open {}: {}", path, std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<uint64_t> free_disk_bytes(const std::string& path) {
  std::filesystem::path p = std::filesystem::absolute(path);
  std::error_code ec;
  while (!std::filesystem::exists(p, ec) && p.has_relative_path()) p = p.parent_path();
  struct statvfs st {};
  if (::statvfs(p.c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

std::string format_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (bytes >= 1'000'000'000) return fmt::format("{:.1f} GB ({} bytes)", b / 1e9, bytes);
  if (bytes >= 1'000'000) return fmt::format("{:.1f} MB ({} bytes)", b / 1e6, bytes);
  if (bytes >= 1'000) return fmt::format("{:.1f} kB ({} bytes)", b / 1e3, bytes);
  return fmt::format("{} bytes", bytes);
}

void sync_directory(const std::string& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

namespace {

bool out_of_space(int err) { return err == ENOSPC || err == EDQUOT || err == EFBIG; }

// The error of a failed operation on path; out of space, with how much of the file was written and how
// much room is left.
[[noreturn]] void write_failed(const char* op, const std::string& path, int err, uint64_t written) {
  std::string detail;
  if (out_of_space(err)) {
    const auto free = free_disk_bytes(path);
    detail = fmt::format(" ({} of it written; {} free on its filesystem{})", format_bytes(written),
                         free ? format_bytes(*free) : "unknown",
                         err == EFBIG ? ", or the process's file size limit (ulimit -f) was reached" : "");
  }
  throw WriteError(fmt::format("cannot {} {}: {}{}", op, path, std::strerror(err), detail));
}

}  // namespace

AtomicWriter::AtomicWriter(std::string path) : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) write_failed("create", tmp_path_, errno, 0);
}

AtomicWriter::~AtomicWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_path_.c_str());
  }
}

void AtomicWriter::write(const void* data, size_t n) {
  auto p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      write_failed("write", tmp_path_, errno, written_);
    }
    p += w;
    n -= static_cast<size_t>(w);
    written_ += static_cast<uint64_t>(w);
  }
}

void AtomicWriter::commit() {
  // Filesystems that allocate late (NFS, delayed allocation) report a full disk here.
  if (::fsync(fd_) != 0) write_failed("fsync", tmp_path_, errno, written_);
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_path_.c_str());
    write_failed("rename", tmp_path_ + " to " + path_, err, written_);
  }
  sync_directory(std::filesystem::path(path_).parent_path().string());
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicWriter w(path);
  w.write(contents);
  w.commit();
}

}  // namespace pt
