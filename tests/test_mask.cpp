// Masks (attn/mask.hpp): one row of them borrowed from any range of bool, char, signed char or
// unsigned char, copied from a std::vector<bool>; nonzero keeps. Every kind gives the bits a bool
// mask gives.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"

using attn::Matrix;
using attn::mask_view;

// What a mask may be made from, and what it may not (a string's '0' is nonzero; ints convert).
static_assert(std::is_convertible_v<const std::array<bool, 3>&, mask_view>);
static_assert(std::is_convertible_v<const std::vector<std::uint8_t>&, mask_view>);
static_assert(std::is_convertible_v<const std::vector<char>&, mask_view>);
static_assert(std::is_convertible_v<const signed char (&)[4], mask_view>);
static_assert(std::is_convertible_v<std::span<const bool>, mask_view>);
static_assert(std::is_convertible_v<std::span<unsigned char, 2>, mask_view>);
static_assert(std::is_convertible_v<const std::vector<bool>&, mask_view>);
static_assert(!std::is_convertible_v<const std::string&, mask_view>);
static_assert(!std::is_convertible_v<std::string_view, mask_view>);
static_assert(!std::is_convertible_v<const std::vector<int>&, mask_view>);
static_assert(!std::is_convertible_v<const std::vector<float>&, mask_view>);

// Read in constant expressions, whatever it was made from.
static_assert([] {
  constexpr std::array<bool, 3> b{true, false, true};
  constexpr std::array<char, 3> c{0, 7, -1};
  const mask_view mb(b), mc(c);
  return mb.size() == 3 && mb[0] && !mb[1] && !mc[0] && mc[1] && mc[2];
}());

TEST_CASE("Masks from every kind of container keep the same notes, to the bit", "[mask]") {
  const Matrix<double> notes{{1, 0}, {0, 1}, {1, 1}, {-1, 0.5}, {2, -1}};
  const std::vector<double> q{0.7, -0.3};
  const std::array<bool, 5> keep{true, false, true, true, false};
  const auto want = attn::attend(q, notes, attn::scaled_dot, {.beta = 1.5, .mask = keep});
  REQUIRE(want.weights[1] == 0.0);

  const auto same = [&](const attn::options& opt) {
    const auto r = attn::attend(q, notes, attn::scaled_dot, opt);
    return r.weights == want.weights && r.context == want.context;
  };
  const std::vector<std::uint8_t> bytes{1, 0, 255, 2, 0};  // nonzero keeps
  const std::vector<char> chars{'x', 0, 1, -1, 0};
  const signed char schars[5] = {-128, 0, 1, 127, 0};
  const std::vector<bool> bits{true, false, true, true, false};
  CHECK(same({.beta = 1.5, .mask = bytes}));
  CHECK(same({.beta = 1.5, .mask = chars}));
  CHECK(same({.beta = 1.5, .mask = schars}));
  CHECK(same({.beta = 1.5, .mask = bits}));
  CHECK(same({.beta = 1.5, .mask = std::span<const bool>(keep)}));

  // softmax, log_softmax, logsumexp and backward read the same entries
  const std::vector<double> x{0.5, 3, -1, 2, 9};
  std::vector<double> a(5), b(5);
  attn::softmax(x, a, {.mask = keep});
  attn::softmax(x, b, {.mask = bytes});
  CHECK(a == b);
  attn::log_softmax(x, a, {.mask = keep});
  attn::log_softmax(x, b, {.mask = bits});
  CHECK(a == b);
  CHECK(attn::logsumexp(x, {.mask = keep}) == attn::logsumexp(x, {.mask = chars}));
  const std::vector<double> g{1, -2};
  const auto gb = attn::backward(q, notes, attn::dot, g, {.mask = keep});
  const auto gc = attn::backward(q, notes, attn::dot, g, {.mask = schars});
  CHECK(gb.notes == gc.notes);
  CHECK(gb.query == gc.query);
}

TEST_CASE("A mask copied from a std::vector<bool> owns its entries", "[mask]") {
  attn::options kept;
  {
    const std::vector<bool> bits{false, true, true};
    const attn::options opt{.mask = bits};
    kept = opt;  // a copy: its own entries, not the original's
  }
  attn::options moved = std::move(kept);
  const attn::options copied = moved;
  REQUIRE(copied.mask.size() == 3);
  std::vector<double> w(3);
  attn::softmax(std::vector<double>{5, 1, 1}, w, copied);
  CHECK(w[0] == 0.0);
  CHECK(w[1] == 0.5);
  CHECK(w[2] == 0.5);
}

TEST_CASE("A moved-from mask that owned its entries is empty, not dangling", "[mask]") {
  const std::vector<bool> bits{false, true, true, false};
  attn::mask_view owner = bits;
  attn::mask_view taken = std::move(owner);
  CHECK(owner.empty());  // NOLINT(bugprone-use-after-move): the state it is left in is the point
  REQUIRE(taken.size() == 4);
  CHECK((!taken[0] && taken[1] && taken[2] && !taken[3]));
  attn::mask_view assigned;
  assigned = std::move(taken);
  CHECK(taken.empty());  // NOLINT(bugprone-use-after-move)
  CHECK((assigned.size() == 4 && assigned[1] && !assigned[3]));
  const attn::mask_view& same = assigned;
  assigned = same;  // self-assignment keeps the entries
  CHECK((assigned.size() == 4 && assigned[2]));
  // a borrowing view moved from still borrows (only owned entries move)
  const std::array<bool, 2> keep{true, false};
  attn::mask_view borrowed = keep;
  const attn::mask_view other = std::move(borrowed);
  CHECK((borrowed.size() == 2 && borrowed[0] && !borrowed[1]));  // NOLINT(bugprone-use-after-move)
  CHECK((other.size() == 2 && other[0]));
}

TEST_CASE("A mask of the wrong length names the mask and the notes", "[mask][errors]") {
  const Matrix<double> notes{{1, 0}, {0, 1}};
  const std::vector<double> q{1, 2};
  const std::vector<std::uint8_t> three{1, 1, 0};
  REQUIRE_THROWS_WITH(attn::attend(q, notes, attn::dot, {.mask = three}),
                      "attn::attend: mask size is 3 but number of notes is 2");
  REQUIRE_THROWS_WITH(attn::softmax(q, {.mask = three}), "attn::softmax: mask size is 3 but input size is 2");
}

TEST_CASE("row_mask_of: row t's keys are the key mask, its row-mask row and causal, together", "[mask]") {
  // T = 3 queries over n = 5 keys: causal lets row t see keys 0 … t + 2
  const std::vector<char> keys{1, 1, 0, 1, 1};
  const std::vector<char> rows{1, 1, 1, 1, 1,  //
                               0, 1, 1, 1, 1,  //
                               1, 1, 1, 0, 1};
  const attn::options opt{.mask = keys, .row_mask = attn::mask_matrix_view(rows, 3, 5), .causal = true};
  std::vector<bool> seen(5);
  attn::row_mask_of(opt, 3, 5, 0, seen);
  REQUIRE(seen == std::vector<bool>{true, true, false, false, false});
  attn::row_mask_of(opt, 3, 5, 1, seen);
  REQUIRE(seen == std::vector<bool>{false, true, false, true, false});
  std::array<char, 5> as_chars{};
  attn::row_mask_of(opt, 3, 5, 2, as_chars);
  REQUIRE(as_chars == std::array<char, 5>{1, 1, 0, 0, 1});
  // each row as the many-query functions apply it: the weights of a masked key are exactly 0
  attn::Matrix<double> Q(3, 2, 0.5), K(5, 2, 0.25), V(5, 2, 1.0), A(3, 5);
  attn::scaled_dot_product_attention(Q, K, V, attn::scaled_dot, {.out = attn::Matrix<double>(3, 2).view(), .weights = A.view()},
                                     opt);
  for (std::size_t t = 0; t < 3; ++t) {
    attn::row_mask_of(opt, 3, 5, t, seen);
    for (std::size_t j = 0; j < 5; ++j) REQUIRE((A(t, j) != 0.0) == seen[j]);
  }
  REQUIRE_THROWS_WITH(attn::row_mask_of(opt, 3, 5, 3, seen), "attn::row_mask_of: row 3 is out of range for 3 queries");
  std::vector<char> four(4, 7);
  REQUIRE_THROWS_WITH(attn::row_mask_of(opt, 3, 5, 0, four), "attn::row_mask_of: size of the output is 4 but number of keys is 5");
  REQUIRE(four[0] == 7);
  REQUIRE_THROWS_WITH(attn::row_mask_of(opt, 3, 4, 0, four), "attn::row_mask_of: mask size is 5 but number of notes is 4");
}

TEST_CASE("mask_matrix_view: rows whose entries one array cannot hold are refused, also when rows x columns wraps",
          "[mask][errors]") {
  // 2^32 × 2^32 entries: rows·cols wraps std::size_t to 0, which an empty range's size equals
  const std::vector<char> none;
  const std::size_t big = std::size_t{1} << 32;
  REQUIRE_THROWS_WITH((void)attn::mask_matrix_view(none, big, big),
                      "attn::mask_matrix_view: rows 4294967296, row stride 4294967296 and columns 4294967296 "
                      "span more entries than one array can hold");
  const char entries[4] = {1, 0, 1, 1};
  REQUIRE_THROWS_AS((void)attn::mask_matrix_view(entries, 3, 2, std::size_t{1} << 63), attn::dimension_error);
  // within one array: as before
  REQUIRE(attn::mask_matrix_view(entries, 2, 2).rows() == 2);
  REQUIRE(attn::mask_matrix_view(none.data(), 0, big, big).empty());
}
