// Training FLOPs of a batch, counting real tokens only (pads do not count), for MFU: 6 per parameter of
// every matrix multiply per token (forward 2, backward 4; a masked-LM head's only per labelled token), plus
// causal attention: for each layer and segment of L real tokens, L(L+1)/2 query-key pairs (fewer in
// sliding-window layers) at 4*H*D FLOPs forward (QK^T and PV), x3 for training.
#pragma once

#include "data/packing/batch.h"
#include "model/config.h"

namespace pt {

double training_flops(const ModelConfig& config, const Batch& batch);

}  // namespace pt
