// The packers behind make_packer, one file each. Options are validated by make_packer before these run.
#pragma once

#include "data/packing/packer.h"

#include <memory>

namespace pt {

std::unique_ptr<Packer> make_padding_packer(const DatasetSplit& split, const PackingOptions& options,
                                            int64_t epoch);
// concat and concat-posid: one stream cut into rows; keep_boundaries restarts attention at examples.
std::unique_ptr<Packer> make_concat_packer(const DatasetSplit& split, const PackingOptions& options,
                                           int64_t epoch, bool keep_boundaries);
std::unique_ptr<Packer> make_flatten_packer(const DatasetSplit& split, const PackingOptions& options,
                                            int64_t epoch);
std::unique_ptr<Packer> make_bfd_packer(const DatasetSplit& split, const PackingOptions& options,
                                        int64_t epoch);

}  // namespace pt
