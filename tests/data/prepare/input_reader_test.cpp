// Chunked reading of inputs: records, their locations, chunk boundaries and lines longer than the
// reader's buffer.
#include "prepare_test_util.h"

#include "data/prepare/input_reader.h"

#include <gtest/gtest.h>

namespace pt {
namespace {

struct Read {
  std::string text;
  Location where;
};

std::vector<Read> read_all(const std::string& path, InputFormat format, size_t chunk_bytes,
                           int* chunks = nullptr) {
  InputReader reader(path, format, chunk_bytes);
  InputChunk chunk;
  std::vector<Read> out;
  int n = 0;
  while (reader.next(chunk)) {
    ++n;
    for (const auto& r : chunk.records) out.push_back({std::string(chunk.text(r)), chunk.where(r)});
  }
  if (chunks) *chunks = n;
  return out;
}

TEST(InputReader, JsonLinesKeepLineNumbersAcrossChunksAndLongLines) {
  auto dir = test::temp_dir("reader_jsonl");
  std::string long_line(3'000'000, 'x');  // longer than the reader's 1 MiB buffer
  auto path = test::write_input(dir, "in.jsonl", "a\n\n" + long_line + "\r\nb\n  \nc");
  int chunks = 0;
  auto records = read_all(path, InputFormat::kJsonl, 1, &chunks);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(chunks, 4);
  EXPECT_EQ(records[0].text, "a");
  EXPECT_EQ(records[1].text, long_line + "\r");
  EXPECT_EQ(records[3].text, "c");  // the last line has no newline
  EXPECT_EQ(records[0].where.line, 1);
  EXPECT_EQ(records[1].where.line, 3);
  EXPECT_EQ(records[2].where.line, 4);
  EXPECT_EQ(records[3].where.line, 6);
  EXPECT_EQ(read_all(path, InputFormat::kJsonl, size_t{1} << 30, &chunks).size(), 4u);
  EXPECT_EQ(chunks, 1);
  std::filesystem::remove_all(dir);
}

TEST(InputReader, TextDocumentsCarryTheirByteOffsetAndNeverSplitAcrossChunks) {
  auto dir = test::temp_dir("reader_text");
  auto path = test::write_input(dir, "in.txt", "\n\none\ntwo\n\n \t\nthree\r\n");
  for (size_t chunk_bytes : {size_t{1}, size_t{1} << 20}) {
    auto docs = read_all(path, InputFormat::kText, chunk_bytes);
    ASSERT_EQ(docs.size(), 2u);
    EXPECT_EQ(docs[0].text, "one\ntwo");
    EXPECT_EQ(docs[0].where.byte_offset, 2);
    EXPECT_EQ(docs[1].text, "three");
    EXPECT_EQ(docs[1].where.byte_offset, 14);
    EXPECT_EQ(docs[1].where.str(), path + "@byte 14");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pt
