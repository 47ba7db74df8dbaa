// W13. A tiny transformer, whole (Unit 18, section 13; NEXT_SECTIONS.md).
// One block, two heads, d_model = 8, a vocabulary of five symbols (a, b, c, d and the mark |),
// trained on a task it makes for itself: reverse. Each sentence is four random symbols, the mark,
// and the four backwards ("cadb|bdac"); the model reads it left to right (causal) and guesses
// every next symbol at once. The first symbols are pure chance, so only the guesses that can be
// known count (the mark after the fourth symbol, then the reversal): the loss starts near
// ln 5 = 1.609 and must fall below 0.01 — which only attention can do, since the answer sits
// 2, 4, 6 and 8 places back.
//
// Before training, every gradient of the model is checked by finite differences; the training
// runs twice from the same seed and the two loss curves must agree bit for bit; at the end the
// model reverses sentences it has never seen, decoding greedily one symbol at a time with its
// key/value cache. The program fails (exit 1) when any of these does not hold.
//
//   tiny_transformer [--log FILE]
//
// --log FILE writes the training's loss curve as CSV (step,loss: a row per step, full
// precision), which `attn-calc --loss-curve FILE --vocabulary 5 --format svg` draws.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "attn/cross_entropy.hpp"
#include "attn/gradcheck.hpp"
#include "attn/model.hpp"
#include "attn/optimizer.hpp"
#include "attn/sampling.hpp"
#include "unit_check.hpp"

namespace {

constexpr std::size_t symbols = 4, mark = 4, vocabulary = 5, half = 4, length = 2 * half + 1;
constexpr std::size_t batch = 32, max_steps = 3000;
constexpr double threshold = 0.01;
const char* const names = "abcd|";

const attn::model_config config{.family = attn::model_family::decoder, .vocabulary = vocabulary, .d_model = 8,
                                .layers = 1, .heads = 2, .d_ff = 32, .max_positions = length - 1,
                                .positions = attn::position_encoding::learned,
                                .placement = attn::norm_placement::pre, .final_norm = true};

// A batch of sentences from the generator: inputs (the first 8 symbols) and targets (the next
// symbol at each position; the first three are chance: ignored).
struct task_batch {
  std::vector<std::int64_t> inputs, targets;
};

task_batch make_batch(attn::random_generator& gen, std::size_t sentences) {
  task_batch b;
  for (std::size_t s = 0; s < sentences; ++s) {
    std::int64_t sentence[length];
    for (std::size_t i = 0; i < half; ++i) sentence[i] = static_cast<std::int64_t>(gen.next() % symbols);
    sentence[half] = mark;
    for (std::size_t i = 0; i < half; ++i) sentence[half + 1 + i] = sentence[half - 1 - i];
    for (std::size_t t = 0; t + 1 < length; ++t) {
      b.inputs.push_back(sentence[t]);
      b.targets.push_back(t + 1 < half ? attn::cross_entropy_options{}.ignore_index : sentence[t + 1]);
    }
  }
  return b;
}

// The loss of the model over a batch, and (when grads is given) every parameter's gradient.
double loss_and_gradients(const attn::model_parameters<double>& p, const task_batch& b, attn::model_cache<double>& cache,
                          attn::Matrix<double>& logits, const attn::model_parameters<double>* grads) {
  const attn::model_input in{.tokens = b.inputs, .batch = b.inputs.size() / (length - 1)};
  attn::model_forward(p, in, logits, cache);
  if (grads == nullptr) return attn::cross_entropy(logits, b.targets);
  const double loss = attn::cross_entropy_backward(logits, b.targets, logits);  // dL/dlogits in place
  attn::model_backward(p, in, cache, logits, *grads);
  return loss;
}

// Trains from `seed`; returns the loss after every step.
std::vector<double> train(std::vector<double>& weights, std::uint64_t seed, bool verbose) {
  std::vector<double> grad_buffer(weights.size()), m(weights.size()), v(weights.size());
  const attn::model_parameters<double> p = attn::bind_parameters<double>(config, std::span<double>(weights));
  const attn::model_parameters<double> g = attn::bind_parameters<double>(config, std::span<double>(grad_buffer));
  attn::initialize(p, seed);
  // two groups, as nanoGPT: the matrices decayed, the vectors (biases, norms) not
  const std::size_t decayed = attn::decayed_count(config);
  const auto part = [&](std::vector<double>& x, bool first) {
    return first ? std::span<double>(x).first(decayed) : std::span<double>(x).subspan(decayed);
  };
  attn::adamw_state<double> state_decayed{part(m, true), part(v, true)}, state_rest{part(m, false), part(v, false)};
  const attn::adamw_options decay{.lr = 1e-2, .weight_decay = 1e-2}, no_decay{.lr = 1e-2, .weight_decay = 0};
  attn::random_generator data(seed + 1);
  attn::model_cache<double> cache;
  attn::Matrix<double> logits(batch * (length - 1), vocabulary);
  std::vector<double> curve;
  for (std::size_t step = 0; step < max_steps; ++step) {
    const task_batch b = make_batch(data, batch);
    const double loss = loss_and_gradients(p, b, cache, logits, &g);
    curve.push_back(loss);
    attn::adamw_step(part(weights, true), part(grad_buffer, true), state_decayed, decay);
    attn::adamw_step(part(weights, false), part(grad_buffer, false), state_rest, no_decay);
    if (verbose && (step % 100 == 0)) std::printf("  step %4zu   loss %.4f\n", step, loss);
    if (loss < threshold / 2) break;  // (well below the bar: the rest would only polish)
  }
  return curve;
}

}  // namespace

int main(int argc, char** argv) {
  std::FILE* log = nullptr;  // --log FILE: opened first, so that a bad path fails before training
  if (argc == 3 && std::strcmp(argv[1], "--log") == 0) {
    log = std::fopen(argv[2], "wb");
    if (log == nullptr) {
      std::fprintf(stderr, "tiny_transformer: cannot write %s\n", argv[2]);
      return 2;
    }
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: tiny_transformer [--log FILE]\n  --log FILE  the loss at every training step, as CSV "
                         "(step,loss)\n");
    return 2;
  }
  unit::checker check;
  std::printf("W13. A tiny transformer, whole: reverse \"abcd|\" sentences (%zu parameters)\n\n",
              attn::parameter_count(config));

  // 1. Every gradient against central differences, at the initialisation.
  {
    std::vector<double> weights(attn::parameter_count(config)), grads(weights.size());
    const attn::model_parameters<double> p = attn::bind_parameters<double>(config, std::span<double>(weights));
    attn::initialize(p, 7);
    attn::random_generator data(8);
    const task_batch b = make_batch(data, 4);
    attn::model_cache<double> cache;
    attn::Matrix<double> logits(b.inputs.size(), vocabulary);
    const attn::model_parameters<double> g = attn::bind_parameters<double>(config, std::span<double>(grads));
    const double loss = loss_and_gradients(p, b, cache, logits, &g);
    std::printf("1. Every gradient against central differences (loss %.4f at the start, ln 5 = %.4f)\n", loss,
                std::log(5.0));
    double worst = 0;
    std::size_t tensors = 0;
    for (const attn::model_tensor& t : attn::model_tensors(config)) {
      const std::size_t n = t.rows * t.cols;
      const auto f = [&](std::span<const double> x) {
        std::vector<double> moved = weights;
        std::copy(x.begin(), x.end(), moved.begin() + static_cast<std::ptrdiff_t>(t.offset));
        attn::model_cache<double> c2;
        attn::Matrix<double> l2(b.inputs.size(), vocabulary);
        return std::vector<double>{
            loss_and_gradients(attn::bind_parameters<double>(config, std::span<double>(moved)), b, c2, l2, nullptr)};
      };
      const std::vector<double> one{1.0};
      const auto report = attn::check_vjp(f, std::span<const double>(weights.data() + t.offset, n), one,
                                          std::span<const double>(grads.data() + t.offset, n), t.name);
      worst = std::max(worst, static_cast<double>(report.max_rel_error));
      check.claim(report.passed(attn::gradcheck_tolerance<double>()), "dL/d" + t.name + " matches central differences");
      ++tensors;
    }
    std::printf("   %zu tensors, the largest relative error %.1e (tolerance %.0e)\n\n", tensors, worst,
                attn::gradcheck_tolerance<double>());
    check.claim(std::abs(loss - std::log(5.0)) < 0.3, "the loss starts near ln 5");
  }

  // 2. Training, twice from the same seed.
  std::printf("2. Training: AdamW (lr 0.01), %zu sentences a step\n", batch);
  std::vector<double> weights(attn::parameter_count(config)), again(weights.size());
  const auto start = std::chrono::steady_clock::now();
  const std::vector<double> curve = train(weights, 2026, true);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  step %4zu   loss %.4f   (%.2f s on one core)\n\n", curve.size() - 1, curve.back(), seconds);
  check.claim(curve.back() < threshold, "the loss falls below 0.01");
  const std::vector<double> curve_again = train(again, 2026, false);
  check.claim(curve == curve_again && weights == again, "the same seed gives the same loss curve, bit for bit");
  std::printf("   trained again from the same seed: %s\n\n",
              curve == curve_again ? "the same loss curve, bit for bit" : "A DIFFERENT CURVE");
  if (log != nullptr) {  // %.17g: every double read back exactly
    bool ok = std::fputs("step,loss\n", log) >= 0;
    for (std::size_t step = 0; step < curve.size(); ++step) ok = ok && std::fprintf(log, "%zu,%.17g\n", step, curve[step]) > 0;
    ok = std::fclose(log) == 0 && ok;
    check.claim(ok, "the log is written");
    std::printf("   the loss curve (%zu steps) went to %s\n\n", curve.size(), argv[2]);
  }

  // 3. Copying unseen sentences: greedy decoding with the cache, one symbol at a time.
  std::printf("3. Greedy decoding with the key/value cache on sentences it has not seen\n");
  const attn::model_parameters<double> p = attn::bind_parameters<double>(config, std::span<double>(weights));
  attn::random_generator fresh(99);
  std::size_t right = 0;
  const std::size_t trials = 20;
  for (std::size_t s = 0; s < trials; ++s) {
    std::vector<std::int64_t> prompt(half + 1);
    for (std::size_t i = 0; i < half; ++i) prompt[i] = static_cast<std::int64_t>(fresh.next() % symbols);
    prompt[half] = mark;
    attn::model_kv_cache<double> kv(config, 1, length - 1);
    attn::Matrix<double> logits(prompt.size(), vocabulary), last(1, vocabulary);
    attn::model_step(p, prompt, kv, logits);  // the prompt at once
    std::vector<std::int64_t> out;
    std::int64_t next = static_cast<std::int64_t>(attn::greedy(logits.row(prompt.size() - 1)));
    for (std::size_t i = 0; i < half; ++i) {
      out.push_back(next);
      if (i + 1 == half) break;
      attn::model_step(p, std::span<const std::int64_t>(&next, 1), kv, last);  // one symbol: O(n·d)
      next = static_cast<std::int64_t>(attn::greedy(last.row(0)));
    }
    const bool reversed = std::equal(out.begin(), out.end(), prompt.rend() - static_cast<std::ptrdiff_t>(half));
    right += reversed ? 1 : 0;
    if (s < 5) {
      std::string text;
      for (const std::int64_t x : prompt) text += names[x];
      text += " → ";
      for (const std::int64_t x : out) text += names[x];
      std::printf("   %s %s\n", text.c_str(), reversed ? "" : "(wrong)");
    }
  }
  std::printf("   %zu of %zu reversed exactly\n", right, trials);
  check.claim(right == trials, "every unseen sentence is reversed");
  return check.finish();
}
