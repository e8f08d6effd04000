// metadata.json of a prepared dataset (docs/formats.md): written last by prepare, read first by
// PreparedDataset::open. Checksums and the tokenizer hash are 16-digit hex strings, so any JSON reader
// keeps all 64 bits.
#pragma once

#include "core/issues.h"
#include "data/prepare/chat_template.h"
#include "data/prepare/dataset_writer.h"
#include "data/prepare/options.h"
#include "data/tokenizer/tokenizer.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace pt {

std::string hex64(uint64_t value);

struct MetadataSources {
  const PrepareOptions& options;
  const Tokenizer& tokenizer;
  const ChatTemplateChoice& chat_template;
  int64_t records_read, records_kept;  // kept: contributed at least one example
  const InputIssues& issues;
  const WrittenDataset& written;
};

nlohmann::ordered_json make_metadata(const MetadataSources& sources);

}  // namespace pt
