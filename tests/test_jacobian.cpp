// Jacobian matrices: fixed-size results equal to the dynamic ones (and the caller-buffer forms),
// and E7, the blame that reaches every note in one hop. The suite that checks every Jacobian
// against finite differences and its backward is derivatives_suite.hpp.
#include "derivatives_suite.hpp"

// ---------------------------------------------------------------------------------------------
// Fixed sizes: fixed-size results, the same numbers as dynamic sizes, and the caller-buffer forms
// ---------------------------------------------------------------------------------------------

TEST_CASE("fixed sizes give fixed-size Jacobians and gradients equal to the dynamic ones", "[derivatives]") {
  const Vector<double, 3> q{0.3, -0.8, 0.5};
  const Matrix<double, 4, 3> N{{1, 0.2, -0.4}, {0.1, 0.9, 0.3}, {-0.5, 0.4, 1.1}, {0.7, -0.6, 0.2}};
  const Matrix<double, 2, 3> W{{0.5, -0.2, 0.1}, {0.3, 0.8, -0.7}};
  const Vector<double, 2> q2{0.6, -0.4};
  const Vector<double, 3> g{1, -0.5, 0.25};
  const std::array<bool, 4> keep{true, false, true, true};
  const attn::options opt{.beta = 1.7, .mask = keep};
  const attn::general gen(W);

  const auto J = attn::jacobian_note(q, N, attn::dot, 2, opt);
  static_assert(std::is_same_v<decltype(J), const Matrix<double, 3, 3>>);
  const auto Jq = attn::jacobian_query(q2, N, gen, opt);
  static_assert(std::is_same_v<decltype(Jq), const Matrix<double, 3, 2>>);
  const auto Js = attn::softmax_jacobian(Vector<double, 4>{1, 2, 3, 4}, opt);
  static_assert(std::is_same_v<decltype(Js), const Matrix<double, 4, 4>>);
  const auto b = attn::backward(q2, N, gen, g, opt);
  static_assert(std::is_same_v<decltype(b.notes), Matrix<double, 4, 3>>);
  static_assert(std::is_same_v<decltype(b.query), Vector<double, 2>>);
  static_assert(std::is_same_v<decltype(b.parameters.W), Matrix<double, 2, 3>>);

  const Matrix<double> Nd(N.view());
  const Matrix<double> Wd(W.view());
  const attn::general<double> gend(Wd);
  const std::vector<double> qd(q.begin(), q.end()), q2d(q2.begin(), q2.end()), gd(g.begin(), g.end());
  const auto Jd = attn::jacobian_note(qd, Nd, attn::dot, 2, opt);
  const auto bd = attn::backward(q2d, Nd, gend, gd, opt);
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t k = 0; k < 3; ++k) REQUIRE(J(i, k) == Jd(i, k));
    for (std::size_t j = 0; j < 4; ++j) REQUIRE(b.notes(j, i) == bd.notes(j, i));
  }
  for (std::size_t i = 0; i < 2; ++i) REQUIRE(b.query[i] == bd.query[i]);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 3; ++k) REQUIRE(b.parameters.W(i, k) == bd.parameters.W(i, k));

  SECTION("the caller-buffer forms write the same numbers") {
    Matrix<double, 3, 3> Jb;
    attn::jacobian_note(q, N, attn::dot, 2, Jb.view(), opt);
    REQUIRE(Jb == J);
    std::array<double, 4> gs{};
    std::array<double, 2> gq{};
    Matrix<double, 4, 3> gn;
    Matrix<double, 2, 3> gW;  // parameter gradients accumulate: start from 0
    using views = attn::notes_backward_views<double, attn::general<double, 2, 3>::gradient_view>;
    attn::backward(q2, N, gen, g, views{gs, gq, gn.view(), {gW.view()}}, opt);
    REQUIRE(gn == b.notes);
    REQUIRE(gW == b.parameters.W);
    attn::backward(q2, N, gen, g, views{gs, gq, gn.view(), {gW.view()}}, opt);
    REQUIRE_THAT(gW(1, 2), Catch::Matchers::WithinRel(2 * b.parameters.W(1, 2), 1e-15));
  }
  SECTION("fixed shapes that disagree do not compile") {
    using Q3 = Vector<double, 3>;
    using N43 = Matrix<double, 4, 3>;
    STATIC_REQUIRE(can_jacobian_note_into<Q3, N43, attn::MatrixView<double, 3, 3>>);
    STATIC_REQUIRE_FALSE(can_jacobian_note_into<Q3, N43, attn::MatrixView<double, 2, 3>>);
    STATIC_REQUIRE(can_backward<Q3, N43, Vector<double, 3>>);
    STATIC_REQUIRE_FALSE(can_backward<Q3, N43, Vector<double, 2>>);  // ∂L/∂c must have d_v numbers
  }
  SECTION("views of fixed-size buffers that disagree throw (the views are dynamic)") {
    const Vector<double, 3> q3{0.1, 0.2, 0.3}, g3{1, 0, 0};
    const Matrix<double, 4, 3> N43{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}, {1, 1, 1}};
    std::array<double, 4> gs4{};
    std::array<double, 3> gs3{}, gq3{};
    Matrix<double, 4, 3> gn43;
    Matrix<double, 4, 2> gn42;
    REQUIRE_NOTHROW(attn::backward(q3, N43, attn::dot, g3, {gs4, gq3, gn43.view()}));
    REQUIRE_THROWS_AS(attn::backward(q3, N43, attn::dot, g3, {gs3, gq3, gn43.view()}), attn::dimension_error);
    REQUIRE_THROWS_AS(attn::backward(q3, N43, attn::dot, g3, {gs4, gq3, gn42.view()}), attn::dimension_error);
  }
}

// ---------------------------------------------------------------------------------------------
// E7: the blame reaches every note in one hop
// ---------------------------------------------------------------------------------------------

TEST_CASE("E7: dc/dh_tea on E1's numbers", "[derivatives][E7]") {
  const Vector<double, 3> q{0, 0.5, 2};
  const Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};  // I, drink, tea
  // independently: α = softmax(q·h) with std::exp, c = Σ α_j h_j = α, J = α_tea (I + (h_tea − c) qᵀ)
  const double e[3] = {std::exp(0.0), std::exp(0.5), std::exp(2.0)};
  const double sum = e[0] + e[1] + e[2];
  const double alpha[3] = {e[0] / sum, e[1] / sum, e[2] / sum};
  const double h_minus_c[3] = {-alpha[0], -alpha[1], 1 - alpha[2]};
  double expected[3][3];
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < 3; ++k) expected[i][k] = alpha[2] * ((i == k ? 1.0 : 0.0) + h_minus_c[i] * q[k]);

  const auto J = attn::jacobian_note(q, notes, attn::dot, 2);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < 3; ++k) REQUIRE_THAT(J(i, k), Catch::Matchers::WithinAbs(expected[i][k], 1e-15));
  // the unit's rounded figures
  const double unit[3][3] = {{0.7361, -0.0367, -0.1467}, {0, 0.6757, -0.2418}, {0, 0.0971, 1.1246}};
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < 3; ++k) REQUIRE_THAT(J(i, k), Catch::Matchers::WithinAbs(unit[i][k], 5e-5));
  // the α_tea·I part: "tea" gets its blame at 0.736 strength
  REQUIRE_THAT(attn::jacobian_value(q, notes, notes, attn::dot, 2)(0, 0), Catch::Matchers::WithinAbs(0.736, 5e-4));
  // and central differences agree
  const auto f = [&](std::span<const double> x) { return attn::attend(q, with_row(Matrix<double>(notes.view()), 2, x), attn::dot).context; };
  REQUIRE(attn::check_jacobian(f, notes.row(2), J, "h_tea").passed(attn::gradcheck_tolerance<double>()));
  // every note gets blame directly: no Jacobian is zero
  for (std::size_t j = 0; j < 3; ++j) REQUIRE(attn::jacobian_note(q, notes, attn::dot, j)(j, j) > 0.09);
}
