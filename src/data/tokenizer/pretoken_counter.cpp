// count_pretokens(): the streaming first pass of training.
#include "core/error.h"
#include "core/file.h"
#include "core/parallel.h"
#include "core/progress.h"
#include "data/prepare/record.h"
#include "data/tokenizer/added_tokens.h"
#include "data/tokenizer/trainer.h"

#include <cstring>
#include <memory>
#include <mutex>

namespace pt {

namespace {

constexpr size_t kChunkBytes = 4 << 20;

struct Chunk {
  const MappedFile* file;
  size_t begin, end;
  int64_t first_line;  // 1-based line number of `begin`
  bool jsonl;
};

bool is_jsonl(const std::string& path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() &&
           path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return ends_with(".jsonl") || ends_with(".json");
}

// Line-aligned chunks of every file.
std::vector<Chunk> cut_chunks(const std::vector<std::unique_ptr<MappedFile>>& files) {
  std::vector<Chunk> chunks;
  for (const auto& f : files) {
    auto data = reinterpret_cast<const char*>(f->bytes().data());
    size_t size = f->size(), begin = 0;
    int64_t line = 1;
    while (begin < size) {
      size_t end = std::min(size, begin + kChunkBytes);
      if (end < size) {
        auto nl = static_cast<const char*>(std::memchr(data + end, '\n', size - end));
        end = nl ? static_cast<size_t>(nl - data) + 1 : size;
      }
      chunks.push_back({f.get(), begin, end, line, is_jsonl(f->path())});
      for (size_t i = begin; i < end; ++i) line += data[i] == '\n';
      begin = end;
    }
  }
  return chunks;
}

class Counter {
 public:
  Counter(const PresetPipeline& pipeline, const AddedTokenMatcher& specials)
      : pipeline_(pipeline), specials_(specials) {}

  void add_text(std::string_view text) {
    std::string normalized;
    if (!pipeline_.normalizer.empty()) text = normalized = pipeline_.normalizer.apply(text);
    segments_.clear();
    specials_.split(text, segments_);
    for (const TextSegment& s : segments_) {
      if (s.id >= 0) continue;
      pipeline_.pretokenizer.split(s.text, pieces_);
      for (std::string_view piece : pieces_.list) {
        auto it = counts_.find(piece);
        if (it != counts_.end()) {
          ++it->second;
        } else {
          counts_.emplace(piece, 1);
        }
      }
    }
  }

  void add_chunk(const Chunk& c) {
    std::string_view data(reinterpret_cast<const char*>(c.file->bytes().data()) + c.begin, c.end - c.begin);
    int64_t line = c.first_line;
    size_t pos = 0;
    while (pos < data.size()) {
      size_t nl = data.find('\n', pos);
      size_t end = nl == std::string_view::npos ? data.size() : nl + 1;
      std::string_view text = data.substr(pos, end - pos);
      if (c.jsonl) {
        add_record(text, Location{c.file->path(), line, -1});
      } else {
        add_text(text);
      }
      pos = end;
      ++line;
    }
  }

  StringMap<int64_t>& counts() { return counts_; }

 private:
  // Every text of a record counts, whatever its kind (text, prompt/completion, chat messages): the
  // tokenizer must serve all of what `packtrain prepare` will encode.
  void add_record(std::string_view line, const Location& where) {
    if (line.find_first_not_of(" \t\r\n") == std::string_view::npos) return;
    auto parsed = parse_json_record(line, json_parser_);
    if (auto* problem = std::get_if<RecordProblem>(&parsed)) fail("{}: {}", where.str(), problem->message);
    for (const Segment& segment : std::get<Record>(parsed).segments) add_text(segment.text);
  }

  simdjson::dom::parser json_parser_;
  const PresetPipeline& pipeline_;
  const AddedTokenMatcher& specials_;
  StringMap<int64_t> counts_;
  std::vector<TextSegment> segments_;
  Pieces pieces_;
};

}  // namespace

StringMap<int64_t> count_pretokens(const std::vector<std::string>& paths, const TrainerOptions& options) {
  PresetPipeline pipeline = preset_pipeline(options.preset);
  std::vector<AddedToken> specials;
  for (const std::string& s : options.special_tokens)
    specials.push_back({0, s, true, false, false, false, false});
  AddedTokenMatcher matcher(specials, options.special_tokens);

  std::vector<std::unique_ptr<MappedFile>> files;
  double total_mb = 0;
  for (const std::string& p : paths) {
    files.push_back(std::make_unique<MappedFile>(p));
    total_mb += static_cast<double>(files.back()->size()) / 1e6;
  }
  std::vector<Chunk> chunks = cut_chunks(files);

  StringMap<int64_t> total;
  std::mutex mutex;
  std::unique_ptr<Progress> progress;
  if (options.progress) progress = std::make_unique<Progress>("counting pre-tokens", total_mb, "MB");
  double done_mb = 0;
  parallel_for(static_cast<int64_t>(chunks.size()), options.threads, [&](int64_t begin, int64_t end) {
    Counter counter(pipeline, matcher);
    for (int64_t i = begin; i < end; ++i) {
      const Chunk& c = chunks[static_cast<size_t>(i)];
      counter.add_chunk(c);
      std::lock_guard lock(mutex);
      done_mb += static_cast<double>(c.end - c.begin) / 1e6;
      if (progress) progress->update(done_mb);
    }
    std::lock_guard lock(mutex);
    if (total.empty()) {
      total = std::move(counter.counts());
    } else {
      for (auto& [word, n] : counter.counts()) total[word] += n;
    }
  });
  if (progress) progress->finish();
  return total;
}

}  // namespace pt
