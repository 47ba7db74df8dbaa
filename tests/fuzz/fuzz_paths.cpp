// libFuzzer target: the public paths the other targets do not reach (docs/errors.md, "Fuzzing").
// The first bytes pick float or double and one of five parts; each checks a documented rule,
// not only that two paths agree:
// 0. attend with the additive score (float, double): exactly the documented exceptions, outputs
//    untouched then; else the scores are score_all's and the weights softmax's of them, bit for
//    bit (attend is score_all, then softmax, for a score outside the dot family).
// 1. fixed-size attend (N notes of D numbers, N and D from a switch) against the dynamic call on
//    the same numbers: the same exception, else the same scores, weights and context, bit for bit
//    (NaN as NaN). The fuzz build is baseline x86-64, where nothing is fused (docs/errors.md).
// 2. jacobian_query, jacobian_note, jacobian_key and jacobian_value into a view of a larger
//    buffer (a row stride beyond the row): the returned matrix's numbers, and nothing outside the
//    view written; a view of the wrong shape is refused with dimension_error and the buffer left
//    as it was.
// 3. hand-built partial results: merge_into(a, a) is merge(a, a) to the bit; merge_into, merge
//    and finish refuse values_mean and context lengths that disagree (dimension_error) and then
//    write nothing; finish into a buffer of the wrong size likewise.
// 4. a user's score that throws at a note the fuzzer picks (double; tests/user_scores.hpp):
//    attend, align, backward and align_backward into caller buffers either finish with the never-throwing
//    score's numbers, bit for bit, or let the score's exception through with every output
//    untouched. On notes of length 0, every score is 0 and the kept notes share the weight
//    exactly (dot, scaled_dot and the user's score).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../user_scores.hpp"
#include "fuzz_common.hpp"

namespace {

using namespace attn_fuzz;

template <class T>
std::vector<T> numbers(reader& r, std::size_t n) {
  std::vector<T> x(n);
  for (T& v : x) v = r.template number<T>();
  return x;
}

/// Part 0: attend with additive{W1, W2, v}.
template <class T>
void additive_part(reader& r) {
  const std::size_t n = r.size_upto(40), d = r.size_upto(6), dq = r.size_upto(6), k = 1 + r.size_upto(3);
  const std::vector<T> q = numbers<T>(r, dq), notes = numbers<T>(r, n * d), W1 = numbers<T>(r, k * d),
                       W2 = numbers<T>(r, k * dq), v = numbers<T>(r, k);
  const double beta = r.beta();
  const std::vector<char> mask_chars = r.mask(n);
  const mask_view mask(mask_chars);
  const attn::options opt{.beta = beta, .mask = mask.span(), .if_all_masked = r.policy()};
  const attn::MatrixView<const T> K(notes.data(), n, d), M1(W1.data(), k, d), M2(W2.data(), k, dq);
  const attn::additive<T> score(M1, M2, std::span<const T>(v));
  std::vector<T> s(n);
  attn::score_all<T>(score, q, K, s);
  const T beta_t = beta_as<T>(beta);
  const kind kd = classify<T>(s, beta_t, mask);
  const int expected = n == 0                                                                   ? 1
                       : !beta_ok<T>(beta)                                                      ? 2
                       : kd == kind::none_kept && opt.if_all_masked == attn::all_masked_policy::throw_error ? 2
                                                                                                : 0;
  guarded<T> scores(n), weights(n), context(d);
  const int got = thrown([&] { attn::attend(q, K, score, scores.data, weights.data, context.data, opt); });
  ATTN_FUZZ_CHECK(got == expected, "additive: attend threw %d, expected %d", got, expected);
  if (got != 0) {
    ATTN_FUZZ_CHECK(scores.untouched() && weights.untouched() && context.untouched(), "additive: a throw wrote");
    return;
  }
  std::vector<T> w(n);
  attn::softmax(std::span<const T>(s), std::span<T>(w), opt);
  for (std::size_t j = 0; j < n; ++j) {
    ATTN_FUZZ_CHECK(same_or_both_nan(scores.data[j], s[j]), "additive: score %zu is %g, score_all's %g", j,
                    double(scores.data[j]), double(s[j]));
    ATTN_FUZZ_CHECK(same_or_both_nan(weights.data[j], w[j]), "additive: weight %zu is %g, softmax's %g", j,
                    double(weights.data[j]), double(w[j]));
  }
}

/// Part 1 for N notes of D numbers.
template <class T, std::size_t N, std::size_t D>
void fixed_against_dynamic(reader& r) {
  const std::vector<T> q = numbers<T>(r, D), notes = numbers<T>(r, N * D);
  const double beta = r.beta();
  const std::vector<char> mask_chars = r.mask(N);
  const mask_view mask(mask_chars);
  const attn::options opt{.beta = beta, .mask = mask.span(), .if_all_masked = r.policy()};
  const bool scaled = r.flag();
  attn::Vector<T, D> qf;
  attn::Matrix<T, N, D> Kf;
  for (std::size_t i = 0; i < D; ++i) qf[i] = q[i];
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t i = 0; i < D; ++i) Kf(j, i) = notes[j * D + i];
  const attn::MatrixView<const T> Kd(notes.data(), N, D);
  const auto compare = [&](const auto& score) {
    decltype(attn::attend(qf, Kf, score, opt)) fixed{};
    const int got_f = thrown([&] { fixed = attn::attend(qf, Kf, score, opt); });
    std::vector<T> s(N), w(N), c(D);
    const int got_d = thrown([&] { attn::attend(q, Kd, score, s, w, c, opt); });
    ATTN_FUZZ_CHECK(got_f == got_d, "fixed %zux%zu threw %d, dynamic %d", N, D, got_f, got_d);
    if (got_f != 0) return;
    for (std::size_t j = 0; j < N; ++j) {
      ATTN_FUZZ_CHECK(same_or_both_nan(fixed.scores[j], s[j]), "fixed %zux%zu: score %zu %g, dynamic %g", N, D, j,
                      double(fixed.scores[j]), double(s[j]));
      ATTN_FUZZ_CHECK(same_or_both_nan(fixed.weights[j], w[j]), "fixed %zux%zu: weight %zu %g, dynamic %g", N, D, j,
                      double(fixed.weights[j]), double(w[j]));
    }
    for (std::size_t i = 0; i < D; ++i)
      ATTN_FUZZ_CHECK(same_or_both_nan(fixed.context[i], c[i]), "fixed %zux%zu: context %zu %g, dynamic %g", N, D, i,
                      double(fixed.context[i]), double(c[i]));
  };
  if (scaled)
    compare(attn::scaled_dot);
  else
    compare(attn::dot);
}

template <class T>
void fixed_part(reader& r) {
  switch (r.byte() % 8) {
  case 0: fixed_against_dynamic<T, 1, 1>(r); break;
  case 1: fixed_against_dynamic<T, 2, 1>(r); break;
  case 2: fixed_against_dynamic<T, 2, 3>(r); break;
  case 3: fixed_against_dynamic<T, 3, 2>(r); break;
  case 4: fixed_against_dynamic<T, 3, 3>(r); break;
  case 5: fixed_against_dynamic<T, 5, 2>(r); break;
  case 6: fixed_against_dynamic<T, 7, 4>(r); break;
  default: fixed_against_dynamic<T, 16, 3>(r); break;
  }
}

/// Part 2: the Jacobians into a view of a larger buffer.
template <class T>
void jacobian_part(reader& r) {
  const std::size_t n = 1 + r.size_upto(20), d = 1 + r.size_upto(5), pad = r.size_upto(3);
  const std::vector<T> q = numbers<T>(r, d), notes = numbers<T>(r, n * d);
  const double beta = r.beta();
  const std::vector<char> mask_chars = r.mask(n);
  const mask_view mask(mask_chars);
  const attn::options opt{.beta = beta, .mask = mask.span(), .if_all_masked = r.policy()};
  const bool wrong = r.byte() >= 0xE0;
  const int which = r.byte() % 4;  // 0 query, 1 note, 2 key, 3 value
  const std::size_t j = r.size_upto(255) % n;
  const attn::MatrixView<const T> K(notes.data(), n, d);
  const std::size_t rows = d + (wrong ? 1 : 0), stride = d + pad;
  guarded<T> buffer(rows * stride);
  const attn::MatrixView<T> out(buffer.data.data(), rows, d, stride);
  attn::Matrix<T> returned;
  const int got_r = thrown([&] {
    switch (which) {
    case 0: returned = attn::jacobian_query(q, K, attn::dot, opt); break;
    case 1: returned = attn::jacobian_note(q, K, attn::dot, j, opt); break;
    case 2: returned = attn::jacobian_key(q, K, K, attn::dot, j, opt); break;
    default: returned = attn::jacobian_value(q, K, K, attn::dot, j, opt); break;
    }
  });
  const int got_v = thrown([&] {
    switch (which) {
    case 0: attn::jacobian_query(q, K, attn::dot, out, opt); break;
    case 1: attn::jacobian_note(q, K, attn::dot, j, out, opt); break;
    case 2: attn::jacobian_key(q, K, K, attn::dot, j, out, opt); break;
    default: attn::jacobian_value(q, K, K, attn::dot, j, out, opt); break;
    }
  });
  // a view of the wrong shape: dimension_error, unless the call refuses β first (domain_error)
  const bool as_expected = wrong ? got_v == 1 || (got_v == 2 && got_r == 2) : got_v == got_r;
  ATTN_FUZZ_CHECK(as_expected, "jacobian into a view threw %d, the returning call %d", got_v, got_r);
  if (got_v != 0) {
    ATTN_FUZZ_CHECK(buffer.untouched(), "jacobian: a throw wrote to the view");
    return;
  }
  for (std::size_t a = 0; a < rows; ++a)
    for (std::size_t b = 0; b < stride; ++b) {
      const T got = buffer.data[a * stride + b];
      if (b < d)
        ATTN_FUZZ_CHECK(same_or_both_nan(got, returned(a, b)), "jacobian (%zu, %zu) is %g in the view, %g returned", a, b,
                        double(got), double(returned(a, b)));
      else
        ATTN_FUZZ_CHECK(std::memcmp(&got, buffer.bytes.data() + (a * stride + b) * sizeof(T), sizeof(T)) == 0,
                        "jacobian wrote the padding at (%zu, %zu)", a, b);
    }
}

/// A hand-built partial result: any fields, context and values_mean of lengths the bytes pick.
template <class T>
attn::partial_attention<T> partial(reader& r, std::size_t d) {
  attn::partial_attention<T> p;
  p.max = r.template number<T>();
  p.sum = r.template number<T>();
  p.notes = r.size_upto(9);
  p.context = attn::Vector<T>(numbers<T>(r, d));
  p.has_values_mean = r.flag();
  const std::size_t dm = r.byte() >= 0xE0 ? r.size_upto(6) : d;  // now and then of another length
  p.values_mean = attn::Vector<T>(numbers<T>(r, p.has_values_mean || r.flag() ? dm : 0));
  return p;
}

template <class T>
bool same_partial(const attn::partial_attention<T>& a, const attn::partial_attention<T>& b) {
  if (!same_or_both_nan(a.max, b.max) || !same_or_both_nan(a.sum, b.sum) || a.notes != b.notes || a.has_values_mean != b.has_values_mean ||
      a.context.size() != b.context.size() || a.values_mean.size() != b.values_mean.size())
    return false;
  for (std::size_t i = 0; i < a.context.size(); ++i)
    if (!same_or_both_nan(a.context[i], b.context[i])) return false;
  for (std::size_t i = 0; i < a.values_mean.size(); ++i)
    if (!same_or_both_nan(a.values_mean[i], b.values_mean[i])) return false;
  return true;
}

/// Whether p's values_mean (read under uniform) disagrees with its context's length.
template <class T>
bool mean_disagrees(const attn::partial_attention<T>& p) {
  return p.has_values_mean && p.values_mean.size() != p.context.size();
}

/// Part 3: hand-built partial results.
template <class T>
void partial_part(reader& r) {
  const std::size_t d = r.size_upto(5);
  const attn::partial_attention<T> a = partial<T>(r, d);
  const attn::partial_attention<T> b = partial<T>(r, r.byte() >= 0xF0 ? r.size_upto(5) : d);

  // merge_into(a, a) is merge(a, a)
  attn::partial_attention<T> self = a;
  const int got_self = thrown([&] { attn::merge_into(self, self); });
  ATTN_FUZZ_CHECK(got_self == (mean_disagrees(a) ? 1 : 0), "merge_into(a, a) threw %d", got_self);
  if (got_self != 0) {
    ATTN_FUZZ_CHECK(same_partial(self, a), "merge_into(a, a): a throw changed a");
  } else {
    const attn::partial_attention<T> twice = attn::merge(a, a);
    ATTN_FUZZ_CHECK(same_partial(self, twice), "merge_into(a, a) is not merge(a, a)");
  }

  // a ⊕= b: sizes and values_mean lengths checked first, a untouched on a throw
  attn::partial_attention<T> ab = a;
  const int got_ab = thrown([&] { attn::merge_into(ab, b); });
  const bool sizes_differ = a.context.size() != b.context.size() || mean_disagrees(a) || mean_disagrees(b);
  ATTN_FUZZ_CHECK(got_ab == (sizes_differ ? 1 : 0), "merge_into(a, b) threw %d", got_ab);
  if (got_ab != 0) ATTN_FUZZ_CHECK(same_partial(ab, a), "merge_into(a, b): a throw changed a");

  // finish: a buffer of the wrong size, or a values_mean that disagrees, throws before writing
  const bool wrong = r.flag();
  const attn::options opt{.if_all_masked = r.policy()};
  guarded<T> out(a.context.size() + (wrong ? 1 : 0));
  const int got_f = thrown([&] { attn::finish(a, std::span<T>(out.data), opt); });
  if (wrong || mean_disagrees(a)) ATTN_FUZZ_CHECK(got_f == 1, "finish threw %d, expected dimension_error", got_f);
  if (got_f != 0) ATTN_FUZZ_CHECK(out.untouched(), "finish: a throw wrote to the output");
}

/// Part 4: a user's score that throws at the at-th note it scores (double).
void user_part(reader& r) {
  using test_scores::note_by_note_dot;
  using test_scores::score_failure;
  using test_scores::throwing_score;
  const std::size_t n = 1 + r.size_upto(12), d = r.size_upto(4), tq = 1 + r.size_upto(3);
  const std::vector<double> Q = numbers<double>(r, tq * d), notes = numbers<double>(r, n * d),
                            g = numbers<double>(r, d);
  const double beta = r.beta();
  const std::vector<char> mask_chars = r.mask(n);
  const mask_view mask(mask_chars);
  const attn::options opt{.beta = beta, .mask = mask.span(), .if_all_masked = r.policy()};
  const int at = 1 + static_cast<int>(r.size_upto(3 * n * tq + 2));  // beyond the calls made: no throw
  const std::span<const double> q(Q.data(), d);
  const attn::MatrixView<const double> K(notes.data(), n, d), Qm(Q.data(), tq, d);

  // Runs call(score, outputs) with a throwing score and with one that never throws: the first
  // either throws score_failure with the outputs untouched, or gives the second's bits.
  const auto check = [&](const char* what, std::vector<std::size_t> sizes, auto&& call) {
    std::vector<guarded<double>> thrown_out, plain_out;
    for (const std::size_t s : sizes) {
      thrown_out.emplace_back(s);
      plain_out.emplace_back(s);
    }
    const throwing_score throwing{.at = at};
    bool failed = false;
    int got = 0;
    try {
      got = thrown([&] { call(throwing, thrown_out); });
    } catch (const score_failure&) {
      failed = true;
    }
    if (failed) {
      for (const auto& o : thrown_out) ATTN_FUZZ_CHECK(o.untouched(), "%s: the score threw and an output changed", what);
      return;
    }
    const note_by_note_dot plain;
    const int got_plain = thrown([&] { call(plain, plain_out); });
    ATTN_FUZZ_CHECK(got == got_plain, "%s threw %d, %d without the throwing score", what, got, got_plain);
    for (std::size_t b = 0; b < sizes.size(); ++b) {
      if (got != 0) ATTN_FUZZ_CHECK(thrown_out[b].untouched(), "%s: a throw wrote to an output", what);
      for (std::size_t i = 0; i < sizes[b]; ++i)
        ATTN_FUZZ_CHECK(same_or_both_nan(thrown_out[b].data[i], plain_out[b].data[i]), "%s: output %zu[%zu] %g, %g", what, b, i,
                        thrown_out[b].data[i], plain_out[b].data[i]);
    }
  };
  // Notes of length 0: every score is 0, so the kept notes share the weight exactly, fl(1/k) each
  // (docs/attention.md), for dot, scaled_dot (not 0·(1/√0)) and the user's score alike.
  std::size_t kept = 0;
  for (std::size_t j = 0; j < n; ++j) kept += mask.kept(j) ? 1 : 0;
  if (d == 0 && kept != 0 && beta_ok<double>(beta)) {
    const auto uniform = [&](const char* what, const auto& score) {
      std::vector<double> s(n), w(n), c;
      attn::attend(q, K, score, s, w, c, opt);
      for (std::size_t j = 0; j < n; ++j) {
        ATTN_FUZZ_CHECK(s[j] == 0, "%s, d = 0: score %zu is %g", what, j, s[j]);
        ATTN_FUZZ_CHECK(w[j] == (mask.kept(j) ? 1.0 / static_cast<double>(kept) : 0.0),
                        "%s, d = 0: weight %zu is %.17g with %zu notes kept", what, j, w[j], kept);
      }
    };
    uniform("dot", attn::dot);
    uniform("scaled_dot", attn::scaled_dot);
    uniform("user's score", note_by_note_dot{});
  }
  check("attend", {n, n, d}, [&](const auto& score, std::vector<guarded<double>>& o) {
    attn::attend(q, K, score, o[0].data, o[1].data, o[2].data, opt);
  });
  check("align", {tq * n, tq * n, tq * d}, [&](const auto& score, std::vector<guarded<double>>& o) {
    attn::align(Qm, K, score, attn::MatrixView<double>(o[0].data.data(), tq, n),
                attn::MatrixView<double>(o[1].data.data(), tq, n), attn::MatrixView<double>(o[2].data.data(), tq, d), opt);
  });
  check("align_backward", {tq * n, tq * d, n * d, n * d}, [&](const auto& score, std::vector<guarded<double>>& o) {
    const attn::MatrixView<const double> G(Q.data(), tq, d);  // dL/dY: any numbers of Y's shape
    attn::align_backward(Qm, K, K, score, G,
                         attn::align_backward_views<double>{attn::MatrixView<double>(o[0].data.data(), tq, n),
                                                            attn::MatrixView<double>(o[1].data.data(), tq, d),
                                                            attn::MatrixView<double>(o[2].data.data(), n, d),
                                                            attn::MatrixView<double>(o[3].data.data(), n, d)},
                         opt);
  });
  check("backward", {n, d, n * d}, [&](const auto& score, std::vector<guarded<double>>& o) {
    attn::backward(q, K, score, g,
                   attn::notes_backward_views<double>{o[0].data, o[1].data, attn::MatrixView<double>(o[2].data.data(), n, d)},
                   opt);
  });
}

template <class T>
void run(reader& r) {
  switch (r.byte() % 5) {
  case 0: additive_part<T>(r); break;
  case 1: fixed_part<T>(r); break;
  case 2: jacobian_part<T>(r); break;
  case 3: partial_part<T>(r); break;
  default: user_part(r); break;
  }
}

}  // namespace

ATTN_FUZZ_FLOAT_OR_DOUBLE(run)
