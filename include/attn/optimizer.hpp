#pragma once
/// \file attn/optimizer.hpp
/// One optimizer step over the caller's memory: SGD with momentum and AdamW, PyTorch's formulas
/// and order of operations (torch.optim.SGD and torch.optim.AdamW, 1.13's single-tensor paths),
/// and clipping by the global norm (torch.nn.utils.clip_grad_norm_). docs/training.md.
///
///   SGD:    d ← g + λ·p;  b ← d at the first step, else μ·b + (1 − τ)·d;
///           d ← d + μ·b (nesterov) or b (momentum μ ≠ 0);  p ← p − η·d
///   AdamW:  t ← t + 1;  p ← p·(1 − η·λ);  m ← β₁·m + (1 − β₁)·g;  v ← β₂·v + (1 − β₂)·g²;
///           p ← p − (η / (1 − β₁ᵗ))·m / (√v / √(1 − β₂ᵗ) + ε)
///   clip:   N = ‖(g over every buffer)‖₂;  g ← g·min(1, c / (N + 10⁻⁶))
///
/// The hyper-parameters (`sgd_options`, `adamw_options`) are doubles, as Python's; each
/// coefficient (1 − η·λ, 1 − β₁, η/(1 − β₁ᵗ), …) is formed in double and rounded to T once, and
/// the element-wise arithmetic is T's, as PyTorch's CPU kernels do for a float tensor. The state
/// (the momentum buffer; m and v) lives in spans of the caller's memory and the step count in the
/// state struct: nothing is allocated. A model with several parameter groups (weights decayed,
/// norms and biases not, as nanoGPT does) keeps one state per group and calls the step once per
/// group, each with its options: each group counts its own steps, as PyTorch counts each
/// parameter's. At the state's first step (step = 0) the buffers are written, not read (PyTorch
/// makes them then: zeros for m and v, a copy of d for SGD's b), so they need no initialisation.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

#include "attn/detail/math.hpp"
#include "attn/detail/overlap.hpp"
#include "attn/error.hpp"
#include "attn/vector.hpp"

namespace attn {

/// torch.optim.SGD's hyper-parameters: learning rate η ≥ 0, momentum μ ≥ 0, dampening τ,
/// weight decay λ ≥ 0 (added to the gradient: L2, not decoupled), Nesterov momentum (needs μ > 0
/// and τ = 0). All finite, else domain_error.
struct sgd_options {
  double lr = 1e-3;           ///< η
  double momentum = 0;        ///< μ (0: plain SGD, no buffer)
  double dampening = 0;       ///< τ
  double weight_decay = 0;    ///< λ
  bool nesterov = false;      ///< d ← d + μ·b instead of d ← b
};

/// SGD's state in the caller's memory: the momentum buffer b (as many numbers as the parameters;
/// empty when μ = 0) and how many steps this state has taken (0: b is written, not read).
template <real T>
struct sgd_state {
  std::span<T> momentum{};  ///< b
  std::uint64_t step = 0;   ///< steps taken
};

/// torch.optim.AdamW's hyper-parameters (its defaults): η ≥ 0, 0 ≤ β₁, β₂ < 1, ε ≥ 0, λ ≥ 0
/// (decoupled: p ← p·(1 − η·λ)). All finite, else domain_error.
struct adamw_options {
  double lr = 1e-3;            ///< η
  double beta1 = 0.9;          ///< β₁
  double beta2 = 0.999;        ///< β₂
  double eps = 1e-8;           ///< ε
  double weight_decay = 1e-2;  ///< λ
};

/// AdamW's state in the caller's memory: m and v (as many numbers as the parameters each) and the
/// step count t (0: m and v are written, not read; the step makes t + 1).
template <real T>
struct adamw_state {
  std::span<T> m{};        ///< the first moment
  std::span<T> v{};        ///< the second moment
  std::uint64_t step = 0;  ///< t, steps taken
};

namespace detail {

[[noreturn]] ATTN_NOINLINE inline void throw_bad_hyper(const char* where, const char* name, double value,
                                                       const char* range) {
  raise<domain_error>(std::string(where) + ": " + name + " is " + std::to_string(value) +
                      " but must be " + range);
}

[[noreturn]] ATTN_NOINLINE inline void throw_nesterov(const char* where) {
  raise<domain_error>(std::string(where) + ": nesterov needs momentum > 0 and dampening 0");
}

/// Throws unless x is finite and lo ≤ x (below_one: also x < 1). On the bits (finite_as), so
/// -ffast-math keeps the check.
inline void check_hyper(const char* where, const char* name, double x, bool below_one = false) {
  if (!finite_as<double>(x) || x < 0 || (below_one && x >= 1))
    throw_bad_hyper(where, name, x, below_one ? "in [0, 1)" : "finite and at least 0");
}

/// A state buffer as the messages name it: "size of m is …", "m overlaps the parameters".
template <class T>
struct state_buffer {
  const char* size_name;
  const char* name;
  std::span<T> numbers;
};

template <class T>
void check_step_buffers(const char* where, std::span<T> p, std::span<const T> g,
                        std::initializer_list<state_buffer<T>> states) {
  check_equal(where, "size of the gradients", g.size(), "size of the parameters", p.size());
  named_regions<T, 4> outputs;
  outputs.add("the parameters", region_of(p));
  for (const state_buffer<T>& s : states) {
    check_equal(where, s.size_name, s.numbers.size(), "size of the parameters", p.size());
    outputs.add(s.name, region_of(s.numbers));
  }
  named_regions<T, 1> inputs;
  inputs.add("the gradients", region_of(g));
  if (!p.empty()) check_outputs_apart(where, outputs.span(), inputs.span());
}

}  // namespace detail

/// One step of SGD (the file comment) on `params` from `grads`, with the state's momentum buffer;
/// state.step counts up. dimension_error (a size ≠ the parameters', naming which), domain_error
/// (a hyper-parameter out of range), overlap_error (two buffers meet); nothing written on an error.
template <mutable_vector_like P, vector_like G>
  requires std::same_as<scalar_of<P>, scalar_of<G>>
void sgd_step(P&& params, const G& grads, sgd_state<scalar_of<P>>& state, const sgd_options& opt) {
  using T = scalar_of<P>;
  const char* where = "attn::sgd_step";
  const std::span<T> p = as_mutable_span(params);
  const std::span<const T> g = as_span(grads);
  detail::check_hyper(where, "lr", opt.lr);
  detail::check_hyper(where, "momentum", opt.momentum);
  detail::check_hyper(where, "weight_decay", opt.weight_decay);
  if (!detail::finite_as<double>(opt.dampening))
    detail::throw_bad_hyper(where, "dampening", opt.dampening, "finite");
  if (opt.nesterov && (opt.momentum <= 0 || opt.dampening != 0)) detail::throw_nesterov(where);
  const bool with_momentum = opt.momentum != 0;
  if (with_momentum)
    detail::check_step_buffers<T>(where, p, g, {{"size of the momentum buffer", "the momentum buffer", state.momentum}});
  else
    detail::check_step_buffers<T>(where, p, g, {});
  const T wd = static_cast<T>(opt.weight_decay), mu = static_cast<T>(opt.momentum);
  const T keep = static_cast<T>(1 - opt.dampening), neg_lr = static_cast<T>(-opt.lr);
  const bool first = state.step == 0;
  T* b = state.momentum.data();
  for (std::size_t i = 0; i < p.size(); ++i) {
    T d = opt.weight_decay != 0 ? g[i] + wd * p[i] : g[i];
    if (with_momentum) {
      b[i] = first ? d : b[i] * mu + keep * d;
      d = opt.nesterov ? d + mu * b[i] : b[i];
    }
    p[i] = p[i] + neg_lr * d;
  }
  ++state.step;
}

/// One step of AdamW (the file comment) on `params` from `grads`, with the state's m and v;
/// state.step becomes t + 1 and the bias corrections use it. Errors as sgd_step.
template <mutable_vector_like P, vector_like G>
  requires std::same_as<scalar_of<P>, scalar_of<G>>
void adamw_step(P&& params, const G& grads, adamw_state<scalar_of<P>>& state, const adamw_options& opt) {
  using T = scalar_of<P>;
  const char* where = "attn::adamw_step";
  const std::span<T> p = as_mutable_span(params);
  const std::span<const T> g = as_span(grads);
  detail::check_hyper(where, "lr", opt.lr);
  detail::check_hyper(where, "beta1", opt.beta1, true);
  detail::check_hyper(where, "beta2", opt.beta2, true);
  detail::check_hyper(where, "eps", opt.eps);
  detail::check_hyper(where, "weight_decay", opt.weight_decay);
  detail::check_step_buffers<T>(where, p, g, {{"size of m", "m", state.m}, {"size of v", "v", state.v}});
  const std::uint64_t t = state.step + 1;
  // PyTorch's coefficients, in double as Python's floats: 1 − β^t, η/(1 − β₁ᵗ), √(1 − β₂ᵗ)
  const double bc1 = 1 - std::pow(opt.beta1, static_cast<double>(t));
  const double bc2 = 1 - std::pow(opt.beta2, static_cast<double>(t));
  const T decay = static_cast<T>(1 - opt.lr * opt.weight_decay);
  const T b1 = static_cast<T>(opt.beta1), b2 = static_cast<T>(opt.beta2);
  const T c1 = static_cast<T>(1 - opt.beta1), c2 = static_cast<T>(1 - opt.beta2);
  const T neg_step = static_cast<T>(-(opt.lr / bc1));
  const T root_bc2 = static_cast<T>(std::sqrt(bc2)), eps = static_cast<T>(opt.eps);
  const bool first = state.step == 0;
  T* m = state.m.data();
  T* v = state.v.data();
  for (std::size_t i = 0; i < p.size(); ++i) {
    const T gi = g[i];
    const T mi = (first ? T(0) : m[i] * b1) + c1 * gi;
    const T vi = (first ? T(0) : v[i] * b2) + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const T denom = std::sqrt(vi) / root_bc2 + eps;
    p[i] = p[i] * decay + neg_step * (mi / denom);
  }
  state.step = t;
}

/// Scales every gradient by min(1, max_norm / (N + 10⁻⁶)), N the 2-norm of all of them together
/// (torch.nn.utils.clip_grad_norm_ with norm_type 2, error_if_nonfinite False: a NaN or infinite
/// N scales by NaN or 0, as PyTorch's); returns N. The squares are summed in long double (no
/// overflow from double's range where long double is x87's or wider). max_norm ≥ 0, not NaN
/// (+inf: nothing is scaled), else domain_error.
template <real T>
T clip_grad_norm(std::span<const std::span<T>> grads, double max_norm) {
  const char* where = "attn::clip_grad_norm";
  // NaN on the bits (|x|'s above inf's), as finite_as: -ffast-math may fold !(x >= 0) to x < 0
  const bool nan = (detail::bit_cast<std::uint64_t>(max_norm) & 0x7fff'ffff'ffff'ffffULL) > 0x7ff0'0000'0000'0000ULL;
  if (nan || max_norm < 0) detail::throw_bad_hyper(where, "max_norm", max_norm, "at least 0");
  long double sum = 0;
  for (const std::span<T> g : grads)
    for (const T x : g) sum += static_cast<long double>(x) * static_cast<long double>(x);
  const T total = static_cast<T>(std::sqrt(sum));
  T coef = static_cast<T>(max_norm) / (total + static_cast<T>(1e-6));
  if (coef > T(1)) coef = T(1);
  for (const std::span<T> g : grads)
    for (T& x : g) x *= coef;
  return total;
}

/// clip_grad_norm of one buffer (all the gradients in one allocation, as llm.c lays them).
template <mutable_vector_like G>
scalar_of<G> clip_grad_norm(G&& grads, double max_norm) {
  using T = scalar_of<G>;
  const std::span<T> one[1] = {as_mutable_span(grads)};
  return clip_grad_norm<T>(std::span<const std::span<T>>(one), max_norm);
}

}  // namespace attn
