// Users' own scores for the tests of the strong guarantee: the dot product written note by note,
// as a user writes a score first (no batched members, nothing noexcept: attn calls operator()
// and the gradients one note at a time, and treats every member as one that may throw).
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>

#include "attn/error.hpp"

namespace test_scores {

/// What throwing_score throws.
struct score_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// s(q, h) = q·h, note by note. Throws score_failure at the `at`-th note it scores, counted over
/// the object's life (0: never); gradient_note or gradient_query throw too when asked to.
struct throwing_score {
  mutable int calls = 0;
  int at = 3;
  bool note_throws = false, query_throws = false;
  void check(std::size_t dq, std::size_t dh) const {
    if (dq != dh) throw attn::dimension_error("throwing_score: sizes differ");
  }
  double operator()(std::span<const double> q, std::span<const double> h) const {
    if (++calls == at) throw score_failure("the score gave up");
    double s = 0;
    for (std::size_t i = 0; i < q.size(); ++i) s += q[i] * h[i];
    return s;
  }
  void gradient_note(std::span<const double> q, std::span<const double>, std::span<double> out) const {
    if (note_throws) throw score_failure("gradient_note gave up");
    for (std::size_t i = 0; i < q.size(); ++i) out[i] = q[i];
  }
  void gradient_query(std::span<const double>, std::span<const double> h, std::span<double> out) const {
    if (query_throws) throw score_failure("gradient_query gave up");
    for (std::size_t i = 0; i < h.size(); ++i) out[i] = h[i];
  }
};

/// The same score that never throws: s(q, h) = q·h through operator() and the gradients.
struct note_by_note_dot : throwing_score {
  note_by_note_dot() : throwing_score{.at = 0} {}
};

}  // namespace test_scores
