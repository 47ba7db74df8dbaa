// docs/derivatives.md: each example on that page is the body of one test case here, verbatim.
#include "derivatives_suite.hpp"
#include "doc_snippets.hpp"

// ---------------------------------------------------------------------------------------------
// docs/derivatives.md: each example there is one of these test cases, verbatim
// ---------------------------------------------------------------------------------------------

TEST_CASE("docs/derivatives.md: every example is the body of a test case here", "[derivatives][docs]") {
  const std::string page = attn_test::file_text(attn_test::document_path(__FILE__, "docs/derivatives.md"));
  const std::string self = attn_test::file_text(__FILE__);
  REQUIRE(!page.empty());
  std::size_t examples = 0;
  for (const std::string& block : attn_test::code_blocks(page, "cpp", "  ")) {
    if (block.find("// ...") != std::string::npos) continue;  // an excerpt of a longer type
    ++examples;
    INFO(block);
    CHECK(self.find(block) != std::string::npos);
  }
  REQUIRE(examples >= 9);
}

TEST_CASE("docs/derivatives.md: the Jacobian of a note", "[derivatives][docs]") {
  // ∂c/∂h_j = α_j (I + β (h_j − c) g_jᵀ); for dot, g_j = q
  const attn::Vector<double, 3> q{0, 0.5, 2};
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double, 3, 3> J = attn::jacobian_note(q, notes, attn::dot, 2);  // "tea"
  // J(0, 0) = α_tea (1 + (0 − α_I)·0) = 0.7361
  REQUIRE_THAT(J(0, 0), Catch::Matchers::WithinAbs(0.7361, 5e-5));
}

TEST_CASE("docs/derivatives.md: keys and values apart", "[derivatives][docs]") {
  // ∂c/∂k_j = β α_j (v_j − c) g_jᵀ and ∂c/∂v_j = α_j I
  const attn::Vector<double, 2> q{1, -1};
  const attn::Matrix<double, 2, 2> keys{{1, 0}, {0, 1}};
  const attn::Matrix<double, 2, 3> values{{1, 2, 3}, {0, 0, 0}};
  const attn::options opt{.beta = 2};
  const auto Jk = attn::jacobian_key(q, keys, values, attn::dot, 0, opt);    // 3×2
  const auto Jv = attn::jacobian_value(q, keys, values, attn::dot, 0, opt);  // 3×3
  // s = (1, −1), α_0 = 1/(1 + e^−4); v_0 − c = (1 − α_0)·(1, 2, 3); g_0 = q
  const double a0 = 1 / (1 + std::exp(-4.0));
  REQUIRE_THAT(Jk(2, 0), Catch::Matchers::WithinRel(2 * a0 * (1 - a0) * 3 * 1, 1e-12));
  REQUIRE_THAT(Jv(1, 1), Catch::Matchers::WithinRel(a0, 1e-15));
}

TEST_CASE("docs/derivatives.md: the Jacobian of the query", "[derivatives][docs]") {
  // ∂c/∂q = β Σ_j α_j (v_j − c)(∂s_j/∂q)ᵀ; for general, ∂s_j/∂q = W h_j
  const attn::Matrix<double, 2, 3> W{{1, 0, 0}, {0, 1, 0}};
  const attn::general score(W);
  const attn::Vector<double, 2> q{0.5, -0.5};
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const auto Jq = attn::jacobian_query(q, notes, score, {.beta = 1.5});  // 3×2
  // the third note's score does not depend on q (W h_3 = 0), the first two do
  const auto a = attn::attend(q, notes, score, {.beta = 1.5}).weights;
  REQUIRE_THAT(Jq(0, 0), Catch::Matchers::WithinRel(1.5 * a[0] * (1 - a[0]), 1e-12));
}

TEST_CASE("docs/derivatives.md: the softmax Jacobian and its product", "[derivatives][docs]") {
  // ∂α/∂s = β (diag α − α αᵀ); ∂L/∂s = β α ⊙ (g − ⟨g, α⟩)
  const std::vector<double> s{0, 0.5, 2};
  const bool keep[3] = {true, false, true};
  const attn::options opt{.beta = 2, .mask = keep};
  const attn::Matrix<double> J = attn::softmax_jacobian(s, opt);  // row 1 and column 1 are 0
  const attn::Vector<double> v = attn::softmax_vjp(s, std::vector<double>{1, 5, 0}, opt);
  const double a0 = 1 / (1 + std::exp(4.0));
  REQUIRE_THAT(J(0, 2), Catch::Matchers::WithinRel(-2 * a0 * (1 - a0), 1e-12));
  REQUIRE(J(1, 1) == 0);
  REQUIRE_THAT(v[0], Catch::Matchers::WithinRel(2 * a0 * (1 - a0), 1e-12));  // g − ⟨g,α⟩ = 1 − α_0
}

TEST_CASE("docs/derivatives.md: backward for training", "[derivatives][docs]") {
  // From g = ∂L/∂c: ∂L/∂q, ∂L/∂h_j and ∂L/∂W at O(n·d + d_q·d_h), no Jacobian formed
  const attn::Matrix<double, 2, 3> W{{0.5, -0.2, 0.1}, {0.3, 0.8, -0.7}};
  const attn::general score(W);
  const attn::Vector<double, 2> q{0.6, -0.4};
  const attn::Matrix<double, 4, 3> notes{{1, 0.2, -0.4}, {0.1, 0.9, 0.3}, {-0.5, 0.4, 1.1}, {0.7, -0.6, 0.2}};
  const attn::Vector<double, 3> g{1, -0.5, 0.25};  // ∂L/∂c
  const auto grads = attn::backward(q, notes, score, g, {.beta = 2});
  // grads.scores (4), grads.query (2), grads.notes (4×3), grads.parameters.W (2×3)
  // Jᵀg from the Jacobians gives the same numbers:
  const auto Jq = attn::jacobian_query(q, notes, score, {.beta = 2});
  REQUIRE(attn::compare_vjp(Jq, g, grads.query).passed(attn::vjp_tolerance<double>()));
  // and so do central differences of L(W) = ⟨g, c(W)⟩:
  const auto L = [&](std::span<const double> w) {
    const attn::Matrix<double> W2(attn::MatrixView<const double>(w.data(), 2, 3));
    return attn::attend(q, notes, attn::general(W2), {.beta = 2}).context;
  };
  const std::vector<double> w(W.data(), W.data() + 6);
  const std::vector<double> dW(grads.parameters.W.data(), grads.parameters.W.data() + 6);
  REQUIRE(attn::check_vjp(L, w, g, dW, "W").passed(attn::gradcheck_tolerance<double>()));
}

TEST_CASE("docs/derivatives.md: backward into caller buffers", "[derivatives][docs]") {
  // no allocation: every output is the caller's; parameter gradients accumulate over a batch
  const attn::Matrix<double> W1{{1, 0}, {0, 1}}, W2{{1, 0}, {0, 1}};
  const attn::Vector<double> v{1, 1};
  const attn::additive score(W1, W2, v);  // E5's score
  const attn::Matrix<double> notes{{1, 0}, {0, 1}, {1, 1}};
  const attn::Matrix<double> batch{{0.5, -0.5}, {0.1, 0.2}};  // two queries
  std::vector<double> g{1, 0};
  std::vector<double> dscores(3), dq(2);
  attn::Matrix<double> dnotes(3, 2), dW1(2, 2), dW2(2, 2);
  attn::Vector<double> dv(2);
  const attn::notes_backward_views<double, attn::additive<double>::gradient_view> out{
      dscores, dq, dnotes.view(), {dW1.view(), dW2.view(), dv}};
  for (std::size_t t = 0; t < batch.rows(); ++t) attn::backward(batch.row(t), notes, score, g, out);
  // dW1, dW2, dv now hold the sum over the batch; dq and dnotes the last query's
  const auto one = attn::backward(batch.row(0), notes, score, g);
  const auto two = attn::backward(batch.row(1), notes, score, g);
  REQUIRE_THAT(dv[0], Catch::Matchers::WithinRel(one.parameters.v[0] + two.parameters.v[0], 1e-14));
  REQUIRE(dq[1] == two.query[1]);
}

TEST_CASE("docs/derivatives.md: backward from the forward's weights", "[derivatives][docs]") {
  // autograd style: keep attend's weights, and backward forms no score and no softmax
  const attn::Matrix<double> notes{{1, 0.2, -0.4}, {0.1, 0.9, 0.3}, {-0.5, 0.4, 1.1}, {0.7, -0.6, 0.2}};
  const std::vector<double> q{0.6, -0.4, 0.3}, g{1, -0.5, 0.25};  // g = ∂L/∂c
  const auto fwd = attn::attend(q, notes, attn::dot, {.beta = 2});
  std::vector<double> dscores(4), dq(3);
  attn::Matrix<double> dnotes(4, 3);
  attn::backward(q, notes, attn::dot, attn::saved_forward<double>{fwd.weights}, g, {dscores, dq, dnotes.view()},
                 {.beta = 2});
  // backward recomputes α; from the same weights the two agree (to the bit when α is the softmax
  // backward forms, attn::softmax of fwd.scores)
  const auto b = attn::backward(q, notes, attn::dot, g, {.beta = 2});
  for (std::size_t j = 0; j < 4; ++j) REQUIRE_THAT(dscores[j], Catch::Matchers::WithinAbs(b.scores[j], 1e-15));
  REQUIRE_THAT(dq[2], Catch::Matchers::WithinRel(b.query[2], 1e-14));
}

TEST_CASE("docs/derivatives.md: many queries", "[derivatives][docs]") {
  // align_backward: ∂L/∂C (T×d_v) → ∂L/∂Q (T×d_q), ∂L/∂H summed over the queries
  const attn::Matrix<double, 2, 3> queries{{0, 0.5, 2}, {2, 0, 0}};
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Matrix<double, 2, 3> dC{{0, 0, 1}, {1, 0, 0}};
  const auto grads = attn::align_backward(queries, notes, attn::dot, dC);
  const auto row0 = attn::backward(queries.row(0), notes, attn::dot, dC.row(0));
  const auto row1 = attn::backward(queries.row(1), notes, attn::dot, dC.row(1));
  REQUIRE(grads.queries(0, 2) == row0.query[2]);
  REQUIRE_THAT(grads.notes(2, 2), Catch::Matchers::WithinRel(row0.notes(2, 2) + row1.notes(2, 2), 1e-14));
}

TEST_CASE("docs/derivatives.md: checking a derivative", "[derivatives][docs]") {
  // any function from a vector to a vector, any analytic Jacobian or backward
  const attn::Vector<double, 3> q{0, 0.5, 2};
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const auto f = [&](std::span<const double> x) {  // c as a function of q
    return attn::attend(x, notes, attn::dot, {.beta = 2}).context;
  };
  const auto J = attn::jacobian_query(q, notes, attn::dot, {.beta = 2});
  const attn::gradcheck_report<double> r = attn::check_jacobian(f, q, J, "q");
  // r.max_abs_error, r.max_rel_error, r.worst_rel.{input, output, index}
  REQUIRE(r.passed(attn::gradcheck_tolerance<double>()));  // 1e-7 in double
  REQUIRE(r.worst_rel.input == "q");
}
