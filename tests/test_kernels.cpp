// The kernel layer (attn/detail/): the row kernels against one another and against one row at a
// time. The exponential and tanh have their own files (test_exp.cpp, test_exp_fastmath.cpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"

namespace {
// The kernels that prefetch the rows ahead (dot_rows_prefetching, add_weighted_rows_prefetching)
// against dot_rows and add_weighted_rows: a prefetch is a hint, so the numbers are the same to
// the bit, for every row count around the groups of 4 and 8 and row lengths with and without a
// vector tail. And dot_rows and dot_rows2, whose horizontal sums are shared between rows,
// against dot one row at a time: each row in dot's order, so the same bits.
template <class T>
void check_row_kernels(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1, 1);
  for (const std::size_t d : {1u, 3u, 5u, 16u, 37u, 64u, 130u}) {
    const std::size_t stride = d + 3, rows_max = 21;
    std::vector<T> H(2 * rows_max * stride), q(d), q2(d), w(rows_max);
    for (auto* v : {&H, &q, &q2, &w})
      for (auto& x : *v) x = static_cast<T>(u(rng));
    for (std::size_t n = 1; n <= rows_max; ++n) {
      const T* ahead = H.data() + n * stride;  // the n rows after the first n
      std::vector<T> plain(n), fetched(n, T(7));
      attn::detail::dot_rows(q.data(), H.data(), stride, n, d, plain.data());
      std::vector<T> by_row(n), by_row2(n);
      for (std::size_t j = 0; j < n; ++j) {
        by_row[j] = attn::detail::sum_of_products(q.data(), H.data() + j * stride, d);
        by_row2[j] = attn::detail::sum_of_products(q2.data(), H.data() + j * stride, d);
      }
      INFO("d=" << d << " n=" << n);
      // Where the build fuses, the compiler fuses each loop where it chooses (GCC's znver
      // tuning keeps some accumulator chains unfused): within the bound below, as dot_rows2.
      const auto within_fused_bound = [&](const std::vector<T>& got, const std::vector<T>& want,
                                          const std::vector<T>& a) {
        for (std::size_t j = 0; j < n; ++j) {
          double mag = 0;
          for (std::size_t i = 0; i < d; ++i)
            mag += std::abs(static_cast<double>(a[i]) * H[j * stride + i]);
          const double tol = static_cast<double>(d + 1) * std::numeric_limits<T>::epsilon();
          REQUIRE(std::abs(static_cast<double>(got[j]) - want[j]) <= tol * mag);
        }
      };
      if (!attn_test::fma_contracted())
        REQUIRE(plain == by_row);
      else
        within_fused_bound(plain, by_row, q);
      std::vector<T> pair(n, T(7)), pair2(n, T(7));
      attn::detail::dot_rows2(q.data(), q2.data(), H.data(), stride, n, d, pair.data(), pair2.data());
      if (!attn_test::fma_contracted()) {
        REQUIRE(pair == by_row);
        REQUIRE(pair2 == by_row2);
      } else {
        // The same order, but the compiler fuses the products where it chooses in each
        // function (it does differently in dot_rows2's two chains): each evaluation is within
        // γ_d·Σ_i|a_i h_ji| of the exact sum, so two differ by at most 2γ_d·Σ ≤ (d + 1)·ε·Σ.
        within_fused_bound(pair, by_row, q);
        within_fused_bound(pair2, by_row2, q2);
      }
      using attn::detail::prefetch_lines;
      for (const auto lines : {prefetch_lines::all, prefetch_lines::every_other}) {
        attn::detail::dot_rows_prefetching(q.data(), H.data(), stride, n, d, fetched.data(), ahead,
                                           lines);
        INFO("d=" << d << " n=" << n);
        REQUIRE(fetched == plain);
      }
      std::vector<T> c_plain(d, T(0.25)), c_fetched(d, T(0.25));
      attn::detail::add_weighted_rows(w.data(), H.data(), stride, n, d, c_plain.data());
      attn::detail::add_weighted_rows_prefetching(w.data(), H.data(), stride, n, d, c_fetched.data(),
                                                  ahead);
      INFO("d=" << d << " n=" << n);
      REQUIRE(c_fetched == c_plain);
      // accumulate_rows (short rows a column at a time) against its rule row by row: a group
      // of eight that all count as add_weighted_rows adds them, else each counting row by
      // axpy. Weights of 0 on rows of NaN, in some groups and not others; f = 1 and f ≠ 1.
      std::vector<T> a(n), held(H.begin(), H.begin() + static_cast<std::ptrdiff_t>(n * stride));
      for (std::size_t j = 0; j < n; ++j) {
        a[j] = (j % 7 == 3 || j == 17) ? T(0) : w[j];
        if (a[j] == T(0)) held[j * stride] = std::numeric_limits<T>::quiet_NaN();
      }
      for (const T f : {T(1), T(0.375)}) {
        std::vector<T> acc(d, T(0.25)), rule(d, T(0.25));
        attn::detail::accumulate_rows(a.data(), f, held.data(), stride, n, d, acc.data());
        std::size_t j = 0;
        for (; j + 8 <= n; j += 8) {
          std::array<T, 8> g{};
          bool all = true;
          for (std::size_t r = 0; r < 8; ++r) {
            g[r] = f == T(1) ? a[j + r] : a[j + r] * f;
            all = all && a[j + r] != T(0);
          }
          if (all) {
            attn::detail::add_weighted_rows(g.data(), held.data() + j * stride, stride, 8, d, rule.data());
          } else {
            for (std::size_t r = 0; r < 8; ++r)
              if (a[j + r] != T(0)) attn::detail::axpy(g[r], held.data() + (j + r) * stride, rule.data(), d);
          }
        }
        for (; j < n; ++j)
          if (a[j] != T(0)) attn::detail::axpy(f == T(1) ? a[j] : a[j] * f, held.data() + j * stride, rule.data(), d);
        INFO("accumulate_rows d=" << d << " n=" << n << " f=" << f);
        REQUIRE(acc == rule);
      }
    }
  }
}
}  // namespace

TEST_CASE("Row kernels: prefetching changes no number, and rows at a time are dot's", "[kernels]") {
  std::mt19937_64 rng(77);
  check_row_kernels<float>(rng);
  check_row_kernels<double>(rng);
}

namespace {
// The online softmax step's register schedule (blocks of 4 or 8 vectors without a mask) against
// its general schedule, which a mask that keeps every score selects: the same m, l, exps and
// context factor to the bit, block after block, over rows whose max rises and falls, for β = 1
// and β ≠ 1, and over blocks the register schedule declines (scores too far apart for its exp,
// ±inf, NaN), where both must still agree.
template <class T>
void check_online_registers(std::mt19937_64& rng) {
  constexpr std::size_t L = attn::detail::simd_lanes<T>;
  constexpr T inf = std::numeric_limits<T>::infinity();
  std::normal_distribution<double> normal(0, 1);
  for (const std::size_t nb : {4 * L, 8 * L})
    for (const T beta : {T(1), T(2.5), T(-0.75)})
      for (int kind = 0; kind < 6; ++kind) {
        const std::vector<attn::detail::mask_byte> keep(nb, 1);
        attn::detail::online_state<T> a, b;
        for (int block = 0; block < 6; ++block) {
          std::vector<T> s(nb);
          const double spread = kind == 1 ? 60 : (block % 3 == 1 ? 4 : 1);
          for (auto& x : s) x = static_cast<T>(normal(rng) * spread + block % 4);
          if (kind == 2 && block == 3) s[5] = inf;
          if (kind == 3 && block == 2) s[nb - 1] = -inf;
          if (kind == 4 && block == 4) s[7] = std::numeric_limits<T>::quiet_NaN();
          if (kind == 5 && block == 1) std::fill(s.begin(), s.end(), -inf);
          std::vector<T> ea(nb, T(7)), eb(nb, T(9));
          const auto ra = attn::detail::online_softmax_step(a, s.data(), nb, beta, nullptr, ea.data());
          const auto rb = attn::detail::online_softmax_step(b, s.data(), nb, beta, keep.data(), eb.data());
          INFO("nb = " << nb << ", beta = " << beta << ", kind " << kind << ", block " << block);
          REQUIRE(ra.ok == rb.ok);
          if (!ra.ok) break;
          REQUIRE(ra.kept_any == rb.kept_any);
          REQUIRE(ra.factor == rb.factor);
          REQUIRE(a.m == b.m);
          REQUIRE(a.l == b.l);
          REQUIRE(ea == eb);
        }
      }
}

// The tiled kernel's pieces: Kᵀ packed by shuffles is Kᵀ exactly, every key length and block
// size around whole squares of lanes; weighted_rows_tile (MR rows' contexts at once, each
// column summed in order of the keys) against accumulate_rows, the home of Σ_j e_j v_j, row by
// row: two orders of the same n + 1 terms (the rescaled context and n products), so within
// 2γ_{n+1}·(|c|·ρ + Σ_j e_j |v_j|) of each other.
template <class T>
void check_tile_pieces(std::mt19937_64& rng) {
  using shape = attn::detail::tile_shape<T>;
  std::uniform_real_distribution<double> u(-1, 1);
  for (const std::size_t dk : {1u, 7u, 16u, 33u, 64u, 72u})
    for (const std::size_t nb : {1u, 9u, 16u, 40u, 64u}) {
      std::vector<T> K((nb + 3) * (dk + 2));
      for (auto& x : K) x = static_cast<T>(u(rng));
      const attn::detail::tile_matrix<const T> km{K.data(), nb + 3, dk, dk + 2};
      const std::size_t NB = (nb + shape::NR - 1) / shape::NR * shape::NR;
      std::vector<T> kp(dk * NB, T(7));
      attn::detail::pack_keys(km, 3, nb, NB, kp.data());
      INFO("dk = " << dk << ", nb = " << nb);
      for (std::size_t i = 0; i < dk; ++i)
        for (std::size_t c = 0; c < NB; ++c) REQUIRE(kp[i * NB + c] == (c < nb ? km.row(3 + c)[i] : T(0)));
    }
  const std::size_t MR = shape::MR;
  for (const std::size_t dv : {1u, 5u, 16u, 64u, 70u})
    for (const std::size_t n : {1u, 8u, 13u, 64u})
      for (std::size_t mr = 1; mr <= MR; ++mr) {
        const std::size_t es = n + 2, vs = dv + 1, os = dv + 3;
        std::vector<T> E(MR * es), V(n * vs), O(MR * os), rescale(MR);
        for (auto* v : {&E, &V, &O, &rescale})
          for (auto& x : *v) x = static_cast<T>(u(rng));
        // the weights row by row (E) and as columns (Et: w_rj at r + j·(MR + 1)), with and
        // without the rescaling
        std::vector<T> Et(n * (MR + 1));
        for (std::size_t r = 0; r < MR; ++r)
          for (std::size_t j = 0; j < n; ++j) Et[r + j * (MR + 1)] = E[r * es + j];
        const bool rows_layout = (n + mr) % 2 == 0, rescaled = n % 3 != 1;
        const attn::detail::tile_weights<T> w{rows_layout ? E.data() : Et.data(), rows_layout ? es : 1,
                                              rows_layout ? 1 : MR + 1};
        if (!rescaled) std::fill(rescale.begin(), rescale.end(), T(1));
        std::vector<T> tiled = O;
        attn::detail::weighted_rows_tile(w, mr, n, V.data(), vs, dv, tiled.data(), os,
                                         rescaled ? rescale.data() : nullptr);
        for (std::size_t r = 0; r < MR; ++r) {
          INFO("dv = " << dv << ", n = " << n << ", mr = " << mr << ", row " << r);
          if (r >= mr) {  // rows past mr are left alone
            for (std::size_t i = 0; i < dv; ++i) REQUIRE(tiled[r * os + i] == O[r * os + i]);
            continue;
          }
          std::vector<T> want(dv);
          for (std::size_t i = 0; i < dv; ++i) want[i] = O[r * os + i] * rescale[r];
          attn::detail::accumulate_rows(E.data() + r * es, T(1), V.data(), vs, n, dv, want.data());
          const long double gamma = 2.0L * static_cast<long double>(n + 2) * std::numeric_limits<T>::epsilon();
          for (std::size_t i = 0; i < dv; ++i) {
            long double mag = std::abs(static_cast<long double>(O[r * os + i]) * rescale[r]);
            for (std::size_t j = 0; j < n; ++j)
              mag += std::abs(static_cast<long double>(E[r * es + j]) * V[j * vs + i]);
            REQUIRE(std::abs(static_cast<long double>(tiled[r * os + i]) - want[i]) <= gamma * mag);
          }
        }
      }
}
}  // namespace

TEST_CASE("The online softmax step in registers gives its general schedule's bits", "[kernels][online]") {
  std::mt19937_64 rng(2105);
  check_online_registers<float>(rng);
  check_online_registers<double>(rng);
}

TEST_CASE("The tiled kernel's packing is Kᵀ and its weighted rows are accumulate_rows' sums", "[kernels][tile]") {
  std::mt19937_64 rng(2106);
  check_tile_pieces<float>(rng);
  check_tile_pieces<double>(rng);
  check_tile_pieces<long double>(rng);
}

TEMPLATE_TEST_CASE("multiply_first_transposed into columns writes Aᵀ B transposed, its bits exactly",
                   "[kernels][layouts]", float, double, long double) {
  // ∂L/∂W for a weight stored as PyTorch's out × in: 300 columns of B (two chunks of 256), rows
  // of A past a chunk too, a row of B all 0 whose row of A holds NaN (it contributes nothing),
  // overwritten and then accumulated
  using T = TestType;
  std::mt19937_64 rng(17);
  std::normal_distribution<double> normal(0, 1);
  const std::size_t r = 260, m = 3, p = 300;
  std::vector<T> A(r * m), B(r * p);
  for (auto& x : A) x = static_cast<T>(normal(rng));
  for (auto& x : B) x = static_cast<T>(normal(rng));
  A[7 * m + 1] = std::numeric_limits<T>::quiet_NaN();
  std::fill_n(B.begin() + 7 * static_cast<std::ptrdiff_t>(p), p, T(0));
  const attn::detail::tile_matrix<const T> a{A.data(), r, m, m}, b{B.data(), r, p, p};
  std::vector<T> C(m * p, T(0.25)), Ct(p * m, T(0.25));
  for (const bool accumulate : {false, true}) {
    attn::detail::multiply_first_transposed(a, b, attn::detail::tile_matrix<T>{C.data(), m, p, p}, accumulate);
    attn::detail::multiply_first_transposed(
        a, b, attn::detail::stored_matrix<T>{{Ct.data(), p, m, m}, true}, accumulate);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < p; ++j) {
        REQUIRE(std::isfinite(static_cast<double>(C[i * p + j])));
        REQUIRE(Ct[j * m + i] == C[i * p + j]);
      }
  }
}
