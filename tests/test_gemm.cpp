// The matrix product (detail/gemm.hpp): C = A·B and C += A·B against the sums in long double, for
// shapes across every block edge of this build's blocking (MR, NR, KC, MC, NC and one past each),
// A and B through any strides (transposed), C row- or column-major; and its promise of a fixed
// order: a row or a column of C computed alone, or on threads, or into a column-major C, has the
// bits of the whole one-thread call. Tolerance: an entry sums k products, so it is within
// (k + 2)·ε·Σ_k |a_ik b_kj| of the exact sum (plus the old C when accumulating).
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "attn/detail/gemm.hpp"
#include "attn_catch.hpp"

using ld = long double;
using attn::detail::gemm_matrix;

namespace {

template <class T>
std::vector<T> random_numbers(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0, 1);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(normal(rng));
  return v;
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T) > 10 ? 10 : sizeof(T)) == 0;
}

// A (m × k) stored row-major or as its transpose; B (k × n) likewise; C (m × n) row-major.
template <class T>
struct product_case {
  std::size_t m, n, k;
  bool ta, tb;
  std::vector<T> A, B;
  gemm_matrix<const T> a() const { return ta ? gemm_matrix<const T>{A.data(), 1, m} : gemm_matrix<const T>{A.data(), k, 1}; }
  gemm_matrix<const T> b() const { return tb ? gemm_matrix<const T>{B.data(), 1, k} : gemm_matrix<const T>{B.data(), n, 1}; }
  T at_a(std::size_t i, std::size_t p) const { return ta ? A[p * m + i] : A[i * k + p]; }
  T at_b(std::size_t p, std::size_t j) const { return tb ? B[j * k + p] : B[p * n + j]; }
};

// The largest error of C against the sums in long double, over its bound: ≤ 1 passes. (One
// CHECK per product: hundreds of thousands of entries.)
template <class T>
ld worst_against_long_double(const product_case<T>& c, const std::vector<T>& C, const std::vector<T>& before,
                             bool accumulate) {
  const ld e = static_cast<ld>(std::numeric_limits<T>::epsilon());
  ld worst = 0;
  for (std::size_t i = 0; i < c.m; ++i)
    for (std::size_t j = 0; j < c.n; ++j) {
      ld sum = accumulate ? static_cast<ld>(before[i * c.n + j]) : 0, mag = std::abs(sum);
      for (std::size_t p = 0; p < c.k; ++p) {
        const ld t = static_cast<ld>(c.at_a(i, p)) * static_cast<ld>(c.at_b(p, j));
        sum += t;
        mag += std::abs(t);
      }
      const ld err = std::abs(static_cast<ld>(C[i * c.n + j]) - sum), bound = static_cast<ld>(c.k + 2) * e * mag;
      if (!(err <= bound)) return std::numeric_limits<ld>::infinity();  // (NaN too)
      if (bound > 0) worst = std::max(worst, err / bound);
    }
  return worst;
}

}  // namespace

TEMPLATE_TEST_CASE("gemm: C = A B and C += A B across every block edge, any strides", "[kernels][gemm]", float,
                   double, long double) {
  using T = TestType;
  using G = attn::detail::gemm_blocking<T>;
  std::mt19937_64 rng(121);
  const std::size_t ms[] = {1, G::MR - 1, G::MR + 1, G::MC + 1}, ns[] = {1, G::NR - 1, 2 * G::NR + 3},
                    ks[] = {0, 1, G::KC + 1};
  for (const std::size_t m : ms)
    for (const std::size_t n : ns)
      for (const std::size_t k : ks)
        for (int t = 0; t < 4; ++t) {
          product_case<T> c{m, n, k, (t & 1) != 0, (t & 2) != 0, random_numbers<T>(m * k, rng), random_numbers<T>(k * n, rng)};
          std::vector<T> C(m * n, T(7)), before = random_numbers<T>(m * n, rng), D = before;
          INFO(m << " x " << n << ", k = " << k << (c.ta ? ", A transposed" : "") << (c.tb ? ", B transposed" : ""));
          attn::detail::gemm<T>(m, n, k, c.a(), c.b(), {C.data(), n, 1}, false);
          CHECK(worst_against_long_double(c, C, before, false) <= 1);
          attn::detail::gemm<T>(m, n, k, c.a(), c.b(), {D.data(), n, 1}, true);
          CHECK(worst_against_long_double(c, D, before, true) <= 1);
        }
}

TEMPLATE_TEST_CASE("gemm: large blocks (NC and several KC and MC blocks)", "[kernels][gemm]", float, double) {
  // two blocks of each size; the entries on both sides of every block edge against long double
  using T = TestType;
  using G = attn::detail::gemm_blocking<T>;
  std::mt19937_64 rng(122);
  const std::size_t m = G::MC + 3, n = G::NC + 5, k = G::KC + 9;
  product_case<T> c{m, n, k, false, true, random_numbers<T>(m * k, rng), random_numbers<T>(k * n, rng)};
  std::vector<T> C(m * n);
  attn::detail::gemm<T>(m, n, k, c.a(), c.b(), {C.data(), n, 1}, false);
  const ld e = static_cast<ld>(std::numeric_limits<T>::epsilon());
  for (const std::size_t i : {std::size_t{0}, G::MR - 1, G::MR, G::MC - 1, G::MC, m - 1})
    for (const std::size_t j : {std::size_t{0}, G::NR - 1, G::NR, G::NC - 1, G::NC, n - 1}) {
      ld sum = 0, mag = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const ld t = static_cast<ld>(c.at_a(i, p)) * static_cast<ld>(c.at_b(p, j));
        sum += t;
        mag += std::abs(t);
      }
      INFO("(" << i << ", " << j << ")");
      CHECK(std::abs(static_cast<ld>(C[i * n + j]) - sum) <= static_cast<ld>(k + 2) * e * mag);
    }
}

TEMPLATE_TEST_CASE("gemm: the same bits for a row or column alone, on threads, and into a column-major C",
                   "[kernels][gemm][threads]", float, double, long double) {
  using T = TestType;
  using G = attn::detail::gemm_blocking<T>;
  if (attn::detail::gemm_uses_cblas && !std::is_same_v<T, long double>) {
    WARN("ATTN_USE_CBLAS: float and double products are the BLAS's, whose order is its own");
    return;
  }
  std::mt19937_64 rng(123);
  const std::size_t m = 2 * G::MR + 5, n = 3 * G::NR + 7, k = G::KC + 11;
  product_case<T> c{m, n, k, false, false, random_numbers<T>(m * k, rng), random_numbers<T>(k * n, rng)};
  const std::vector<T> before = random_numbers<T>(m * n, rng);
  for (const bool accumulate : {false, true}) {
    std::vector<T> whole = before;
    attn::detail::gemm<T>(m, n, k, c.a(), c.b(), {whole.data(), n, 1}, accumulate);
    // each row alone (A's row i, C's row i)
    for (std::size_t i = 0; i < m; i += 5) {
      std::vector<T> row(before.begin() + static_cast<std::ptrdiff_t>(i * n), before.begin() + static_cast<std::ptrdiff_t>((i + 1) * n));
      attn::detail::gemm<T>(1, n, k, {c.A.data() + i * k, k, 1}, c.b(), {row.data(), n, 1}, accumulate);
      std::size_t differ = 0;
      for (std::size_t j = 0; j < n; ++j) differ += same_bits(row[j], whole[i * n + j]) ? 0 : 1;
      CHECK(differ == 0);
    }
    // each column alone
    for (std::size_t j = 0; j < n; j += 7) {
      std::vector<T> col(m);
      for (std::size_t i = 0; i < m; ++i) col[i] = before[i * n + j];
      attn::detail::gemm<T>(m, 1, k, c.a(), {c.B.data() + j, n, 1}, {col.data(), 1, 1}, accumulate);
      std::size_t differ = 0;
      for (std::size_t i = 0; i < m; ++i) differ += same_bits(col[i], whole[i * n + j]) ? 0 : 1;
      CHECK(differ == 0);
    }
    // on 2, 3 and 64 threads, and SIZE_MAX
    for (const std::size_t threads : {std::size_t{2}, std::size_t{3}, std::size_t{64}, ~std::size_t{0}}) {
      std::vector<T> on = before;
      attn::detail::gemm<T>(m, n, k, c.a(), c.b(), {on.data(), n, 1}, accumulate, threads);
      std::size_t differ = 0;
      for (std::size_t q = 0; q < on.size(); ++q) differ += same_bits(on[q], whole[q]) ? 0 : 1;
      CHECK(differ == 0);
    }
    // into a column-major C (Cᵀ = Bᵀ Aᵀ: the same sums)
    std::vector<T> cm(m * n);
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) cm[j * m + i] = before[i * n + j];
    attn::detail::gemm<T>(m, n, k, c.a(), c.b(), {cm.data(), 1, m}, accumulate);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) differ += same_bits(cm[j * m + i], whole[i * n + j]) ? 0 : 1;
    CHECK(differ == 0);
  }
}
