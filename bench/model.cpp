// The tiny transformer, whole (attn/model.hpp), one thread, float, in one run
// (docs/performance.md, "The tiny transformer"):
//
//   train_step/f32/attn/<V>x<d>x<L>x<h>x<T>     one training step of a GPT-2-style decoder, B = 4
//                                               sentences of T tokens: model_forward,
//                                               cross_entropy_backward, model_backward, adamw_step
//                                               (two groups: matrices decayed, vectors not)
//   train_step/f32/llmc/…                       the same model and step written as plainly as
//                                               llm.c's train_gpt2.c writes it (below): naive
//                                               matmul loops, attention with stored pre-softmax
//                                               and softmax maps and the explicit-Jacobian softmax
//                                               backward, layernorm and GELU loops, AdamW
//   train_phase/f32/attn_<phase>/…              each phase of attn's step alone: forward,
//                                               cross_entropy, backward, adamw (both groups)
//   train_phase/f32/llmc_<phase>/…              llm.c's: forward (with its softmax and loss),
//                                               backward (with its zero_grad), adamw
//   decode_step/f32/attn_cached/…               one decoding step with model_kv_cache: B = 1, the
//                                               cache holding T − 1 positions, one new token
//   decode_step/f32/attn_uncached/…             what that step costs without a cache: the forward
//                                               over all T positions (B = 1)
//
// The model (GPT-2's arrangement, as llm.c's GPT-2): causal, learned positions, pre-LN blocks
// with a final norm, GELU's tanh form, d_ff = 4·d_model, biases, the output tied to the token
// embedding, LayerNorm ε = 1e-5. Sizes (V, d_model, layers, heads, T) = (64, 64, 2, 4, 64) and
// (512, 256, 4, 8, 256).
//
// Before any timing, main() runs one forward and backward of both on the same parameters and
// tokens and checks that the loss and every parameter's gradient agree to float rounding (the
// tolerance is derived at `check_agreement`); it exits 1 otherwise, since a ratio of two
// different computations means nothing. All wall time (UseRealTime).

#include <attn/cross_entropy.hpp>
#include <attn/model.hpp>
#include <attn/optimizer.hpp>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "common.hpp"

namespace {

constexpr std::size_t batch = 4;  // B, the training step's sentences

struct size5 {
  std::size_t V, d, L, h, T;
};

std::string size_name(const char* kernel, const char* impl, size5 s) {
  char name[128];  // (snprintf: GCC 12 at -O3 reports a false -Wrestrict in std::string's +)
  std::snprintf(name, sizeof name, "%s/f32/%s/%zux%zux%zux%zux%zu", kernel, impl, s.V, s.d, s.L, s.h, s.T);
  return name;
}

attn::model_config config_of(size5 s) {
  return {.family = attn::model_family::decoder, .vocabulary = s.V, .d_model = s.d, .layers = s.L, .heads = s.h,
          .d_ff = 4 * s.d, .max_positions = s.T, .positions = attn::position_encoding::learned,
          .act = attn::activation::gelu_tanh, .placement = attn::norm_placement::pre, .norm_eps = 1e-5,
          .final_norm = true, .tied = true, .biases = true};
}

/// n tokens in [0, V), the same for the same seed.
std::vector<std::int64_t> tokens_of(std::size_t n, std::size_t V, std::uint64_t seed) {
  bench::rng g(seed);
  std::vector<std::int64_t> t(n);
  for (auto& x : t) x = static_cast<std::int64_t>(g.next() % V);
  return t;
}

// AdamW's hyper-parameters, both implementations: nanoGPT's two groups (decay on the matrices).
constexpr double lr = 1e-4, beta1 = 0.9, beta2 = 0.999, adam_eps = 1e-8, decay = 0.1;

// ---------------------------------------------------------------------------------------------
// attn

struct attn_trainer {
  attn::model_config c;
  std::size_t n_decayed;
  bench::buffer<float> w, g, m, v;
  attn::model_parameters<float> params, grads;
  attn::model_cache<float> cache;
  attn::Matrix<float> logits;
  std::vector<std::int64_t> inputs, targets;
  attn::adamw_state<float> s1, s2;

  explicit attn_trainer(size5 s)
      : c(config_of(s)), n_decayed(attn::decayed_count(c)), w(attn::parameter_count(c)), g(w.size()), m(w.size()),
        v(w.size()), params(attn::bind_parameters<float>(c, std::span<float>(w))),
        grads(attn::bind_parameters<float>(c, std::span<float>(g))), logits(batch * s.T, s.V),
        inputs(tokens_of(batch * s.T, s.V, 7)), targets(tokens_of(batch * s.T, s.V, 8)) {
    attn::initialize(params, 1);
    s1 = {std::span<float>(m).first(n_decayed), std::span<float>(v).first(n_decayed)};
    s2 = {std::span<float>(m).subspan(n_decayed), std::span<float>(v).subspan(n_decayed)};
  }
  float forward_backward() {
    attn::model_forward(params, {.tokens = inputs, .batch = batch}, logits, cache);
    const float loss = attn::cross_entropy_backward(logits, targets, logits);  // ∂L/∂logits, in place
    attn::model_backward(params, {.tokens = inputs, .batch = batch}, cache, logits, grads);
    return loss;
  }
  float step() {
    const float loss = forward_backward();
    attn::adamw_step(std::span<float>(w).first(n_decayed), std::span<const float>(g).first(n_decayed), s1,
                     {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = adam_eps, .weight_decay = decay});
    attn::adamw_step(std::span<float>(w).subspan(n_decayed), std::span<const float>(g).subspan(n_decayed), s2,
                     {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = adam_eps, .weight_decay = 0});
    return loss;
  }
};

// ---------------------------------------------------------------------------------------------
// llmc: the same model and step as llm.c's train_gpt2.c writes them (its layout: every weight
// OC × C, the rows of a product's output; Q, K and V in one 3C × C matrix; its loops, one
// thread). Written here in its style, not copied. B = batch, T = positions, C = d_model,
// NH = heads, V = vocabulary.

void encoder_forward(float* out, const int* inp, const float* wte, const float* wpe, std::size_t B, std::size_t T,
                     std::size_t C) {
  for (std::size_t b = 0; b < B; b++)
    for (std::size_t t = 0; t < T; t++) {
      float* o = out + (b * T + t) * C;
      const float* e = wte + static_cast<std::size_t>(inp[b * T + t]) * C;
      const float* p = wpe + t * C;
      for (std::size_t i = 0; i < C; i++) o[i] = e[i] + p[i];
    }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp, std::size_t B, std::size_t T,
                      std::size_t C) {
  for (std::size_t b = 0; b < B; b++)
    for (std::size_t t = 0; t < T; t++) {
      const float* d = dout + (b * T + t) * C;
      float* de = dwte + static_cast<std::size_t>(inp[b * T + t]) * C;
      float* dp = dwpe + t * C;
      for (std::size_t i = 0; i < C; i++) {
        de[i] += d[i];
        dp[i] += d[i];
      }
    }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, std::size_t N, std::size_t C) {
  const float eps = 1e-5f;
  for (std::size_t r = 0; r < N; r++) {
    const float* x = inp + r * C;
    float m = 0.0f;
    for (std::size_t i = 0; i < C; i++) m += x[i];
    m = m / static_cast<float>(C);
    float var = 0.0f;
    for (std::size_t i = 0; i < C; i++) {
      const float dx = x[i] - m;
      var += dx * dx;
    }
    var = var / static_cast<float>(C);
    const float s = 1.0f / std::sqrt(var + eps);
    float* o = out + r * C;
    for (std::size_t i = 0; i < C; i++) o[i] = (s * (x[i] - m)) * weight[i] + bias[i];
    mean[r] = m;
    rstd[r] = s;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, std::size_t N, std::size_t C) {
  for (std::size_t r = 0; r < N; r++) {
    const float* d = dout + r * C;
    const float* x = inp + r * C;
    float* dx = dinp + r * C;
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (std::size_t i = 0; i < C; i++) {
      const float n = (x[i] - mean[r]) * rstd[r];
      const float dn = weight[i] * d[i];
      dnorm_mean += dn;
      dnorm_norm_mean += dn * n;
    }
    dnorm_mean /= static_cast<float>(C);
    dnorm_norm_mean /= static_cast<float>(C);
    for (std::size_t i = 0; i < C; i++) {
      const float n = (x[i] - mean[r]) * rstd[r];
      const float dn = weight[i] * d[i];
      dbias[i] += d[i];
      dweight[i] += n * d[i];
      dx[i] += (dn - dnorm_mean - n * dnorm_norm_mean) * rstd[r];
    }
  }
}

// out (N × OC) = inp (N × C) · weightᵀ (weight OC × C) + bias: llm.c's naive triple loop, a dot
// product per output
void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, std::size_t N,
                    std::size_t C, std::size_t OC) {
  for (std::size_t r = 0; r < N; r++) {
    const float* x = inp + r * C;
    for (std::size_t o = 0; o < OC; o++) {
      float val = bias != nullptr ? bias[o] : 0.0f;
      const float* wrow = weight + o * C;
      for (std::size_t i = 0; i < C; i++) val += x[i] * wrow[i];
      out[r * OC + o] = val;
    }
  }
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, std::size_t N, std::size_t C, std::size_t OC) {
  for (std::size_t r = 0; r < N; r++) {
    const float* d = dout + r * OC;
    float* dx = dinp + r * C;
    for (std::size_t o = 0; o < OC; o++) {
      const float* wrow = weight + o * C;
      const float dd = d[o];
      for (std::size_t i = 0; i < C; i++) dx[i] += wrow[i] * dd;
    }
  }
  for (std::size_t o = 0; o < OC; o++) {
    float* dwrow = dweight + o * C;
    for (std::size_t r = 0; r < N; r++) {
      const float dd = dout[r * OC + o];
      const float* x = inp + r * C;
      if (dbias != nullptr) dbias[o] += dd;
      for (std::size_t i = 0; i < C; i++) dwrow[i] += x[i] * dd;
    }
  }
}

// inp (B, T, 3C) holds Q, K, V; preatt and att (B, NH, T, T) are kept for the backward
void attention_forward(float* out, float* preatt, float* att, const float* inp, std::size_t B, std::size_t T,
                       std::size_t C, std::size_t NH) {
  const std::size_t C3 = 3 * C, hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (std::size_t b = 0; b < B; b++)
    for (std::size_t t = 0; t < T; t++)
      for (std::size_t h = 0; h < NH; h++) {
        const float* q = inp + (b * T + t) * C3 + h * hs;
        float* pre = preatt + ((b * NH + h) * T + t) * T;
        float* a = att + ((b * NH + h) * T + t) * T;
        float maxval = -10000.0f;
        for (std::size_t t2 = 0; t2 <= t; t2++) {
          const float* k = inp + (b * T + t2) * C3 + h * hs + C;
          float val = 0.0f;
          for (std::size_t i = 0; i < hs; i++) val += q[i] * k[i];
          val *= scale;
          if (val > maxval) maxval = val;
          pre[t2] = val;
        }
        float expsum = 0.0f;
        for (std::size_t t2 = 0; t2 <= t; t2++) {
          const float e = std::exp(pre[t2] - maxval);
          expsum += e;
          a[t2] = e;
        }
        const float inv = expsum == 0.0f ? 0.0f : 1.0f / expsum;
        for (std::size_t t2 = 0; t2 < T; t2++) a[t2] = t2 <= t ? a[t2] * inv : 0.0f;
        float* o = out + (b * T + t) * C + h * hs;
        for (std::size_t i = 0; i < hs; i++) o[i] = 0.0f;
        for (std::size_t t2 = 0; t2 <= t; t2++) {
          const float* v = inp + (b * T + t2) * C3 + h * hs + 2 * C;
          for (std::size_t i = 0; i < hs; i++) o[i] += a[t2] * v[i];
        }
      }
}

// the softmax's backward through its explicit Jacobian, ∂a_{t2}/∂s_{t3} = a_{t2}(δ − a_{t3}):
// O(T²) per row, O(T³) per head
void attention_backward(float* dinp, float* dpreatt, float* datt, const float* dout, const float* inp,
                        const float* att, std::size_t B, std::size_t T, std::size_t C, std::size_t NH) {
  const std::size_t C3 = 3 * C, hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  for (std::size_t b = 0; b < B; b++)
    for (std::size_t t = 0; t < T; t++)
      for (std::size_t h = 0; h < NH; h++) {
        const float* a = att + ((b * NH + h) * T + t) * T;
        float* da = datt + ((b * NH + h) * T + t) * T;
        float* dpre = dpreatt + ((b * NH + h) * T + t) * T;
        const float* q = inp + (b * T + t) * C3 + h * hs;
        float* dq = dinp + (b * T + t) * C3 + h * hs;
        const float* d = dout + (b * T + t) * C + h * hs;
        for (std::size_t t2 = 0; t2 <= t; t2++) {
          const float* v = inp + (b * T + t2) * C3 + h * hs + 2 * C;
          float* dv = dinp + (b * T + t2) * C3 + h * hs + 2 * C;
          for (std::size_t i = 0; i < hs; i++) {
            da[t2] += v[i] * d[i];
            dv[i] += a[t2] * d[i];
          }
        }
        for (std::size_t t2 = 0; t2 <= t; t2++)
          for (std::size_t t3 = 0; t3 <= t; t3++) {
            const float indicator = t2 == t3 ? 1.0f : 0.0f;
            dpre[t3] += a[t2] * (indicator - a[t3]) * da[t2];
          }
        for (std::size_t t2 = 0; t2 <= t; t2++) {
          const float* k = inp + (b * T + t2) * C3 + h * hs + C;
          float* dk = dinp + (b * T + t2) * C3 + h * hs + C;
          for (std::size_t i = 0; i < hs; i++) {
            dq[i] += k[i] * dpre[t2] * scale;
            dk[i] += q[i] * dpre[t2] * scale;
          }
        }
      }
}

const float gelu_scaling = std::sqrt(2.0f / 3.14159265358979323846f);

void gelu_forward(float* out, const float* inp, std::size_t N) {
  for (std::size_t i = 0; i < N; i++) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(gelu_scaling * (x + 0.044715f * x * x * x)));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t N) {
  for (std::size_t i = 0; i < N; i++) {
    const float x = inp[i];
    const float u = gelu_scaling * (x + 0.044715f * x * x * x);
    const float th = std::tanh(u), ch = std::cosh(u);
    const float local = 0.5f * (1.0f + th) + x * 0.5f * (1.0f / (ch * ch)) * gelu_scaling * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] += local * dout[i];
  }
}

void residual_forward(float* out, const float* a, const float* b, std::size_t N) {
  for (std::size_t i = 0; i < N; i++) out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, std::size_t N) {
  for (std::size_t i = 0; i < N; i++) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

void softmax_forward(float* probs, const float* logits, std::size_t N, std::size_t V) {
  for (std::size_t r = 0; r < N; r++) {
    const float* z = logits + r * V;
    float* p = probs + r * V;
    float maxval = -10000.0f;
    for (std::size_t i = 0; i < V; i++) maxval = std::max(maxval, z[i]);
    float sum = 0.0f;
    for (std::size_t i = 0; i < V; i++) {
      p[i] = std::exp(z[i] - maxval);
      sum += p[i];
    }
    for (std::size_t i = 0; i < V; i++) p[i] /= sum;
  }
}

void crossentropy_forward(float* losses, const float* probs, const int* targets, std::size_t N, std::size_t V) {
  for (std::size_t r = 0; r < N; r++) losses[r] = -std::log(probs[r * V + static_cast<std::size_t>(targets[r])]);
}

void crossentropy_softmax_backward(float* dlogits, const float* probs, const int* targets, float dloss,
                                   std::size_t N, std::size_t V) {
  for (std::size_t r = 0; r < N; r++)
    for (std::size_t i = 0; i < V; i++) {
      const float indicator = i == static_cast<std::size_t>(targets[r]) ? 1.0f : 0.0f;
      dlogits[r * V + i] += (probs[r * V + i] - indicator) * dloss;
    }
}

/// The model in llm.c's layout: ParameterTensors and ActivationTensors as offsets into one
/// allocation each, gradients of both, AdamW's m and v.
struct llmc_model {
  std::size_t V, C, L, NH, T, B;
  // parameters (llm.c's order)
  enum { wte, wpe, ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb, lnfw, lnfb,
         n_params };
  std::size_t psize[n_params]{}, poff[n_params]{};
  bench::buffer<float> params, grads, m, v;
  // activations
  enum { encoded, ln1, ln1_mean, ln1_rstd, qkv, atty, preatt, att, attproj, residual2, ln2, ln2_mean, ln2_rstd, fch,
         fch_gelu, fcproj, residual3, lnf, lnf_mean, lnf_rstd, logits, probs, losses, n_acts };
  std::size_t asize[n_acts]{}, aoff[n_acts]{};
  bench::buffer<float> acts, grad_acts;
  std::vector<int> inputs, targets;
  std::uint64_t t_step = 0;

  llmc_model(size5 s, std::size_t b) : V(s.V), C(s.d), L(s.L), NH(s.h), T(s.T), B(b) {
    const std::size_t sizes[n_params] = {V * C, T * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
                                         L * C, L * C, L * 4 * C * C, L * 4 * C, L * C * 4 * C, L * C, C, C};
    std::size_t at = 0;
    for (int k = 0; k < n_params; ++k) psize[k] = sizes[k], poff[k] = at, at += sizes[k];
    params.assign(at, 0.0f);
    grads.assign(at, 0.0f);
    m.assign(at, 0.0f);
    v.assign(at, 0.0f);
    const std::size_t N = B * T;
    const std::size_t asz[n_acts] = {N * C, L * N * C, L * N, L * N, L * N * 3 * C, L * N * C, L * B * NH * T * T,
                                     L * B * NH * T * T, L * N * C, L * N * C, L * N * C, L * N, L * N,
                                     L * N * 4 * C, L * N * 4 * C, L * N * C, L * N * C, N * C, N, N, N * V,
                                     N * V, N};
    at = 0;
    for (int k = 0; k < n_acts; ++k) asize[k] = asz[k], aoff[k] = at, at += asz[k];
    acts.assign(at, 0.0f);
    grad_acts.assign(at, 0.0f);
  }
  float* P(int k) { return params.data() + poff[k]; }
  float* G(int k) { return grads.data() + poff[k]; }
  float* A(int k) { return acts.data() + aoff[k]; }
  float* D(int k) { return grad_acts.data() + aoff[k]; }

  float forward() {
    const std::size_t N = B * T;
    encoder_forward(A(encoded), inputs.data(), P(wte), P(wpe), B, T, C);
    for (std::size_t l = 0; l < L; l++) {
      const float* residual = l == 0 ? A(encoded) : A(residual3) + (l - 1) * N * C;
      float* l_ln1 = A(ln1) + l * N * C;
      float* l_qkv = A(qkv) + l * N * 3 * C;
      float* l_atty = A(atty) + l * N * C;
      float* l_attproj = A(attproj) + l * N * C;
      float* l_residual2 = A(residual2) + l * N * C;
      float* l_ln2 = A(ln2) + l * N * C;
      float* l_fch = A(fch) + l * N * 4 * C;
      float* l_fch_gelu = A(fch_gelu) + l * N * 4 * C;
      float* l_fcproj = A(fcproj) + l * N * C;
      float* l_residual3 = A(residual3) + l * N * C;
      layernorm_forward(l_ln1, A(ln1_mean) + l * N, A(ln1_rstd) + l * N, residual, P(ln1w) + l * C,
                        P(ln1b) + l * C, N, C);
      matmul_forward(l_qkv, l_ln1, P(qkvw) + l * 3 * C * C, P(qkvb) + l * 3 * C, N, C, 3 * C);
      attention_forward(l_atty, A(preatt) + l * B * NH * T * T, A(att) + l * B * NH * T * T, l_qkv, B, T, C, NH);
      matmul_forward(l_attproj, l_atty, P(attprojw) + l * C * C, P(attprojb) + l * C, N, C, C);
      residual_forward(l_residual2, residual, l_attproj, N * C);
      layernorm_forward(l_ln2, A(ln2_mean) + l * N, A(ln2_rstd) + l * N, l_residual2, P(ln2w) + l * C,
                        P(ln2b) + l * C, N, C);
      matmul_forward(l_fch, l_ln2, P(fcw) + l * 4 * C * C, P(fcb) + l * 4 * C, N, C, 4 * C);
      gelu_forward(l_fch_gelu, l_fch, N * 4 * C);
      matmul_forward(l_fcproj, l_fch_gelu, P(fcprojw) + l * C * 4 * C, P(fcprojb) + l * C, N, 4 * C, C);
      residual_forward(l_residual3, l_residual2, l_fcproj, N * C);
    }
    layernorm_forward(A(lnf), A(lnf_mean), A(lnf_rstd), A(residual3) + (L - 1) * N * C, P(lnfw), P(lnfb), N, C);
    matmul_forward(A(logits), A(lnf), P(wte), nullptr, N, C, V);
    softmax_forward(A(probs), A(logits), N, V);
    crossentropy_forward(A(losses), A(probs), targets.data(), N, V);
    float mean_loss = 0.0f;
    for (std::size_t r = 0; r < N; r++) mean_loss += A(losses)[r];
    return mean_loss / static_cast<float>(N);
  }

  void zero_grad() {
    std::fill(grads.begin(), grads.end(), 0.0f);
    std::fill(grad_acts.begin(), grad_acts.end(), 0.0f);
  }

  void backward() {
    const std::size_t N = B * T;
    crossentropy_softmax_backward(D(logits), A(probs), targets.data(), 1.0f / static_cast<float>(N), N, V);
    matmul_backward(D(lnf), G(wte), nullptr, D(logits), A(lnf), P(wte), N, C, V);
    const float* last = A(residual3) + (L - 1) * N * C;
    float* dlast = D(residual3) + (L - 1) * N * C;
    layernorm_backward(dlast, G(lnfw), G(lnfb), D(lnf), last, P(lnfw), A(lnf_mean), A(lnf_rstd), N, C);
    for (std::size_t l = L; l-- > 0;) {
      const float* residual = l == 0 ? A(encoded) : A(residual3) + (l - 1) * N * C;
      float* dresidual = l == 0 ? D(encoded) : D(residual3) + (l - 1) * N * C;
      const std::size_t a_off = l * N * C, h_off = l * N * 4 * C, att_off = l * B * NH * T * T;
      float* dl_residual3 = D(residual3) + a_off;
      float* dl_residual2 = D(residual2) + a_off;
      residual_backward(dl_residual2, D(fcproj) + a_off, dl_residual3, N * C);
      matmul_backward(D(fch_gelu) + h_off, G(fcprojw) + l * C * 4 * C, G(fcprojb) + l * C, D(fcproj) + a_off,
                      A(fch_gelu) + h_off, P(fcprojw) + l * C * 4 * C, N, 4 * C, C);
      gelu_backward(D(fch) + h_off, A(fch) + h_off, D(fch_gelu) + h_off, N * 4 * C);
      matmul_backward(D(ln2) + a_off, G(fcw) + l * 4 * C * C, G(fcb) + l * 4 * C, D(fch) + h_off, A(ln2) + a_off,
                      P(fcw) + l * 4 * C * C, N, C, 4 * C);
      layernorm_backward(dl_residual2, G(ln2w) + l * C, G(ln2b) + l * C, D(ln2) + a_off, A(residual2) + a_off,
                         P(ln2w) + l * C, A(ln2_mean) + l * N, A(ln2_rstd) + l * N, N, C);
      residual_backward(dresidual, D(attproj) + a_off, dl_residual2, N * C);
      matmul_backward(D(atty) + a_off, G(attprojw) + l * C * C, G(attprojb) + l * C, D(attproj) + a_off,
                      A(atty) + a_off, P(attprojw) + l * C * C, N, C, C);
      attention_backward(D(qkv) + l * N * 3 * C, D(preatt) + att_off, D(att) + att_off, D(atty) + a_off,
                         A(qkv) + l * N * 3 * C, A(att) + att_off, B, T, C, NH);
      matmul_backward(D(ln1) + a_off, G(qkvw) + l * 3 * C * C, G(qkvb) + l * 3 * C, D(qkv) + l * N * 3 * C,
                      A(ln1) + a_off, P(qkvw) + l * 3 * C * C, N, C, 3 * C);
      layernorm_backward(dresidual, G(ln1w) + l * C, G(ln1b) + l * C, D(ln1) + a_off, residual, P(ln1w) + l * C,
                         A(ln1_mean) + l * N, A(ln1_rstd) + l * N, N, C);
    }
    encoder_backward(G(wte), G(wpe), D(encoded), inputs.data(), B, T, C);
  }

  // llm.c's AdamW loop, with nanoGPT's groups: decay on the matrices (the embeddings and the
  // weights), none on the biases and the norms
  void update() {
    t_step++;
    const float b1 = static_cast<float>(beta1), b2 = static_cast<float>(beta2);
    const float b1c = 1.0f - std::pow(b1, static_cast<float>(t_step));
    const float b2c = 1.0f - std::pow(b2, static_cast<float>(t_step));
    for (int k = 0; k < n_params; ++k) {
      const bool matrix = k == wte || k == wpe || k == qkvw || k == attprojw || k == fcw || k == fcprojw;
      const float wd = matrix ? static_cast<float>(decay) : 0.0f, lrf = static_cast<float>(lr),
                  epsf = static_cast<float>(adam_eps);
      float* p = P(k);
      const float* g = G(k);
      float* mk = m.data() + poff[k];
      float* vk = v.data() + poff[k];
      for (std::size_t i = 0; i < psize[k]; i++) {
        const float mm = b1 * mk[i] + (1.0f - b1) * g[i];
        const float vv = b2 * vk[i] + (1.0f - b2) * g[i] * g[i];
        const float m_hat = mm / b1c, v_hat = vv / b2c;
        mk[i] = mm;
        vk[i] = vv;
        p[i] -= lrf * (m_hat / (std::sqrt(v_hat) + epsf) + wd * p[i]);
      }
    }
  }

  float step() {
    const float loss = forward();
    zero_grad();
    backward();
    update();
    return loss;
  }
};

// The map between the two layouts: attn's W (d_in × d_out, x W) is llm.c's weightᵀ (OC × C).
// `f(attn_value, llmc_value)` for every number of every parameter, with W_Q, W_K, W_V the
// three blocks of rows of qkvw.
template <class F>
void for_each_pair(const attn::model_parameters<float>& a, llmc_model& b, bool grads, F&& f) {
  const std::size_t C = b.C, L = b.L, V = b.V, T = b.T;
  auto at = [&](int k) { return grads ? b.G(k) : b.P(k); };
  for (std::size_t t = 0; t < V; ++t)
    for (std::size_t i = 0; i < C; ++i) f(a.token_embedding(t, i), at(llmc_model::wte)[t * C + i]);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t i = 0; i < C; ++i) f(a.position_table(t, i), at(llmc_model::wpe)[t * C + i]);
  for (std::size_t l = 0; l < L; ++l) {
    const auto& blk = a.decoder[l];
    const attn::StridedMatrixView<float> Ws[3] = {blk.attention.W_Q, blk.attention.W_K, blk.attention.W_V};
    const std::span<float> bs[3] = {blk.attention.b_Q, blk.attention.b_K, blk.attention.b_V};
    for (std::size_t k = 0; k < 3; ++k)
      for (std::size_t o = 0; o < C; ++o) {
        for (std::size_t i = 0; i < C; ++i) f(Ws[k](i, o), at(llmc_model::qkvw)[l * 3 * C * C + (k * C + o) * C + i]);
        f(bs[k][o], at(llmc_model::qkvb)[l * 3 * C + k * C + o]);
      }
    for (std::size_t o = 0; o < C; ++o) {
      for (std::size_t i = 0; i < C; ++i) f(blk.attention.W_O(i, o), at(llmc_model::attprojw)[l * C * C + o * C + i]);
      f(blk.attention.b_O[o], at(llmc_model::attprojb)[l * C + o]);
    }
    for (std::size_t o = 0; o < 4 * C; ++o) {
      for (std::size_t i = 0; i < C; ++i) f(blk.ffn.W_1(i, o), at(llmc_model::fcw)[l * 4 * C * C + o * C + i]);
      f(blk.ffn.b_1[o], at(llmc_model::fcb)[l * 4 * C + o]);
    }
    for (std::size_t o = 0; o < C; ++o) {
      for (std::size_t i = 0; i < 4 * C; ++i)
        f(blk.ffn.W_2(i, o), at(llmc_model::fcprojw)[l * C * 4 * C + o * 4 * C + i]);
      f(blk.ffn.b_2[o], at(llmc_model::fcprojb)[l * C + o]);
    }
    for (std::size_t i = 0; i < C; ++i) {
      f(blk.gamma_1[i], at(llmc_model::ln1w)[l * C + i]);
      f(blk.beta_1[i], at(llmc_model::ln1b)[l * C + i]);
      f(blk.gamma_2[i], at(llmc_model::ln2w)[l * C + i]);
      f(blk.beta_2[i], at(llmc_model::ln2b)[l * C + i]);
    }
  }
  for (std::size_t i = 0; i < C; ++i) {
    f(a.final_norm_gamma[i], at(llmc_model::lnfw)[i]);
    f(a.final_norm_beta[i], at(llmc_model::lnfb)[i]);
  }
}

/// llm.c's model with attn's trainer's parameters and tokens.
void copy_into(attn_trainer& a, llmc_model& b) {
  for_each_pair(a.params, b, false, [](float x, float& y) { y = x; });
  b.inputs.assign(a.inputs.begin(), a.inputs.end());
  b.targets.assign(a.targets.begin(), a.targets.end());
}

/// One forward and backward of both from the same parameters and tokens: the losses and every
/// gradient must agree to float rounding. The bound: both evaluate the same expressions in float
/// in other orders; each stage's sums (at most n = B·T terms: the weight gradients sum over the
/// rows) carry a relative error of at most n·u (u = 2⁻²⁴) of the sum of |terms|, and the
/// gradient of the first block passes through about 12·L + 4 such stages (per block two norms,
/// four products, attention's three, GELU, two residuals; then the final norm, the logits, the
/// loss, the embedding). Norm-wise per tensor, ‖g_attn − g_llmc‖₂ ≤ (12·L + 4)·n·u·‖g_attn‖₂
/// (the worst case; rounding errors of random sign give far less); the loss within n·u relative.
/// Returns false (and says which tensor) otherwise.
bool check_agreement(size5 s) {
  attn_trainer a(s);
  llmc_model b(s, batch);
  copy_into(a, b);
  const float la = a.forward_backward();
  const float lb = b.forward();
  b.zero_grad();
  b.backward();
  const double u = std::ldexp(1.0, -24), n = static_cast<double>(batch * s.T);
  const double loss_tol = n * u, grad_tol = (12.0 * static_cast<double>(s.L) + 4.0) * n * u;
  const double loss_err = std::abs(static_cast<double>(la) - lb) / std::abs(static_cast<double>(la));
  // the norms of the difference and of attn's gradient, over all parameters and over the worst tensor
  double diff2 = 0, norm2 = 0;
  for_each_pair(a.grads, b, true, [&](float x, float& y) {
    const double dx = static_cast<double>(x) - y;
    diff2 += dx * dx;
    norm2 += static_cast<double>(x) * x;
  });
  const double rel = std::sqrt(diff2 / norm2);
  std::printf("check %s: loss %.7g (attn) %.7g (llmc), relative %.2e (bound %.2e); gradients relative %.2e "
              "(bound %.2e)\n",
              size_name("train_step", "attn|llmc", s).c_str(), static_cast<double>(la), static_cast<double>(lb),
              loss_err, loss_tol, rel, grad_tol);
  return loss_err <= loss_tol && rel <= grad_tol && std::isfinite(rel);
}

// ---------------------------------------------------------------------------------------------
// the benchmarks

void train_attn(benchmark::State& state, size5 s) {
  attn_trainer a(s);
  a.step();  // sizes the cache: the steps timed allocate nothing
  for (auto _ : state) {
    float loss = a.step();
    benchmark::DoNotOptimize(loss);
    benchmark::ClobberMemory();
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(batch * s.T), benchmark::Counter::kIsIterationInvariantRate);
}

void train_llmc(benchmark::State& state, size5 s) {
  attn_trainer a(s);
  llmc_model b(s, batch);
  copy_into(a, b);
  for (auto _ : state) {
    float loss = b.step();
    benchmark::DoNotOptimize(loss);
    benchmark::ClobberMemory();
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(batch * s.T), benchmark::Counter::kIsIterationInvariantRate);
}

// The step's phases alone, each repeated on the state the step leaves (the forward's cache, the
// logits' gradient): where the time goes.
enum class phase { forward, cross_entropy, backward, adamw };

void train_attn_phase(benchmark::State& state, size5 s, phase what) {
  attn_trainer a(s);
  a.step();
  attn::Matrix<float> dlogits(a.logits.rows(), a.logits.cols());
  attn::model_forward(a.params, {.tokens = a.inputs, .batch = batch}, a.logits, a.cache);
  attn::cross_entropy_backward(a.logits, a.targets, dlogits);
  for (auto _ : state) {
    switch (what) {
      case phase::forward: attn::model_forward(a.params, {.tokens = a.inputs, .batch = batch}, a.logits, a.cache); break;
      case phase::cross_entropy: benchmark::DoNotOptimize(attn::cross_entropy_backward(a.logits, a.targets, dlogits)); break;
      case phase::backward:
        attn::model_backward(a.params, {.tokens = a.inputs, .batch = batch}, a.cache, dlogits, a.grads);
        break;
      case phase::adamw:
        attn::adamw_step(std::span<float>(a.w).first(a.n_decayed), std::span<const float>(a.g).first(a.n_decayed), a.s1,
                         {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = adam_eps, .weight_decay = decay});
        attn::adamw_step(std::span<float>(a.w).subspan(a.n_decayed), std::span<const float>(a.g).subspan(a.n_decayed),
                         a.s2, {.lr = lr, .beta1 = beta1, .beta2 = beta2, .eps = adam_eps, .weight_decay = 0});
        break;
    }
    benchmark::ClobberMemory();
  }
}

// llm.c's phases: forward (with its softmax and cross-entropy), zero_grad and backward, update
void train_llmc_phase(benchmark::State& state, size5 s, phase what) {
  attn_trainer a(s);
  llmc_model b(s, batch);
  copy_into(a, b);
  b.step();
  for (auto _ : state) {
    switch (what) {
      case phase::forward: benchmark::DoNotOptimize(b.forward()); break;
      case phase::backward:
        b.zero_grad();
        b.backward();
        break;
      case phase::adamw: b.update(); break;
      case phase::cross_entropy: break;
    }
    benchmark::ClobberMemory();
  }
}

struct decoder {
  attn::model_config c;
  std::vector<float> w;
  attn::model_parameters<float> params;
  std::vector<std::int64_t> tokens;
  explicit decoder(size5 s)
      : c(config_of(s)), w(attn::parameter_count(c)), params(attn::bind_parameters<float>(c, std::span<float>(w))),
        tokens(tokens_of(s.T, s.V, 9)) {
    attn::initialize(params, 1);
  }
};

// one new token at position T − 1 after T − 1 cached ones (B = 1); the cache is cut back to T − 1
// after each step (kv_cache::truncate: a length, nothing moves)
void decode_cached(benchmark::State& state, size5 s) {
  decoder m(s);
  attn::model_kv_cache<float> kv(m.c, 1, s.T);
  attn::Matrix<float> prompt_logits(s.T - 1, s.V), one(1, s.V);
  const std::span<const std::int64_t> all(m.tokens);
  attn::model_step(m.params, all.first(s.T - 1), kv, prompt_logits);
  for (auto _ : state) {
    attn::model_step(m.params, all.subspan(s.T - 1, 1), kv, one);
    benchmark::DoNotOptimize(one.data());
    benchmark::ClobberMemory();
    for (auto& layer : kv.layers) layer.truncate(0, s.T - 1);
  }
}

// the same token's logits from the forward over all T positions (B = 1)
void decode_uncached(benchmark::State& state, size5 s) {
  decoder m(s);
  attn::model_cache<float> cache;
  attn::Matrix<float> logits(s.T, s.V);
  const attn::model_input in{.tokens = m.tokens, .batch = 1};
  attn::model_forward(m.params, in, logits, cache);
  for (auto _ : state) {
    attn::model_forward(m.params, in, logits, cache);
    benchmark::DoNotOptimize(logits.data());
    benchmark::ClobberMemory();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size5 sizes[] = {{64, 64, 2, 4, 64}, {512, 256, 4, 8, 256}};
  bool agree = true;
  for (const size5 s : sizes) agree = check_agreement(s) && agree;
  if (!agree) {
    std::printf("attn and the llm.c-style loops disagree: no ratio is meaningful\n");
    return 1;
  }
  for (const size5 s : sizes) {
    benchmark::RegisterBenchmark(size_name("train_step", "attn", s).c_str(), train_attn, s)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    benchmark::RegisterBenchmark(size_name("train_step", "llmc", s).c_str(), train_llmc, s)
        ->Unit(benchmark::kMillisecond)->UseRealTime();
    const char* phases[] = {"forward", "cross_entropy", "backward", "adamw"};
    for (int k = 0; k < 4; ++k) {
      const std::string attn_impl = std::string("attn_") + phases[k], llmc_impl = std::string("llmc_") + phases[k];
      benchmark::RegisterBenchmark(size_name("train_phase", attn_impl.c_str(), s).c_str(), train_attn_phase, s,
                                   static_cast<phase>(k))
          ->Unit(benchmark::kMillisecond)->UseRealTime();
      if (k != 1)  // (llm.c's cross-entropy is in its forward and backward)
        benchmark::RegisterBenchmark(size_name("train_phase", llmc_impl.c_str(), s).c_str(), train_llmc_phase, s,
                                     static_cast<phase>(k))
            ->Unit(benchmark::kMillisecond)->UseRealTime();
    }
    benchmark::RegisterBenchmark(size_name("decode_step", "attn_cached", s).c_str(), decode_cached, s)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
    benchmark::RegisterBenchmark(size_name("decode_step", "attn_uncached", s).c_str(), decode_uncached, s)
        ->Unit(benchmark::kMicrosecond)->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
