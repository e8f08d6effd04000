#include "core/error.h"

namespace pt {

std::string Location::str() const {
  if (line >= 0) return fmt::format("{}:{}", file, line);
  if (byte_offset >= 0) return fmt::format("{}@byte {}", file, byte_offset);
  return file;
}

}  // namespace pt
