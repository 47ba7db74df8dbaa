// example_lesson_module: the lesson page's module (lesson_module.cpp), compiled natively, gives the
// unit's numbers: E1's share of "tea" at β = 1 and 2 (the numbers the WebAssembly build must give
// too: 0.736125, 0.936240), attn-calc's rounding, W12's counts, RoPE's relative score, W9's block,
// the tiny model's losses against its softmax, and an error as a message, not a crash. Exit 1 when a number differs.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

extern "C" {
const char* lesson_error();
int lesson_fixed(double x, int decimals, char* buf, int cap);
int lesson_align(int score, int T, int n, int dq, int dk, int dv, const double* Q, const double* K, const double* V,
                 const double* W, const double* W1, const double* W2, const double* v, int k, double beta, int causal,
                 double* scores, double* weights, double* contexts);
int lesson_rope(int d, int p, double* x);
void lesson_price(int T, int d, double* counts);
int lesson_block(int T, int d, int heads, int hdk, int hdv, int dff, const double* X, const double* WQ, const double* WK,
                 const double* WV, const double* WO, const double* W1, const double* W2, double eps, int pre, int act,
                 double* stages);
int lesson_model(int T, int V, const double* token_ids, int seed, double* stages);
}

namespace {
int failures = 0;
std::string fixed(double x, int d) {
  char buf[64];
  return lesson_fixed(x, d, buf, sizeof buf) < 0 ? "?" : buf;
}
void expect(const char* what, const std::string& got, const char* want) {
  const bool ok = got == want;
  std::printf("%-44s %-10s %s\n", what, got.c_str(), ok ? "ok" : (std::string("expected ") + want).c_str());
  if (!ok) ++failures;
}
}  // namespace

int main() {
  const double notes[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, q[3] = {0, 0.5, 2};
  double s[3], w[3], c[3];
  for (const auto& [beta, want] : {std::pair{1.0, "0.736125"}, std::pair{2.0, "0.936240"}}) {
    if (lesson_align(0, 1, 3, 3, 3, 3, q, notes, notes, nullptr, nullptr, nullptr, nullptr, 0, beta, 0, s, w, c) != 0) {
      std::printf("lesson_align failed: %s\n", lesson_error());
      return 1;
    }
    expect(beta == 1 ? "E1: share of tea, beta 1" : "E2: share of tea, beta 2", fixed(w[2], 6), want);
  }
  expect("fixed(0.0625, 3): half away from zero", fixed(0.0625, 3), "0.063");
  expect("fixed(-0.0001, 3): no minus zero", fixed(-0.0001, 3), "0.000");
  double counts[5];
  lesson_price(1024, 64, counts);  // W12 at T = 1024 (the unit: 1,048,576 scores, 4 MiB)
  expect("W12: scores at T = 1024", fixed(counts[0], 0), "1048576");
  expect("W12: causal scores", fixed(counts[1], 0), "524800");
  expect("W12: the map, MiB", fixed(counts[2], 2), "4.00");
  expect("W12: Q, K, V, Y, MiB", fixed(counts[3], 2), "1.00");
  expect("W12: L, KiB", fixed(counts[4], 0), "4");
  // RoPE: q at m and k at n score the same for (1, 0) and (5, 4)
  const auto score = [](int m, int n) {
    double a[2] = {1, 0}, b[2] = {1, 0};
    lesson_rope(2, m, a);
    lesson_rope(2, n, b);
    return a[0] * b[0] + a[1] * b[1];
  };
  expect("RoPE: score (1, 0)", fixed(score(1, 0), 6), fixed(std::cos(1.0), 6).c_str());
  expect("RoPE: score (5, 4)", fixed(score(5, 4), 6), fixed(std::cos(1.0), 6).c_str());
  // W9's block, post-LN, GELU: Y as the unit prints it (examples/transformer_block.cpp holds it to 1e-12)
  {
    const double X[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, WQ[6] = {1, 0, 0, 1, 1, 1}, WK[6] = {2, 0, 1.5, 1.5, 0, 2},
                 WV[6] = {1, 0, 1, 1, 0, 1}, WO[6] = {1, 0, 0.5, 0, 1, 0.5},
                 W1[12] = {1, -1, 0.5, 0, 0, 1, -0.5, 1, 0.5, 0, 1, -1},
                 W2[12] = {0.5, 0, 0, 0, 0.5, 0, 0, 0, 0.5, 0.25, 0.25, 0.25};
    double stages[3 * (6 * 3 + 2 * 4) + 9];
    if (lesson_block(3, 3, 1, 2, 2, 4, X, WQ, WK, WV, WO, W1, W2, 1e-5, 0, 1, stages) != 0) {
      std::printf("lesson_block failed: %s\n", lesson_error());
      return 1;
    }
    const double* Y = stages + 3 * (3 + 3 + 3 + 4 + 4 + 3 + 3);  // after MHA, H1, X1, H-, H, FFN, H2
    expect("W9: Y[I]", fixed(Y[0], 3) + "," + fixed(Y[1], 3) + "," + fixed(Y[2], 3), "1.390,-0.921,-0.468");
  }
  // the tiny model: each position's loss is -log of its softmax at the next token, the mean theirs
  {
    const double tokens[5] = {0, 1, 2, 3, 4};
    const int T = 5, V = 5;
    double stages[T * (10 * 8 + 2 * 32 + 2 * T + 2 * V + 1) + 1];
    if (lesson_model(T, V, tokens, 0, stages) != 0) {
      std::printf("lesson_model failed: %s\n", lesson_error());
      return 1;
    }
    const double* prob = stages + T * (10 * 8 + 2 * 32 + 2 * T) + T * V;  // after the logits
    const double* loss = prob + T * V;
    double mean = 0;
    bool agree = true;
    for (int t = 0; t + 1 < T; ++t) {
      // both from the same logits by two routes (softmax; cross_entropy's log1p form), each a few ulps of
      // numbers below 3 (ulp 4.4e-16): 1e-14 is over 20 ulps
      agree = agree && std::abs(loss[t] + std::log(prob[t * V + t + 1])) < 1e-14;
      mean += loss[t] / (T - 1);
    }
    expect("model: losses are -log p(next)", agree ? "yes" : "no", "yes");
    expect("model: the mean of the losses", fixed(loss[T], 12), fixed(mean, 12).c_str());
    const double bad[2] = {0, 7};  // a token outside the vocabulary: refused, the library's message
    const int rc = lesson_model(2, 5, bad, 0, stages);
    expect("model: a token of 7 with V = 5", rc == 1 && std::strstr(lesson_error(), "model_forward") != nullptr ? "refused" : "accepted", "refused");
  }
  // an error is a message: a beta that is not finite
  const int rc = lesson_align(0, 1, 3, 3, 3, 3, q, notes, notes, nullptr, nullptr, nullptr, nullptr, 0, INFINITY, 0, s, w, c);
  expect("beta = inf: refused", rc == 1 && std::strstr(lesson_error(), "beta") != nullptr ? "refused" : "accepted", "refused");
  std::printf("%s\n", failures == 0 ? "all numbers as the unit's" : "MISMATCH");
  return failures == 0 ? 0 : 1;
}
