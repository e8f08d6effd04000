#include "data/tokenizer/byte_level.h"

#include <gtest/gtest.h>

#include <set>

namespace pt {
namespace {

TEST(ByteLevel, MapsEveryByteToADistinctPrintableCharacter) {
  std::set<std::string> seen(byte_level_chars().begin(), byte_level_chars().end());
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(byte_level_chars()['a'], "a");
  EXPECT_EQ(byte_level_chars()[' '], "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(byte_level_chars()['\n'], "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(byte_level_codepoint(0), 0x100u);
  EXPECT_EQ(byte_level_codepoint(0xAD), 0x143u);  // the last byte that is not printable
}

TEST(ByteLevel, DecodeInvertsEncodeForAllBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(byte_level_decode(byte_level_encode(all)), all);
  EXPECT_EQ(byte_level_encode("\n hi"), "\xC4\x8A\xC4\xA0hi");
}

TEST(ByteLevel, DecodeRejectsCharactersOutsideTheMap) {
  EXPECT_EQ(byte_level_decode("a b"), std::nullopt);           // a raw space is spelled 'Ġ'
  EXPECT_EQ(byte_level_decode("\xE6\x97\xA5"), std::nullopt);  // a CJK character
  EXPECT_EQ(byte_level_decode("\xC4"), std::nullopt);          // truncated UTF-8
}

}  // namespace
}  // namespace pt
