// backward: size errors, masked and all-masked rows, accuracy near certainty, a user's score past
// the inline scratch, and backward from what the forward saved (its weights, or its weights and
// context: the one pass and its derived bound).
#include "derivatives_suite.hpp"

TEST_CASE("dynamic sizes that disagree throw and leave the outputs untouched", "[derivatives]") {
  const std::vector<double> q{0.1, 0.2};
  const Matrix<double> N{{1, 0}, {0, 1}, {1, 1}};
  std::vector<double> g3{1, 2, 3}, gs(3, 7.0), gq(2, 7.0);
  Matrix<double> gn(3, 2, 7.0);
  REQUIRE_THROWS_AS(attn::backward(q, N, attn::dot, g3, {gs, gq, gn}), attn::dimension_error);
  REQUIRE(gs[0] == 7.0);
  REQUIRE(gn(2, 1) == 7.0);
  const std::vector<double> g2{1, 2};
  Matrix<double> bad(2, 2, 7.0);
  REQUIRE_THROWS_AS(attn::backward(q, N, attn::dot, g2, {gs, gq, bad}), attn::dimension_error);
  REQUIRE(gs[0] == 7.0);
  REQUIRE_THROWS_AS(attn::jacobian_note(q, N, attn::dot, 3), attn::dimension_error);
  REQUIRE_THROWS_AS(attn::jacobian_key(q, N, N, attn::dot, 5), attn::dimension_error);
  const bool keep_none[3] = {false, false, false};
  REQUIRE_THROWS_AS(attn::backward(q, N, attn::dot, g2, {gs, gq, gn},
                                   {.mask = keep_none, .if_all_masked = attn::all_masked_policy::throw_error}),
                    attn::domain_error);
  REQUIRE(gn(0, 0) == 7.0);
}

// ---------------------------------------------------------------------------------------------
// Masks and all-masked rows
// ---------------------------------------------------------------------------------------------

TEST_CASE("masked notes get exactly zero derivatives, whatever they hold", "[derivatives][mask]") {
  constexpr double inf = std::numeric_limits<double>::infinity();
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> q{0.4, -0.3};
  const Matrix<double> N{{1, 0.5}, {nan, inf}, {-0.2, 0.8}};  // note 1 is masked and holds garbage
  const bool keep[3] = {true, false, true};
  const attn::options opt{.beta = 1.3, .mask = keep};
  const std::vector<double> g{0.7, -1.1};
  const Matrix<double> W1{{0.5, -0.3}, {0.2, 0.9}};
  const Matrix<double> W2{{1, 0}, {0.3, -0.6}};
  const Vector<double> v{0.8, -1.2};
  const Matrix<double> W{{0.4, 0.1}, {-0.5, 0.7}};
  const auto check = [&](const auto& score) {
    const auto b = attn::backward(q, N, score, g, opt);
    REQUIRE(b.notes(1, 0) == 0.0);
    REQUIRE(b.notes(1, 1) == 0.0);
    REQUIRE(b.scores[1] == 0.0);
    for (std::size_t i = 0; i < 2; ++i) {
      REQUIRE(std::isfinite(b.query[i]));
      REQUIRE(std::isfinite(b.notes(0, i)));
      REQUIRE(std::isfinite(b.notes(2, i)));
    }
    const auto J = attn::jacobian_note(q, N, score, 1, opt);
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t k = 0; k < 2; ++k) REQUIRE(J(i, k) == 0.0);
    const auto Jq = attn::jacobian_query(q, N, score, opt);
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t k = 0; k < 2; ++k) REQUIRE(std::isfinite(Jq(i, k)));
    return b;
  };
  check(attn::dot);
  check(attn::scaled_dot);
  check(neg_sq_distance{});
  const auto bg = check(attn::general<double>(W));
  for (std::size_t i = 0; i < 4; ++i) REQUIRE(std::isfinite(bg.parameters.W.data()[i]));
  const auto ba = check(attn::additive<double>(W1, W2, v));
  REQUIRE(std::isfinite(ba.parameters.v[0]));
  REQUIRE(std::isfinite(ba.parameters.W1(1, 1)));
  // softmax: a masked entry's row and column are zero; g there may be anything
  const std::vector<double> s{0.5, 2.0, -1.0};
  const auto Js = attn::softmax_jacobian(s, opt);
  for (std::size_t i = 0; i < 3; ++i) REQUIRE((Js(1, i) == 0.0 && Js(i, 1) == 0.0));
  const auto vjp = attn::softmax_vjp(s, std::vector<double>{1.0, nan, -2.0}, opt);
  REQUIRE(vjp[1] == 0.0);
  REQUIRE(std::isfinite(vjp[0]));
}

TEST_CASE("all-masked rows: zeros gives zero gradients, uniform the mean's, nan gives NaN",
          "[derivatives][mask]") {
  const std::vector<double> q{0.4, -0.3};
  const Matrix<double> N{{1, 0.5}, {0.3, -0.7}, {-0.2, 0.8}};
  const bool none[3] = {false, false, false};
  const std::vector<double> g{0.7, -1.1};
  const Matrix<double> W{{0.4, 0.1}, {-0.5, 0.7}};
  const attn::general<double> gen(W);

  SECTION("zeros: every derivative is 0, nothing NaN") {
    const attn::options opt{.beta = 2, .mask = none};
    const auto b = attn::backward(q, N, gen, g, opt);
    for (std::size_t j = 0; j < 3; ++j) {
      REQUIRE(b.scores[j] == 0.0);
      for (std::size_t i = 0; i < 2; ++i) REQUIRE(b.notes(j, i) == 0.0);
    }
    REQUIRE((b.query[0] == 0.0 && b.query[1] == 0.0));
    REQUIRE(b.parameters.W(1, 1) == 0.0);
    const auto J = attn::jacobian_note(q, N, gen, 0, opt);
    REQUIRE((J(0, 0) == 0.0 && J(1, 0) == 0.0));
    REQUIRE(attn::softmax_jacobian(std::vector<double>{1, 2, 3}, opt)(0, 0) == 0.0);
    REQUIRE(attn::softmax_vjp(std::vector<double>{1, 2, 3}, std::vector<double>{1, 2, 3}, opt)[2] == 0.0);
    // a zeros row inside align leaves the other rows' gradients as they were
    const Matrix<double> Qs{{0.4, -0.3}, {0.1, 0.9}};
    const Matrix<double> G{{0.7, -1.1}, {0.2, 0.3}};
    const auto ab = attn::align_backward(Qs, N, gen, G, opt);
    for (std::size_t i = 0; i < ab.notes.size(); ++i) REQUIRE(ab.notes.data()[i] == 0.0);
  }
  SECTION("uniform: c is the mean of the values, so dc/dv_j = I/n and nothing reaches scores, q or W") {
    const attn::options opt{.beta = 2, .mask = none, .if_all_masked = attn::all_masked_policy::uniform};
    const auto b = attn::backward(q, N, gen, g, opt);
    for (std::size_t j = 0; j < 3; ++j) {
      REQUIRE(b.scores[j] == 0.0);
      for (std::size_t i = 0; i < 2; ++i) REQUIRE_THAT(b.notes(j, i), Catch::Matchers::WithinRel(g[i] / 3, 1e-15));
    }
    REQUIRE((b.query[0] == 0.0 && b.parameters.W(0, 0) == 0.0));
    const auto J = attn::jacobian_note(q, N, gen, 1, opt);
    REQUIRE_THAT(J(0, 0), Catch::Matchers::WithinRel(1.0 / 3, 1e-15));
    REQUIRE(J(0, 1) == 0.0);
    // central differences agree: the context is the plain mean
    const auto f = [&](std::span<const double> x) { return attn::attend(q, with_row(N, 1, x), gen, opt).context; };
    REQUIRE(attn::check_jacobian(f, N.row(1), J).passed(attn::gradcheck_tolerance<double>()));
    const auto fq = [&](std::span<const double> x) { return attn::attend(x, N, gen, opt).context; };
    REQUIRE(attn::check_jacobian(fq, q, attn::jacobian_query(q, N, gen, opt)).max_abs_error == 0.0);
  }
  SECTION("nan: NaN is the answer") {
    const attn::options opt{.mask = none, .if_all_masked = attn::all_masked_policy::nan};
    const auto b = attn::backward(q, N, gen, g, opt);
    REQUIRE(std::isnan(b.notes(0, 0)));
    REQUIRE(std::isnan(attn::jacobian_note(q, N, gen, 0, opt)(0, 0)));
  }
  SECTION("every score -inf, or one +inf: the weights are fixed, so only the values get gradient") {
    constexpr double inf = std::numeric_limits<double>::infinity();
    const std::vector<double> s{1.0, inf, 2.0};
    const auto Js = attn::softmax_jacobian(s);
    for (std::size_t i = 0; i < 9; ++i) REQUIRE(Js.data()[i] == 0.0);
    REQUIRE(attn::softmax_vjp(s, std::vector<double>{1, 2, 3})[1] == 0.0);
  }
}

TEST_CASE("a weight close to 1 keeps its derivative's relative accuracy", "[derivatives]") {
  // α = softmax(0, 40): α_0 = e^-40/(1 + e^-40) ≈ 4.2e-18 and α_1 rounds to 1, yet
  // ∂α_1/∂s_1 = β α_0 α_1 is computed from Σ_{k≠1} α_k, not from 1 − α_1 (which is 0).
  const std::vector<double> s{0.0, 40.0};
  const double a0 = std::exp(-40.0) / (1 + std::exp(-40.0)), a1 = 1 / (1 + std::exp(-40.0));
  const auto J = attn::softmax_jacobian(s, {.beta = 1.0});
  REQUIRE_THAT(J(1, 1), Catch::Matchers::WithinRel(a0 * a1, 1e-14));
  REQUIRE_THAT(J(0, 0), Catch::Matchers::WithinRel(a0 * a1, 1e-14));
  const auto v = attn::softmax_vjp(s, std::vector<double>{1.0, 3.0});  // β α_1 (g_1 − ⟨g, α⟩) = 2 α_0 α_1
  REQUIRE_THAT(v[1], Catch::Matchers::WithinRel(2 * a0 * a1, 1e-14));
  // and through attention: ∂L/∂s of the dominant note
  const Vector<double, 2> q{0, 40};
  const Matrix<double, 2, 2> N{{1, 0}, {0, 1}};
  const auto b = attn::backward(q, N, attn::dot, Vector<double, 2>{1, 3});
  REQUIRE_THAT(b.scores[1], Catch::Matchers::WithinRel(2 * a0 * a1, 1e-14));
}

TEST_CASE("backward through a user's score at dynamic sizes above the inline scratch", "[derivatives]") {
  rng_t rng(7);
  const std::size_t d = 150;  // above the 128 numbers of inline scratch: the heap fallback
  const Vector<double> q = random_vector<double>(rng, d, 0.2);
  const Matrix<double> N = random_matrix<double>(rng, 3, d, 0.2);
  const Vector<double> g = random_vector<double>(rng, d, 1.0);
  const weighted_dot<double> s{std::vector<double>(d, 0.5)};
  const auto b = attn::backward(q, N, s, g, {.beta = 0.8});
  const auto fq = [&](std::span<const double> x) { return attn::attend(x, N, s, {.beta = 0.8}).context; };
  REQUIRE(attn::check_vjp(fq, q, g, b.query, "q").passed(attn::gradcheck_tolerance<double>()));
  const auto Jq = attn::jacobian_query(q, N, s, {.beta = 0.8});
  REQUIRE(attn::compare_vjp(Jq, g, b.query, "q").passed(attn::vjp_tolerance<double>()));
}

// ---------------------------------------------------------------------------------------------
// backward_from_weights: backward from the forward's weights (the small sizes of every score are
// in the suite, check_from_weights; here the sizes of the dot/scaled_dot kernel's blocks)
// ---------------------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("backward_from_weights with backward's own softmax gives backward's numbers to the bit",
                   "[derivatives][from-weights]", float, double) {
  using T = TestType;
  rng_t rng(20250101);
  const Matrix<T> W0 = random_matrix<T>(rng, 5, 5, T(0.4));
  const Matrix<T> W1 = random_matrix<T>(rng, 3, 5, T(0.4)), W2 = random_matrix<T>(rng, 3, 5, T(0.4));
  const Vector<T> v = random_vector<T>(rng, 3, T(1));
  const auto check = [&](const auto& score, std::size_t n, std::size_t d, std::size_t dv, bool masked, double beta) {
    INFO("n " << n << ", d " << d << ", dv " << dv << ", masked " << masked << ", beta " << beta);
    const auto c = make_backward_case<T>(rng, n, d, dv, masked, beta, T(0.5));
    const auto& [q, K, V, g, gd, mask, opt] = c;
    // keys ≠ values
    const Vector<T> a = attn::softmax(attn::attend(q, K, V, score, opt).scores, opt);
    const auto b = attn::backward(q, K, V, score, g, opt);
    const auto w = attn::backward_from_weights(q, K, V, score, a, g, opt);
    REQUIRE(same_bits<T>(b.scores, w.scores));
    REQUIRE(same_bits<T>(b.query, w.query));
    REQUIRE(same_bits(Matrix<T>(b.keys), Matrix<T>(w.keys)));
    REQUIRE(same_bits(Matrix<T>(b.values), Matrix<T>(w.values)));
    // notes that are keys and values
    const Vector<T> an = attn::softmax(attn::attend(q, K, score, opt).scores, opt);
    const auto bn = attn::backward(q, K, score, gd, opt);
    const auto wn = attn::backward_from_weights(q, K, score, an, gd, opt);
    REQUIRE(same_bits<T>(bn.scores, wn.scores));
    REQUIRE(same_bits<T>(bn.query, wn.query));
    REQUIRE(same_bits(Matrix<T>(bn.notes), Matrix<T>(wn.notes)));
  };
  for (const std::size_t n : {1u, 3u, 7u, 8u, 31u, 33u, 64u, 65u, 100u, 129u, 203u}) {
    for (const std::size_t d : {1u, 3u, 8u, 17u, 64u}) {
      for (const bool masked : {false, true}) {
        const double beta = masked ? 1.7 : 1.0;
        check(attn::dot, n, d, d, masked, beta);
        check(attn::scaled_dot, n, d, 5, masked, beta);
      }
    }
  }
  // the general path: scores other than dot and scaled_dot
  for (const std::size_t n : {1u, 9u, 70u}) {
    check(attn::general<T>(W0), n, 5, 5, true, 0.8);
    check(attn::additive<T>(W1, W2, v), n, 5, 4, true, 1.3);
    check(neg_sq_distance{}, n, 5, 5, false, 0.6);
  }
}

TEST_CASE("backward_from_weights: all-masked rows as backward, NaN weights NaN, weights taken as given",
          "[derivatives][from-weights][mask]") {
  const std::vector<double> q{0.4, -0.3};
  const Matrix<double> N{{1, 0.5}, {0.3, -0.7}, {-0.2, 0.8}};
  const std::vector<double> g{0.7, -1.1};
  const bool none[3] = {false, false, false};
  using attn::all_masked_policy;
  for (const auto policy : {all_masked_policy::zeros, all_masked_policy::uniform, all_masked_policy::nan}) {
    const attn::options opt{.beta = 2, .mask = none, .if_all_masked = policy};
    const auto fwd = attn::attend(q, N, attn::dot, opt);
    const auto b = attn::backward(q, N, attn::dot, g, opt);
    const auto w = attn::backward_from_weights(q, N, attn::dot, fwd.weights, g, opt);
    REQUIRE(same_bits<double>(b.scores, w.scores));
    REQUIRE(same_bits<double>(b.query, w.query));
    REQUIRE(same_bits(b.notes, w.notes));
  }
  SECTION("a NaN weight makes the score terms NaN, a weight 0 keeps its note at 0") {
    const std::vector<double> a{0.5, std::numeric_limits<double>::quiet_NaN(), 0.0};
    const auto w = attn::backward_from_weights(q, N, attn::dot, a, g);
    REQUIRE((std::isnan(w.scores[0]) && std::isnan(w.scores[1]) && std::isnan(w.query[0])));
    REQUIRE((w.scores[2] == 0.0 && w.notes(2, 0) == 0.0 && w.notes(2, 1) == 0.0));
  }
  SECTION("weights that are not this q's softmax are differentiated as given") {
    const std::vector<double> a{0.2, 0.3, 0.5};  // Σ = 1, none above 1/2
    const auto w = attn::backward_from_weights(q, N, N, attn::dot, a, g, {.beta = 2});
    const Vector<double> u = loss_by_weights(Vector<double>(g), N);
    const double ubar = a[0] * u[0] + a[1] * u[1] + a[2] * u[2];
    for (std::size_t j = 0; j < 3; ++j) {
      REQUIRE_THAT(w.scores[j], Catch::Matchers::WithinAbs(2 * a[j] * (u[j] - ubar), 1e-15));
      for (std::size_t i = 0; i < 2; ++i) REQUIRE(w.values(j, i) == a[j] * g[i]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// backward_from_forward: one pass from the forward's weights and context
// ---------------------------------------------------------------------------------------------

// The bound docs/derivatives.md ("From the forward's weights and context") derives for the one
// pass against backward (α' its softmax, α̂ and ĉ attend's, ε the type's epsilon,
// w_j = ⟨|g|, |v_j|⟩, U = Σ_k α'_k w_k, σ_j = β α'_j (U + w_j), M = max over kept notes of
// |β s_j|, b = ⌈n/64⌉ blocks):
//   ρ = (3n + d_v + b + 16 + 11 M) ε
//   |Δ ∂L/∂s_j| ≤ ρ σ_j,   |Δ ∂L/∂q_i| ≤ 2ρ f Σ_j σ_j |k_ji|,
//   |Δ ∂L/∂v_ji| ≤ ρ α'_j |g_i|,   |Δ ∂L/∂k_ji| ≤ 2ρ f σ_j |q_i|,   notes both: the sum of the two.
template <class T>
void require_from_forward_close(const Vector<T>& q, const Matrix<T>& K, const Matrix<T>* V, const Vector<T>& g,
                                const Vector<T>& s, const Vector<T>& ap, T f, const attn::options& opt,
                                const Vector<T>& bs, const Vector<T>& bq, const Matrix<T>& bk, const Matrix<T>* bv,
                                const Vector<T>& fs, const Vector<T>& fq, const Matrix<T>& fk, const Matrix<T>* fv) {
  using L = long double;
  const Matrix<T>& Vs = V != nullptr ? *V : K;
  const std::size_t n = K.rows(), dk = K.cols(), dv = Vs.cols();
  const L eps = static_cast<L>(std::numeric_limits<T>::epsilon()), beta = static_cast<L>(opt.beta);
  L M = 0;
  for (std::size_t j = 0; j < n; ++j)
    if (opt.mask.empty() || opt.mask[j]) M = std::max(M, std::fabs(beta * static_cast<L>(s[j])));
  const L rho = (3 * static_cast<L>(n) + static_cast<L>(dv) + static_cast<L>((n + 63) / 64) + 16 + 11 * M) * eps;
  std::vector<L> wj(n), sigma(n);
  L U = 0;
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t i = 0; i < dv; ++i) wj[j] += std::fabs(static_cast<L>(g[i]) * static_cast<L>(Vs(j, i)));
    U += static_cast<L>(ap[j]) * wj[j];
  }
  for (std::size_t j = 0; j < n; ++j) sigma[j] = beta * static_cast<L>(ap[j]) * (U + wj[j]);
  const L fl = static_cast<L>(f);
  for (std::size_t j = 0; j < n; ++j) {
    INFO("note " << j);
    REQUIRE(std::fabs(static_cast<L>(fs[j]) - static_cast<L>(bs[j])) <= rho * sigma[j]);
    for (std::size_t i = 0; i < dk; ++i) {
      L tol = 2 * rho * fl * sigma[j] * std::fabs(static_cast<L>(q[i]));
      if (V == nullptr) tol += rho * static_cast<L>(ap[j]) * std::fabs(static_cast<L>(g[i]));
      REQUIRE(std::fabs(static_cast<L>(fk(j, i)) - static_cast<L>(bk(j, i))) <= tol);
    }
    if (V != nullptr)
      for (std::size_t i = 0; i < dv; ++i)
        REQUIRE(std::fabs(static_cast<L>((*fv)(j, i)) - static_cast<L>((*bv)(j, i))) <=
                rho * static_cast<L>(ap[j]) * std::fabs(static_cast<L>(g[i])));
  }
  for (std::size_t i = 0; i < q.size(); ++i) {
    L scale = 0;
    for (std::size_t j = 0; j < n; ++j) scale += sigma[j] * std::fabs(static_cast<L>(K(j, i)));
    REQUIRE(std::fabs(static_cast<L>(fq[i]) - static_cast<L>(bq[i])) <= 2 * rho * fl * scale);
  }
}

TEMPLATE_TEST_CASE("backward_from_forward agrees with backward within the derived bound, and falls back "
                   "to backward_from_weights to the bit",
                   "[derivatives][from-forward]", float, double) {
  using T = TestType;
  rng_t rng(20250202);
  std::size_t one_pass = 0, fallback = 0;
  const auto check = [&](const auto& score, std::size_t n, std::size_t d, std::size_t dv, bool masked, double beta,
                         T scale) {
    INFO("n " << n << ", d " << d << ", dv " << dv << ", masked " << masked << ", beta " << beta << ", scale "
              << scale);
    using S = std::remove_cvref_t<decltype(score)>;
    const T f = std::is_same_v<S, attn::scaled_dot_score> ? T(1) / std::sqrt(static_cast<T>(d)) : T(1);
    const auto c = make_backward_case<T>(rng, n, d, dv, masked, beta, scale);
    const auto& [q, K, V, g, gd, mask, opt] = c;
    // keys ≠ values
    const auto fw = attn::attend(q, K, V, score, opt);
    const auto ff = attn::backward_from_forward(q, K, V, score, fw.weights, fw.context, g, opt);
    if (attn::detail::dominant_weight(fw.weights.data(), n) < n) {
      ++fallback;
      const auto w = attn::backward_from_weights(q, K, V, score, fw.weights, g, opt);
      REQUIRE(same_bits<T>(w.scores, ff.scores));
      REQUIRE(same_bits<T>(w.query, ff.query));
      REQUIRE(same_bits(Matrix<T>(w.keys), Matrix<T>(ff.keys)));
      REQUIRE(same_bits(Matrix<T>(w.values), Matrix<T>(ff.values)));
    } else {
      ++one_pass;
      const auto b = attn::backward(q, K, V, score, g, opt);
      const Vector<T> ap = attn::softmax(fw.scores, opt);  // backward's α, to the bit
      const Matrix<T> bk(b.keys), bv(b.values), fk(ff.keys), fv(ff.values);
      require_from_forward_close<T>(q, K, &V, g, fw.scores, ap, f, opt, b.scores, b.query, bk, &bv, ff.scores,
                                    ff.query, fk, &fv);
    }
    // notes that are keys and values
    const auto fn_ = attn::attend(q, K, score, opt);
    const auto fn1 = attn::backward_from_forward(q, K, score, fn_.weights, fn_.context, gd, opt);
    if (attn::detail::dominant_weight(fn_.weights.data(), n) < n) {
      ++fallback;
      const auto w = attn::backward_from_weights(q, K, score, fn_.weights, gd, opt);
      REQUIRE(same_bits<T>(w.scores, fn1.scores));
      REQUIRE(same_bits<T>(w.query, fn1.query));
      REQUIRE(same_bits(Matrix<T>(w.notes), Matrix<T>(fn1.notes)));
    } else {
      ++one_pass;
      const auto b = attn::backward(q, K, score, gd, opt);
      const Vector<T> ap = attn::softmax(fn_.scores, opt);
      const Matrix<T> bn(b.notes), fnn(fn1.notes);
      require_from_forward_close<T>(q, K, nullptr, gd, fn_.scores, ap, f, opt, b.scores, b.query, bn, nullptr,
                                    fn1.scores, fn1.query, fnn, nullptr);
    }
  };
  for (const std::size_t n : {1u, 3u, 7u, 8u, 33u, 64u, 65u, 129u, 1029u}) {
    for (const std::size_t d : {1u, 3u, 17u, 64u}) {
      for (const bool masked : {false, true}) {
        const double beta = masked ? 1.7 : 1.0;
        check(attn::dot, n, d, d, masked, beta, T(0.5));
        check(attn::scaled_dot, n, d, 5, masked, beta, T(0.5));
        check(attn::dot, n, d, d, masked, 3.0, T(1.5));  // sharper: some rows have a weight above 1/2
      }
    }
  }
  CHECK(one_pass > 100);  // both paths are exercised
  CHECK(fallback > 10);
}

TEST_CASE("backward_from_forward: a weight above 1/2 keeps its relative accuracy (the two-pass form)",
          "[derivatives][from-forward]") {
  // as "a weight close to 1 keeps its derivative's relative accuracy": α_1 rounds to 1, and
  // u_1 − ⟨g, c⟩ would cancel to 0; the fallback forms Σ_{k≠1} α_k (u_1 − u_k)
  const Vector<double, 2> q{0, 40};
  const Matrix<double, 2, 2> N{{1, 0}, {0, 1}};
  const Vector<double, 2> g{1, 3};
  const auto fwd = attn::attend(q, N, attn::dot);
  const auto b = attn::backward_from_forward(q, N, attn::dot, fwd.weights, fwd.context, g);
  const double a0 = std::exp(-40.0) / (1 + std::exp(-40.0)), a1 = 1 / (1 + std::exp(-40.0));
  REQUIRE_THAT(b.scores[1], Catch::Matchers::WithinRel(2 * a0 * a1, 1e-14));
  const auto w = attn::backward_from_weights(q, N, attn::dot, fwd.weights, g);
  REQUIRE(same_bits<double>(b.scores, w.scores));
  REQUIRE(same_bits<double>(b.query, w.query));
}
