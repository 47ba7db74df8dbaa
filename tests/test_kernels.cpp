// The kernel layer (attn/detail/): the row kernels against one another and against one row at a
// time. The exponential and tanh have their own files (test_exp.cpp, test_exp_fastmath.cpp).
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
