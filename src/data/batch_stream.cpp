#include "data/batch_stream.h"

#include "core/error.h"

namespace pt {

BatchStream::BatchStream(DatasetSplit split, PackingOptions options, int64_t epoch, int64_t batches_in_epoch)
    : split_(std::move(split)), options_(options), epoch_(epoch) {
  if (split_.size() == 0) fail("the training split has no examples; prepare more data");
  packer_ = make_packer(split_, options_, epoch_);
  for (int64_t i = 0; i < batches_in_epoch; ++i) next();
}

Batch BatchStream::next() {
  for (;;) {
    if (auto batch = packer_->next()) {
      ++batches_in_epoch_;
      return std::move(*batch);
    }
    ++epoch_;
    batches_in_epoch_ = 0;
    packer_ = make_packer(split_, options_, epoch_);
  }
}

}  // namespace pt
