// W8. Where is each word (Unit 18, section 8).
// Attention alone is blind to order: "dog bites man" and "man bites dog" give the same rows,
// permuted. Positions put the order back. The paper adds to each word a row of sines and cosines
// of its position, at frequencies 10000^(−2i/d); RoPE instead turns each pair of a query's and a
// key's numbers by an angle proportional to the position, so that their score depends only on how
// far apart they are.
//
// Sinusoidal PE for positions 0–3, d = 4: row 1 is (sin 1, cos 1, sin 0.01, cos 0.01) ≈
// (0.841, 0.540, 0.010, 1.000). RoPE: q_m·k_n depends only on m − n — the same score for
// (m, n) = (1, 0) and (5, 4). A heatmap of PE for 50 positions × 32 dimensions is written to
// where_is_each_word.svg (or the path after --svg).

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "attn/attn.hpp"
#include "attn/report/svg.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"

int main(int argc, char** argv) {
  namespace report = attn::report;
  unit::checker check;
  std::string svg_path = "where_is_each_word.svg";
  for (int a = 1; a + 1 < argc; ++a)
    if (std::string_view(argv[a]) == "--svg") svg_path = argv[++a];

  // 1. The table for positions 0–3, d = 4: frequencies 1 and 10000^(−1/2) = 0.01
  std::printf("W8. Where is each word: sinusoidal positions, d = 4\n\n");
  const attn::Matrix<double> pe = attn::sinusoidal_encoding<double>(4, 4);
  // row 0: sin 0, cos 0; row 1: the unit's numbers; rows 2 and 3 printed, not in the unit
  const char* expected[16] = {"0.000", "1.000", "0.000", "1.000", "0.841", "0.540", "0.010", "1.000",
                              "",      "",      "",      "",      "",      "",      "",      ""};
  unit::show(unit::matrix_table(check, "PE", pe, {"position 0", "position 1", "position 2", "position 3"},
                                {"sin p", "cos p", "sin p/100", "cos p/100"}, expected));
  // by hand, the formula itself: row 1 is (sin 1, cos 1, sin 0.01, cos 0.01)
  const double by_hand[4] = {std::sin(1.0), std::cos(1.0), std::sin(0.01), std::cos(0.01)};
  bool same = true;
  for (std::size_t i = 0; i < 4; ++i) same = same && std::abs(pe(1, i) - by_hand[i]) < 1e-15;
  check.claim(same, "row 1 is (sin 1, cos 1, sin 0.01, cos 0.01)");

  // 2. RoPE: a query at m and a key at n score by m − n only
  std::printf("RoPE, d_k = 4: q = (1, 0.5, -0.5, 2), k = (0.5, 1, 1, -1) turned to positions m and n\n\n");
  const auto score = [](std::size_t m, std::size_t n) {
    attn::Matrix<double> q(1, 4), k(1, 4);
    const double qv[4] = {1, 0.5, -0.5, 2}, kv[4] = {0.5, 1, 1, -1};
    for (std::size_t i = 0; i < 4; ++i) {
      q(0, i) = qv[i];
      k(0, i) = kv[i];
    }
    attn::apply_rotary(q, 1, m);
    attn::apply_rotary(k, 1, n);
    double s = 0;
    for (std::size_t i = 0; i < 4; ++i) s += q(0, i) * k(0, i);
    return s;
  };
  report::table t;
  t.header = {"m", "n", "m − n", "q_m·k_n"};
  const std::size_t pairs[][2] = {{1, 0}, {5, 4}, {50, 49}, {2, 0}, {6, 4}};
  for (const auto& p : pairs)
    t.rows.push_back({std::to_string(p[0]), std::to_string(p[1]), std::to_string(p[0] - p[1]),
                      check.print("q_m·k_n", score(p[0], p[1]), "", 6)});
  unit::show(t);
  check.claim(std::abs(score(5, 4) - score(1, 0)) < 1e-12 && std::abs(score(50, 49) - score(1, 0)) < 1e-12,
              "(1, 0), (5, 4) and (50, 49) give the same score: one step apart");
  check.claim(std::abs(score(6, 4) - score(2, 0)) < 1e-12, "(2, 0) and (6, 4) give the same score: two steps apart");
  check.claim(std::abs(score(2, 0) - score(1, 0)) > 1e-3, "one step and two steps apart score differently");

  // 3. The picture: 50 positions × 32 dimensions, −1 (blue) through 0 (white) to 1 (red)
  const attn::Matrix<double> big = attn::sinusoidal_encoding<double>(50, 32);
  std::vector<std::string> rows, cols;
  for (int p = 0; p < 50; ++p) rows.push_back(std::to_string(p));
  for (int i = 0; i < 32; ++i) cols.push_back(std::to_string(i));
  report::heatmap_options look;
  look.title = "Sinusoidal positions: 50 positions x 32 dimensions";
  look.row_axis = "position p";
  look.col_axis = "dimension (sin, cos pairs; slower to the right)";
  look.decimals = -1;
  look.lo = -1;
  look.hi = 1;
  look.id = "pe";
  look.scale = report::colour_scale::diverging;  // −1 blue, 0 white, 1 red (attn-calc --pe draws the same)
  look.legend_title = "PE value";
  std::ofstream svg(svg_path, std::ios::binary);
  svg << report::heatmap_svg(big, rows, cols, look);
  svg.close();
  check.claim(static_cast<bool>(svg), "the heatmap was written to " + svg_path);
  std::printf("The table as a picture: %s\n", svg_path.c_str());
  return check.finish();
}
