#include "model/generate.h"

#include "core/error.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace pt {

int32_t sample_token(std::span<const float> logits, const SamplingOptions& o, uint64_t& rng_state) {
  const auto V = static_cast<int32_t>(logits.size());
  if (o.greedy || o.temperature <= 0)
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  // Candidates by decreasing logit; top-k then top-p cut the tail before sampling.
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  if (o.top_k > 0 && o.top_k < V) order.resize(static_cast<size_t>(o.top_k));
  std::vector<double> probs(order.size());
  const double top = logits[order[0]];
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i)
    sum += probs[i] = std::exp((logits[order[i]] - top) / o.temperature);
  size_t keep = order.size();
  if (o.top_p < 1.0) {
    double cumulative = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      cumulative += probs[i] / sum;
      if (cumulative >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  std::mt19937_64 rng(rng_state);
  std::discrete_distribution<size_t> pick(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(keep));
  const int32_t token = order[pick(rng)];
  rng_state = rng();
  return token;
}

std::vector<int32_t> generate(DecoderModel& model, const Tensor& params, std::vector<int32_t> tokens,
                              const SamplingOptions& options, std::optional<int32_t> eos,
                              const std::function<void(int32_t)>& on_token) {
  if (tokens.empty()) fail("generate: the prompt is empty; give at least one token of text");
  if (!model.config().causal)
    fail("generate: a {} model is a masked-LM encoder; it predicts masked tokens, it does not continue text",
         model.config().family);
  uint64_t rng_state = options.seed;
  model.load_weights(params);
  std::vector<float> last(static_cast<size_t>(model.config().vocab_size));
  for (int32_t i = 0; i < options.max_new_tokens; ++i) {
    const auto n = static_cast<int32_t>(tokens.size());
    if (n >= model.max_tokens()) break;
    Batch b;
    b.rows = 1, b.row_len = n;
    b.input_ids = tokens;
    b.labels.assign(tokens.size(), kIgnoreLabel);
    b.position_ids.resize(tokens.size());
    std::iota(b.position_ids.begin(), b.position_ids.end(), 0);
    b.cu_seqlens = {0, n};
    b.max_seqlen = n;
    b.row_real_len = {n};
    b.real_tokens = b.processed_tokens = n;
    model.forward(b, HeadRows::every);
    model.copy_logits_row(n - 1, last);
    const int32_t next = sample_token(last, options, rng_state);
    tokens.push_back(next);
    on_token(next);
    if (eos && next == *eos) break;
  }
  return tokens;
}

}  // namespace pt
