#pragma once
/// \file examples/attn_calc/calc.hpp
/// What attn-calc computes from a checked config: the map (scores, weights, contexts) through
/// attn::align; with --steps the hand steps (e^(βs) and their sum; additive's W1 h + W2 q and
/// its tanh); with --no-attention Unit 17's baseline (attn::no_attention); with --jacobian every
/// ∂c_t/∂h_j (or ∂c_t/∂k_j and ∂c_t/∂v_j) and ∂c_t/∂q_t with its finite-difference check
/// (attn/jacobian.hpp, attn/gradcheck.hpp). With --self, self-attention with projections and h
/// heads (attn::multi_head_attention); with --dot-vs-scaled, the map with dot and with
/// scaled_dot. Masks per query (--mask causal, a mask matrix) go to the library as
/// options::causal and options::row_mask. A result that is not finite (scores that overflow a
/// double) is refused as bad input. The lessons of §8–§9 (--pe, --rope, the norms,
/// --activations, --block) are lessons.hpp's compute_lesson.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "attn/attention.hpp"
#include "attn/gradcheck.hpp"
#include "attn/heads.hpp"
#include "attn/jacobian.hpp"
#include "attn/mask.hpp"
#include "attn/matrix.hpp"
#include "attn/score.hpp"
#include "attn/softmax.hpp"
#include "lessons.hpp"
#include "parse.hpp"

namespace attn_calc {

/// One map of several (--self's heads, --dot-vs-scaled's two): its scores and its weights.
struct map_panel {
  std::string name;               ///< "head 1", "dot", "scaled_dot", "dot, head 1"; "" for --self's one map
  bool scaled = false;            ///< the scores are divided by √d (d: a key's numbers, a head's d_k)
  attn::Matrix<double> scores;    ///< T × n, before β and the masks
  attn::Matrix<double> weights;   ///< T × n
  std::vector<double> row_sums;   ///< Σ_j from the unrounded weights
};

/// Everything attn-calc prints.
struct results {
  attn::Matrix<double> scores;    ///< T × n
  attn::Matrix<double> weights;   ///< T × n: the alignment map
  attn::Matrix<double> contexts;  ///< T × d_v
  std::vector<double> row_sums;   ///< Σ_j α_tj from the unrounded weights
  /// --steps: exps(t, j) = e^(β s_tj), or e^(β (s_tj − s_tp)) with p the note of the row's
  /// largest β s_tp when exp_shifted (some e^(β s) would overflow or vanish); 0 for a masked
  /// note. exp_sums[t] = Σ_j exps(t, j), so α_tj = exps(t, j) / exp_sums[t].
  attn::Matrix<double> exps;
  std::vector<double> exp_sums;
  bool exp_shifted = false;
  /// --steps with the additive score: hidden[t] is n × 2k, row j = (W1 h_j + W2 q_t, tanh of it)
  std::vector<attn::Matrix<double>> hidden;
  attn::Matrix<double> no_attention;  ///< --no-attention: T × d_v, every row the last note
  /// --jacobian: note_jacobians[t][j] = ∂c_t/∂h_j (d × d; with keys ≠ values ∂c_t/∂k_j, d_v × d_k),
  /// value_jacobians[t][j] = ∂c_t/∂v_j (keys ≠ values only), query_jacobians[t] = ∂c_t/∂q_t (d_v × d_q)
  std::vector<std::vector<attn::Matrix<double>>> note_jacobians;
  std::vector<std::vector<attn::Matrix<double>>> value_jacobians;
  std::vector<attn::Matrix<double>> query_jacobians;
  attn::gradcheck_report<double> fd_notes;   ///< every ∂c/∂h_j (or ∂c/∂k_j) against central finite differences
  attn::gradcheck_report<double> fd_values;  ///< every ∂c/∂v_j (keys ≠ values)
  attn::gradcheck_report<double> fd_query;   ///< every ∂c/∂q against central finite differences
  /// --self and --dot-vs-scaled: every map (then scores, weights and contexts above are empty):
  /// --self's heads in order; --dot-vs-scaled's dot maps, then its scaled ones.
  std::vector<map_panel> maps;
  /// --self: Q = X W_Q, K = X W_K, V = X W_V, the heads' outputs Z = [A_1 V_1 … A_h V_h] and
  /// Y = Z W_O (or Z); Z and Y are left empty with --dot-vs-scaled, which compares maps.
  attn::Matrix<double> Q, K, V, Z, Y;
  /// --beta-sweep: sweep(k, j) = the one query's weight on note j at β = c.beta_sweep[k]
  attn::Matrix<double> sweep;
  lesson_results lesson;  ///< --pe, --rope, --layer-norm, --rms-norm, --activations, --block (lessons.hpp)
};

/// Calls f(score) with the attn score object the config asks for (parameters borrowed from c).
template <class F>
decltype(auto) with_score(const config& c, F&& f) {
  switch (c.score) {
    case score_kind::scaled_dot: return f(attn::scaled_dot);
    case score_kind::general: return f(attn::general<double>(c.W.view()));
    case score_kind::additive:
      return f(attn::additive<double>(c.W1.view(), c.W2.view(), std::span<const double>(c.v)));
    case score_kind::dot: break;
  }
  return f(attn::dot);
}

namespace detail {
inline void require_finite(const attn::Matrix<double>& m, const config& c, const char* what) {
  for (std::size_t t = 0; t < m.rows(); ++t)
    for (std::size_t j = 0; j < m.cols(); ++j)
      if (!std::isfinite(m(t, j)))
        throw usage_error(std::string("the ") + what + " of query " + shown(c.query_labels[t]) +
                          " are not finite (the inputs are too large for a double)");
}

/// The softmax steps of --steps (see results::exps).
inline void exp_steps(const config& c, results& r) {
  const std::size_t T = r.scores.rows(), n = r.scores.cols();
  auto kept = [&](std::size_t t, std::size_t j) { return c.allowed(t, j); };
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < n; ++j) {
      const double y = c.beta * r.scores(t, j);
      // e^y is a double with most of its digits from e^-700 to e^700
      if (kept(t, j) && !(std::abs(y) <= 700)) r.exp_shifted = true;
    }
  r.exps = attn::Matrix<double>(T, n, 0.0);
  r.exp_sums.assign(T, 0.0);
  for (std::size_t t = 0; t < T; ++t) {
    std::size_t p = n;  // the kept note of the largest β s_tp
    for (std::size_t j = 0; j < n; ++j)
      if (kept(t, j) && (p == n || c.beta * r.scores(t, j) > c.beta * r.scores(t, p))) p = j;
    for (std::size_t j = 0; j < n; ++j) {
      if (!kept(t, j)) continue;
      r.exps(t, j) = r.exp_shifted ? std::exp(c.beta * (r.scores(t, j) - r.scores(t, p)))
                                   : std::exp(c.beta * r.scores(t, j));
      r.exp_sums[t] += r.exps(t, j);
    }
  }
}

/// The additive score's steps of --steps: W1 h_j + W2 q_t (the score's own pre_activation) and tanh.
inline void hidden_steps(const config& c, results& r) {
  const attn::additive<double> score(c.W1.view(), c.W2.view(), std::span<const double>(c.v));
  const std::size_t k = c.v.size();
  for (std::size_t t = 0; t < c.queries.rows; ++t) {
    attn::Matrix<double> h(c.notes.rows, 2 * k);
    for (std::size_t j = 0; j < c.notes.rows; ++j)
      for (std::size_t i = 0; i < k; ++i) {
        h(j, i) = score.pre_activation(i, c.queries.view().row(t), c.notes.view().row(j));
        h(j, k + i) = std::tanh(h(j, i));
      }
    r.hidden.push_back(std::move(h));
  }
}
}  // namespace detail

namespace detail {
/// β and the masks of c (borrowed from c) as the library's options.
inline attn::options options_of(const config& c) {
  attn::options opt;
  opt.beta = c.beta;
  if (!c.mask.empty()) opt.mask = attn::mask_view(c.mask);
  if (!c.row_mask.empty()) opt.row_mask = attn::mask_matrix_view(c.row_mask.data(), c.queries.rows, c.notes.rows);
  opt.causal = c.causal;
  return opt;
}

/// Query t's mask alone, as one row (what attend and the Jacobians of one query take), into `row`.
inline attn::options row_options(const config& c, std::size_t t, std::vector<char>& row) {
  attn::options opt;
  opt.beta = c.beta;
  row.resize(c.notes.rows);
  for (std::size_t j = 0; j < row.size(); ++j) row[j] = c.allowed(t, j) ? 1 : 0;
  opt.mask = attn::mask_view(row);
  return opt;
}

inline void sum_rows(map_panel& p) {
  for (std::size_t t = 0; t < p.weights.rows(); ++t) {
    double sum = 0;
    for (std::size_t j = 0; j < p.weights.cols(); ++j) sum += p.weights(t, j);
    p.row_sums.push_back(sum);
  }
}

/// A map's name: "head 2" (or --head-labels' i-th), "dot", "scaled_dot", "dot, head 2".
inline std::string head_name(const config& c, std::size_t i, bool scaled) {
  std::string name = c.dot_vs_scaled ? (scaled ? "scaled_dot" : "dot") : "";
  const std::string head = c.head_labels.empty() ? "head " + std::to_string(i + 1) : c.head_labels[i];
  if (c.heads > 1 || !c.head_labels.empty()) name += (name.empty() ? "" : ", ") + head;
  return name;
}

/// --self: self-attention with projections through attn::multi_head_attention (Q, K, V, the
/// heads' maps, Z, Y), and each head's scores through attn::align on its columns of Q and K.
/// With --cross the queries X_q are c.queries and the keys and values come from X_kv =
/// c.notes (multi_head_attention's cross form); W_Q defaults to the identity of d_q, W_K and
/// W_V to that of d_kv; the biases are added as the library adds them.
inline void self_attention(const config& c, results& r) {
  const std::size_t T = c.queries.rows, n = c.notes.rows, d = c.queries.cols, h = c.heads;
  const matrix I = identity(d), I_kv = identity(c.notes.cols);
  const auto or_identity = [](const matrix& m, const matrix& id) { return m.empty() ? id.view() : m.view(); };
  attn::multi_head_parameters<double> p;
  p.W_Q = or_identity(c.WQ, I);
  p.W_K = or_identity(c.WK, I_kv);
  p.W_V = or_identity(c.WV, I_kv);
  if (!c.WO.empty()) p.W_O = c.WO.view();
  p.b_Q = c.bQ;
  p.b_K = c.bK;
  p.b_V = c.bV;
  p.b_O = c.bO;
  p.heads = h;
  const std::size_t dk = p.W_Q.cols() / h, dv = p.W_V.cols() / h;
  const attn::options opt = options_of(c);
  for (const bool scaled : {false, true}) {
    if (!c.dot_vs_scaled && scaled != (c.score == score_kind::scaled_dot)) continue;
    p.score = scaled ? attn::dot_product_score_choice{attn::scaled_dot} : attn::dot_product_score_choice{attn::dot};
    attn::Matrix<double> maps(h * T, n), Y(T, c.WO.empty() ? p.W_V.cols() : c.WO.cols);
    attn::multi_head_cache<double> cache;
    attn::multi_head_attention(c.queries.view(), c.notes.view(), p,
                               attn::multi_head_views<double>{.out = Y.view(), .maps = maps.view()}, cache, opt);
    r.Q = cache.queries;
    r.K = cache.keys;
    r.V = cache.values;
    for (std::size_t i = 0; i < h; ++i) {
      const auto columns = [&](const attn::Matrix<double>& m, std::size_t width) {
        return attn::MatrixView<const double>(m.data() + i * width, m.rows(), width, m.cols());
      };
      map_panel panel{head_name(c, i, scaled), scaled, {}, attn::Matrix<double>(T, n), {}};
      const auto scores_of = [&](const auto& score) {
        return attn::align(columns(r.Q, dk), columns(r.K, dk), columns(r.V, dv), score, opt).scores;
      };
      panel.scores = scaled ? scores_of(attn::scaled_dot) : scores_of(attn::dot);
      for (std::size_t t = 0; t < T; ++t)
        for (std::size_t j = 0; j < n; ++j) panel.weights(t, j) = maps(i * T + t, j);
      sum_rows(panel);
      r.maps.push_back(std::move(panel));
    }
    if (!c.dot_vs_scaled) {
      r.Z = cache.heads_out;
      r.Y = std::move(Y);
    }
  }
  for (const auto* m : {&r.Q, &r.K, &r.V, &r.Z, &r.Y}) require_finite(*m, c, "projections or outputs");
  for (const auto& panel : r.maps) {
    require_finite(panel.scores, c, "scores");
    require_finite(panel.weights, c, "weights");
  }
}

/// --dot-vs-scaled without --self: the map of the queries over the notes with dot, then with scaled_dot.
inline void dot_and_scaled(const config& c, results& r) {
  const attn::options opt = options_of(c);
  for (const bool scaled : {false, true}) {
    const auto map_of = [&](const auto& score) {
      return attn::align(c.queries.view(), c.notes.view(), c.blended().view(), score, opt);
    };
    auto map = scaled ? map_of(attn::scaled_dot) : map_of(attn::dot);
    map_panel panel{scaled ? "scaled_dot" : "dot", scaled, std::move(map.scores), std::move(map.weights), {}};
    require_finite(panel.scores, c, "scores");
    require_finite(panel.weights, c, "weights");
    sum_rows(panel);
    r.maps.push_back(std::move(panel));
  }
}
}  // namespace detail

/// Computes the map (and what c asks for besides: the steps, the baseline without attention,
/// the Jacobians), or with --self and --dot-vs-scaled their maps. Throws usage_error when a
/// result is not finite.
[[nodiscard]] inline results compute(const config& c) {
  results r;
  if (c.lesson != lesson_kind::none) {
    r.lesson = compute_lesson(c);
    return r;
  }
  if (c.self_attention) {
    detail::self_attention(c, r);
    return r;
  }
  if (c.dot_vs_scaled) {
    detail::dot_and_scaled(c, r);
    return r;
  }
  const std::size_t n = c.notes.rows;
  const attn::options opt = detail::options_of(c);
  const auto queries = c.queries.view();
  const auto keys = c.notes.view();
  const auto values = c.blended().view();
  with_score(c, [&](const auto& score) {
    auto map = attn::align(queries, keys, values, score, opt);
    r.scores = std::move(map.scores);
    r.weights = std::move(map.weights);
    r.contexts = std::move(map.contexts);
    detail::require_finite(r.scores, c, "scores");
    detail::require_finite(r.weights, c, "weights");
    detail::require_finite(r.contexts, c, "contexts");
    for (std::size_t t = 0; t < r.weights.rows(); ++t) {
      double sum = 0;
      for (std::size_t j = 0; j < n; ++j) sum += r.weights(t, j);
      r.row_sums.push_back(sum);
    }
    if (!c.jacobian) return;
    std::vector<char> row_mask;
    for (std::size_t t = 0; t < queries.rows(); ++t) {
      const std::span<const double> q = queries.row(t);
      const attn::options row_opt = c.per_row_mask() ? detail::row_options(c, t, row_mask) : opt;
      std::vector<attn::Matrix<double>> per_key, per_value;
      for (std::size_t j = 0; j < n; ++j) {
        // c as a function of row j of the keys (the notes) alone, and of the values, for the finite differences
        attn::Matrix<double> moved_keys(keys), moved_values(values);
        auto context_of_key = [&](std::span<const double> h) {
          for (std::size_t k = 0; k < h.size(); ++k) moved_keys(j, k) = h[k];
          return c.keys_and_values() ? attn::attend(q, moved_keys, values, score, row_opt).context
                                     : attn::attend(q, moved_keys, score, row_opt).context;
        };
        per_key.push_back(c.keys_and_values() ? attn::jacobian_key(q, keys, values, score, j, row_opt)
                                              : attn::jacobian_note(q, keys, score, j, row_opt));
        detail::require_finite(per_key.back(), c, "Jacobians");
        r.fd_notes.merge(attn::check_jacobian(context_of_key, keys.row(j), per_key.back(),
                                              (c.keys_and_values() ? "k_" : "h_") + std::to_string(j + 1)));
        if (!c.keys_and_values()) continue;
        auto context_of_value = [&](std::span<const double> x) {
          for (std::size_t k = 0; k < x.size(); ++k) moved_values(j, k) = x[k];
          return attn::attend(q, keys, moved_values, score, row_opt).context;
        };
        per_value.push_back(attn::jacobian_value(q, keys, values, score, j, row_opt));
        r.fd_values.merge(attn::check_jacobian(context_of_value, values.row(j), per_value.back(),
                                               "v_" + std::to_string(j + 1)));
      }
      r.note_jacobians.push_back(std::move(per_key));
      if (c.keys_and_values()) r.value_jacobians.push_back(std::move(per_value));
      r.query_jacobians.push_back(attn::jacobian_query(q, keys, values, score, row_opt));
      detail::require_finite(r.query_jacobians.back(), c, "Jacobians");
      auto context_of_query = [&](std::span<const double> x) {
        return attn::attend(x, keys, values, score, row_opt).context;
      };
      r.fd_query.merge(attn::check_jacobian(context_of_query, q, r.query_jacobians.back(), "q"));
    }
  });
  if (c.steps) {
    detail::exp_steps(c, r);
    if (c.score == score_kind::additive) detail::hidden_steps(c, r);
  }
  if (c.no_attention) r.no_attention = attn::no_attention(queries, values);
  if (!c.beta_sweep.empty()) {  // the map again at every β of the sweep, through attn::align
    r.sweep = attn::Matrix<double>(c.beta_sweep.size(), n);
    with_score(c, [&](const auto& score) {
      for (std::size_t k = 0; k < c.beta_sweep.size(); ++k) {
        attn::options at = opt;
        at.beta = c.beta_sweep[k];
        const auto map = attn::align(queries, keys, values, score, at);
        detail::require_finite(map.weights, c, "weights");
        for (std::size_t j = 0; j < n; ++j) r.sweep(k, j) = map.weights(0, j);
      }
    });
  }
  return r;
}

}  // namespace attn_calc
