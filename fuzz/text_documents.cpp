// Input files as prepare reads them (data/prepare/input_reader.h): the input is a whole file, read as
// plain text and as JSON Lines in small chunks and compared with a direct reading of the rules (documents
// are runs of non-blank lines joined by "\n", one trailing "\r" dropped per line; JSONL records are the
// non-blank lines; a UTF-8 BOM starts the file). Each document then takes the plain-text path: invalid
// UTF-8 is found and repaired (checked against simdjson's validator), and the test tokenizer gives the
// text back exactly.
#include "data/prepare/input_reader.h"
#include "data/prepare/utf8.h"
#include "data/tokenizer/tokenizer.h"
#include "fuzz_util.h"

#include <simdjson.h>

#include <vector>

namespace {

const pt::Tokenizer& tokenizer() {
  static const auto t = pt::Tokenizer::from_file(PACKTRAIN_FIXTURES "/prepare/tokenizer.json");
  return t;
}

struct Expected {
  std::string text;
  int64_t line = -1, byte_offset = -1;
};

bool blank(std::string_view line) { return line.find_first_not_of(" \t\r\f\v") == std::string_view::npos; }

std::vector<Expected> expected_records(std::string_view file, pt::InputFormat format) {
  std::vector<Expected> out;
  bool in_document = false;
  int64_t number = 0;
  for (size_t begin = 0; begin < file.size();) {
    size_t end = std::min(file.find('\n', begin), file.size());
    std::string_view line = file.substr(begin, end - begin);
    auto offset = static_cast<int64_t>(begin);
    begin = end + 1;
    if (++number == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
    if (blank(line)) {
      in_document = false;
      continue;
    }
    if (format == pt::InputFormat::kJsonl) {
      out.push_back({std::string(line), number, -1});
      continue;
    }
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (in_document) {
      out.back().text += '\n';
      out.back().text += line;
    } else {
      out.push_back({std::string(line), -1, offset});
      in_document = true;
    }
  }
  return out;
}

void check_text(const std::string& text) {
  size_t bad = pt::find_invalid_utf8(text);
  PT_FUZZ_CHECK((bad == std::string_view::npos) == simdjson::validate_utf8(text.data(), text.size()));
  std::string repaired = bad == std::string_view::npos ? text : pt::repair_utf8(text);
  PT_FUZZ_CHECK(simdjson::validate_utf8(repaired.data(), repaired.size()));
  PT_FUZZ_CHECK(pt::find_invalid_utf8(repaired) == std::string_view::npos);
  PT_FUZZ_CHECK(tokenizer().decode(tokenizer().encode(repaired)) == repaired);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto path = pt::fuzz::scratch_dir() / "input.txt";
  pt::fuzz::write_bytes(path, data, size);
  const std::string_view file = pt::fuzz::as_text(data, size);
  for (auto format : {pt::InputFormat::kText, pt::InputFormat::kJsonl}) {
    auto expected = expected_records(file, format);
    pt::InputReader reader(path.string(), format, /*chunk_bytes=*/64);
    pt::InputChunk chunk;
    size_t n = 0;
    while (reader.next(chunk)) {
      PT_FUZZ_CHECK(!chunk.records.empty());
      for (const auto& r : chunk.records) {
        PT_FUZZ_CHECK(r.begin + r.size <= chunk.data.size());
        PT_FUZZ_CHECK(n < expected.size());
        const auto& e = expected[n++];
        PT_FUZZ_CHECK(chunk.text(r) == e.text && r.line == e.line && r.byte_offset == e.byte_offset);
        if (format == pt::InputFormat::kText) check_text(e.text);
      }
    }
    PT_FUZZ_CHECK(n == expected.size() && reader.bytes_consumed() == size);
  }
  return 0;
}
