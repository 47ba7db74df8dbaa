// W6. The attention lab: who looks at whom (Unit 18, section 6).
//   attention_lab [--svg FILE] [WORD…]      (default: the cat sat on the mat → attention_lab.svg)
//   attention_lab --help                    (what it does, and where its word vectors come from)
// Type a sentence of your own; the lab prints its self-attention map as a table and draws it as
// an SVG heatmap. A trained model learns each word's vector; this lab has none to learn, so it
// makes them from the letters: every pair of neighbouring letters (with the word's start and end)
// adds ±1 to one of 8 directions, and the vector is scaled to length 3. Words that share letter
// pairs ("cat", "sat", "mat") then point the same way and look at each other; a word looks most
// at itself; a repeated word gets the same column twice. Q = K = V = X, scale 1/√8.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "attn/attn.hpp"
#include "attn/report/svg.hpp"
#include "attn/report/table.hpp"
#include "unit_check.hpp"

namespace {

constexpr std::size_t dims = 8;

/// Where the word vectors come from: printed with every map, in --help, and said in the SVG's title.
constexpr const char* provenance =
    "Word vectors: made here from each word's letters, not learned. Every pair of neighbouring\n"
    "letters (with ^ and $ for the word's start and end) is hashed (FNV-1a) to one of 8 directions\n"
    "and adds +1 or -1 to it; the vector is scaled to length 3. Words that share letter pairs\n"
    "(cat, sat, mat) point the same way. A trained model learns its vectors instead, so its maps\n"
    "differ: this lab shows how attention turns vectors into a map, not what a model has learned.\n";

constexpr const char* usage =
    "Usage: attention_lab [--svg FILE] [WORD...]\n"
    "W6, the attention lab: self-attention of a sentence (Q = K = V = X, scale 1/sqrt 8). Prints\n"
    "the map as a table and draws it as an SVG heatmap (default attention_lab.svg).\n"
    "With no words: the cat sat on the mat.\n"
    "  --svg FILE   where to write the heatmap\n"
    "  --help       print this help\n"
    "e.g. attention_lab the bank by the river bank\n\n";

// A word's vector from its letter pairs: FNV-1a of each pair picks a direction and a sign.
std::vector<double> word_vector(std::string_view word) {
  std::string w = "^";  // (appended, not "^" + word + "$": a false -Wrestrict, GCC PR 105651)
  w += word;
  w += '$';
  std::vector<double> x(dims, 0.0);
  for (std::size_t i = 0; i + 1 < w.size(); ++i) {
    std::uint32_t h = 2166136261u;
    for (const char c : {w[i], w[i + 1]}) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
    x[h % dims] += (h >> 16) & 1u ? 1.0 : -1.0;
  }
  double norm = 0;
  for (const double v : x) norm += v * v;
  for (double& v : x) v = norm > 0 ? 3 * v / std::sqrt(norm) : 0;
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  namespace report = attn::report;
  unit::checker check;

  std::string svg_path = "attention_lab.svg";
  std::vector<std::string> words;
  for (int a = 1; a < argc; ++a) {
    const std::string_view arg = argv[a];
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      std::fputs(provenance, stdout);
      return 0;
    }
    if (arg == "--svg" && a + 1 < argc) {
      svg_path = argv[++a];
    } else if (arg.starts_with("-")) {
      std::fprintf(stderr, "attention_lab: unknown option or missing value: %s (attention_lab --help)\n", argv[a]);
      return 2;
    } else {
      words.emplace_back(arg);
    }
  }
  if (words.empty()) words = {"the", "cat", "sat", "on", "the", "mat"};

  const std::size_t T = words.size();
  attn::Matrix<double> X(T, dims);
  for (std::size_t t = 0; t < T; ++t) {
    const std::vector<double> x = word_vector(words[t]);
    for (std::size_t i = 0; i < dims; ++i) X(t, i) = x[i];
  }
  attn::Matrix<double> Y(T, dims), A(T, T);
  attn::scaled_dot_product_attention(X, X, X, {.out = Y.view(), .weights = A.view()});

  std::string sentence;
  for (const std::string& w : words) sentence += (sentence.empty() ? "" : " ") + w;
  std::printf("W6. The attention lab: \"%s\"\n\n", sentence.c_str());
  std::fputs(provenance, stdout);
  std::printf("\n");
  const auto table = unit::matrix_table(
      check, "Self-attention map (rows: the word asking; columns: the words it looks at)", A, words,
      words, nullptr, true);
  unit::show(table);

  // What any sentence shows: each row sums to 1 (checked in the table), each word looks at
  // itself at least as hard as at any other word (q·k ≤ |q||k| = q·q here), and two copies of a
  // word, having the same key, get the same share from every word.
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < T; ++j) {
      check.claim(A(t, t) >= A(t, j) * (1 - 1e-12),
                  words[t] + " looks at itself at least as hard as at " + words[j]);
      if (words[j] == words[t] && j != t)
        for (std::size_t u = 0; u < T; ++u)
          check.claim(A(u, t) == A(u, j),
                      "the two copies of " + words[t] + " get the same share from " + words[u]);
    }
  // One row by hand: e^{q·k/√8} / Σ e^{q·k/√8} for the first word.
  double sum = 0;
  std::vector<double> e(T);
  for (std::size_t j = 0; j < T; ++j) {
    double s = 0;
    for (std::size_t i = 0; i < dims; ++i) s += X(0, i) * X(j, i);
    sum += e[j] = std::exp(s / std::sqrt(double{dims}));
  }
  for (std::size_t j = 0; j < T; ++j)
    check.claim(std::abs(e[j] / sum - A(0, j)) < 1e-14, "the first row by hand is attn's");

  std::ofstream svg(svg_path, std::ios::binary);
  report::heatmap_options look = report::alignment_map_options(A);  // [0, 1], "each row sums to 1"
  look.title = "Self-attention map \xCE\xB1 of \"";
  look.title += sentence;
  look.title += "\" (word vectors from letter pairs, not learned)";
  look.row_axis = "the word asking";
  look.col_axis = "the words it looks at";
  svg << report::heatmap_svg(A, words, words, look);
  svg.close();
  check.claim(static_cast<bool>(svg), "the heatmap was written to " + svg_path);
  std::printf("The map as a picture: %s\n", svg_path.c_str());
  std::printf("Try your own: attention_lab the bank by the river bank\n");
  return check.finish();
}
