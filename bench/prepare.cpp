// Prepare throughput: a synthetic ~50 MB JSONL (a mix of text, prompt/completion and chat records built
// from the system's fortunes, else generated words) is prepared with 1 thread and with all threads.
//   build/bench_prepare [tokenizer.json] [input.jsonl]
// Defaults: the test fixture tokenizer (run from the repository root) and a generated input.
#include "data/prepare/prepare.h"
#include "core/file.h"
#include "core/parallel.h"

#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

// Fortunes (one per "%" line) from /usr/share/games/fortunes, or random words when there are none.
std::vector<std::string> load_passages(std::mt19937_64& rng) {
  std::vector<std::string> passages;
  const fs::path dir = "/usr/share/games/fortunes";
  if (fs::is_directory(dir))
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file() || entry.path().has_extension()) continue;
      std::string text = pt::read_file(entry.path().string()), current;
      size_t begin = 0;
      while (begin < text.size()) {
        size_t end = text.find('\n', begin);
        if (end == std::string::npos) end = text.size();
        std::string_view line(text.data() + begin, end - begin);
        if (line == "%") {
          if (!current.empty()) passages.push_back(std::move(current));
          current.clear();
        } else {
          current.append(line).push_back('\n');
        }
        begin = end + 1;
      }
    }
  if (passages.size() >= 100) return passages;
  const char* syllables[] = {"ka", "lo", "mi", "ter", "an", "dus", "pre", "vo", "shi", "ne", "ra", "tum"};
  std::uniform_int_distribution<int> syllable(0, 11), length(1, 4), words(8, 80);
  for (int p = 0; p < 2000; ++p) {
    std::string s;
    for (int w = words(rng); w > 0; --w) {
      for (int k = length(rng); k > 0; --k) s += syllables[syllable(rng)];
      s += w % 13 == 0 ? ".\n" : " ";
    }
    passages.push_back(std::move(s));
  }
  return passages;
}

std::string generate_input(const fs::path& dir, size_t target_bytes) {
  std::mt19937_64 rng(42);
  auto passages = load_passages(rng);
  std::uniform_int_distribution<size_t> pick(0, passages.size() - 1);
  auto some = [&](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += passages[pick(rng)];
    return s;
  };
  auto path = (dir / "input.jsonl").string();
  pt::AtomicWriter out(path);
  for (uint64_t i = 0; out.bytes_written() < target_bytes; ++i) {
    nlohmann::json record;
    if (i % 3 == 0) {
      record = {{"text", some(6)}};
    } else if (i % 3 == 1) {
      record = {{"prompt", some(2)}, {"completion", some(2)}};
    } else {
      record = {{"messages",
                 {{{"role", "system"}, {"content", "You are a witty assistant."}},
                  {{"role", "user"}, {"content", some(1)}},
                  {{"role", "assistant"}, {"content", some(2)}}}}};
    }
    out.write(record.dump() + "\n");
  }
  out.commit();
  return path;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string tokenizer = argc > 1 ? argv[1] : "tests/fixtures/prepare/tokenizer.json";
    auto work = fs::temp_directory_path() / fmt::format("packtrain_bench_prepare_{}", ::getpid());
    fs::create_directories(work);
    std::string input = argc > 2 ? argv[2] : generate_input(work, size_t{50} << 20);
    double mb = static_cast<double>(fs::file_size(input)) / 1e6;
    fmt::print("prepare of {} ({:.1f} MB), tokenizer {}\n", input, mb, tokenizer);
    fmt::print("{:>8} {:>10} {:>10} {:>14}\n", "threads", "seconds", "MB/s", "tokens/s");
    for (int threads : {1, pt::hardware_threads()}) {
      pt::PrepareOptions o;
      o.inputs = {input};
      o.tokenizer_path = tokenizer;
      o.output_dir = (work / "out").string();
      o.threads = threads;
      o.show_progress = false;
      o.max_len = int64_t{1} << 20;  // measure tokenizing and writing, not the length policy
      auto start = std::chrono::steady_clock::now();
      auto report = pt::prepare_dataset(o);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const auto& splits = report.metadata["splits"];
      auto tokens = splits["train"]["tokens"].get<double>() + splits["val"]["tokens"].get<double>();
      fmt::print("{:>8} {:>10.2f} {:>10.1f} {:>14.3g}\n", threads, s, mb / s, tokens / s);
    }
    fs::remove_all(work);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
