#pragma once
/// \file examples/attn_calc/calc.hpp
/// What attn-calc computes from a checked config: the map (scores, weights, contexts) through
/// attn::align, and, with --jacobian, every ∂c_t/∂h_j and ∂c_t/∂q_t with its finite-difference
/// check (attn/jacobian.hpp, attn/gradcheck.hpp). A result that is not finite (scores that
/// overflow a double) is refused as bad input.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attn/attention.hpp"
#include "attn/gradcheck.hpp"
#include "attn/jacobian.hpp"
#include "attn/matrix.hpp"
#include "attn/score.hpp"
#include "attn/softmax.hpp"
#include "parse.hpp"

namespace attn_calc {

/// Everything attn-calc prints.
struct results {
  attn::Matrix<double> scores;    ///< T × n
  attn::Matrix<double> weights;   ///< T × n: the alignment map
  attn::Matrix<double> contexts;  ///< T × d
  std::vector<double> row_sums;   ///< Σ_j α_tj from the unrounded weights
  /// --jacobian: note_jacobians[t][j] = ∂c_t/∂h_j (d × d), query_jacobians[t] = ∂c_t/∂q_t (d × d_q)
  std::vector<std::vector<attn::Matrix<double>>> note_jacobians;
  std::vector<attn::Matrix<double>> query_jacobians;
  attn::gradcheck_report<double> fd_notes;  ///< every ∂c/∂h_j against central finite differences
  attn::gradcheck_report<double> fd_query;  ///< every ∂c/∂q against central finite differences
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
}  // namespace detail

/// Computes the map (and the Jacobians when c.jacobian). Throws usage_error when a result is
/// not finite.
[[nodiscard]] inline results compute(const config& c) {
  const std::size_t n = c.notes.rows;
  std::unique_ptr<bool[]> mask;
  attn::options opt;
  opt.beta = c.beta;
  if (!c.mask.empty()) {
    mask = std::make_unique<bool[]>(n);
    for (std::size_t j = 0; j < n; ++j) mask[j] = c.mask[j] != 0;
    opt.mask = std::span<const bool>(mask.get(), n);
  }
  const auto queries = c.queries.view();
  const auto notes = c.notes.view();
  results r;
  with_score(c, [&](const auto& score) {
    auto map = attn::align(queries, notes, score, opt);
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
    for (std::size_t t = 0; t < queries.rows(); ++t) {
      const std::span<const double> q = queries.row(t);
      std::vector<attn::Matrix<double>> per_note;
      for (std::size_t j = 0; j < n; ++j) {
        per_note.push_back(attn::jacobian_note(q, notes, score, j, opt));
        detail::require_finite(per_note.back(), c, "Jacobians");
        // c as a function of note j alone, for the finite differences
        attn::Matrix<double> moved(notes);
        auto context_of_note = [&](std::span<const double> h) {
          for (std::size_t k = 0; k < h.size(); ++k) moved(j, k) = h[k];
          return attn::attend(q, moved, score, opt).context;
        };
        r.fd_notes.merge(attn::check_jacobian(context_of_note, notes.row(j), per_note.back(),
                                              "h_" + std::to_string(j + 1)));
      }
      r.note_jacobians.push_back(std::move(per_note));
      r.query_jacobians.push_back(attn::jacobian_query(q, notes, score, opt));
      detail::require_finite(r.query_jacobians.back(), c, "Jacobians");
      auto context_of_query = [&](std::span<const double> x) { return attn::attend(x, notes, score, opt).context; };
      r.fd_query.merge(attn::check_jacobian(context_of_query, q, r.query_jacobians.back(), "q"));
    }
  });
  return r;
}

}  // namespace attn_calc
