// Encode throughput of pt::Tokenizer.
// Usage: build/bench_tokenizer [tokenizer.json] [text files...]
// Defaults: the Llama-3-pipeline fixture tokenizer and the fortune files in /usr/share/games/fortunes.
// Documents are the text between blank lines or fortune '%' separators; threads take contiguous
// chunks of documents (pt::parallel_for). The first pass fills the word cache ("cold"). "MB/s per
// core" divides by CPU time, so it stays meaningful on a machine busy with other work.
#include "data/tokenizer/tokenizer.h"
#include "core/error.h"
#include "core/file.h"
#include "core/parallel.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

namespace {

std::vector<std::string> default_texts() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator("/usr/share/games/fortunes")) {
    auto ext = e.path().extension();
    if (e.is_regular_file() && ext != ".dat" && ext != ".u8") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<std::string> documents(const std::vector<std::string>& files) {
  std::vector<std::string> docs;
  for (const auto& f : files) {
    std::string text = pt::read_file(f), doc;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t nl = text.find('\n', pos);
      size_t end = nl == std::string::npos ? text.size() : nl + 1;
      std::string_view line(text.data() + pos, end - pos);
      if (line == "\n" || line == "%\n") {
        if (!doc.empty()) docs.push_back(std::move(doc));
        doc.clear();
      } else {
        doc += line;
      }
      pos = end;
    }
    if (!doc.empty()) docs.push_back(std::move(doc));
  }
  return docs;
}

struct Result {
  double seconds, cpu_seconds;  // wall time; CPU time of the whole process (robust to a busy machine)
  int64_t tokens;
};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

Result encode_all(const pt::Tokenizer& t, const std::vector<std::string>& docs, int threads) {
  std::vector<int64_t> counts(docs.size());
  auto start = std::chrono::steady_clock::now();
  double cpu_start = process_cpu_seconds();
  pt::parallel_for(static_cast<int64_t>(docs.size()), threads, [&](int64_t b, int64_t e) {
    std::vector<int32_t> ids;
    for (int64_t i = b; i < e; ++i) {
      ids.clear();
      t.encode_append(docs[static_cast<size_t>(i)], ids);
      counts[static_cast<size_t>(i)] = static_cast<int64_t>(ids.size());
    }
  });
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double cpu_seconds = process_cpu_seconds() - cpu_start;
  int64_t tokens = 0;
  for (int64_t c : counts) tokens += c;
  return {seconds, cpu_seconds, tokens};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    auto root = std::filesystem::path(__FILE__).parent_path().parent_path();
    std::string tokenizer_path =
        argc > 1 ? argv[1] : (root / "tests/fixtures/tokenizer/llama3.tokenizer.json").string();
    std::vector<std::string> files(argv + std::min(argc, 2), argv + argc);
    if (files.empty()) files = default_texts();
    auto docs = documents(files);
    double mb = 0;
    for (const auto& d : docs) mb += static_cast<double>(d.size()) / 1e6;

    fmt::print("tokenizer {}\ntext: {} files, {} documents, {:.2f} MB\n\n", tokenizer_path, files.size(),
               docs.size(), mb);
    fmt::print("{:<22} {:>9} {:>10} {:>16} {:>12}\n", "run", "seconds", "MB/s", "MB/s per core",
               "tokens/byte");
    auto row = [&](const std::string& name, Result r) {
      fmt::print("{:<22} {:>9.3f} {:>10.1f} {:>16.1f} {:>12.3f}\n", name, r.seconds, mb / r.seconds,
                 mb / r.cpu_seconds, static_cast<double>(r.tokens) / (mb * 1e6));
    };
    auto tokenizer = pt::Tokenizer::from_file(tokenizer_path);
    row("1 thread, cold cache", encode_all(tokenizer, docs, 1));
    row("1 thread", encode_all(tokenizer, docs, 1));
    int n = pt::hardware_threads();
    row(fmt::format("{} threads", n), encode_all(tokenizer, docs, n));
  } catch (const pt::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
