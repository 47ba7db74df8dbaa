// PyTorch's nn.TransformerEncoderLayer state mapped to attn's block as docs/block.md says (the
// mapping below is quoted there verbatim): its output, ∂L/∂input and every parameter's gradient,
// read where PyTorch holds them (in_proj_weight's three row blocks, every weight d_out × d_in, no
// copy), against numbers from a file tests/torch/encoder_layer.py writes:
//   - tests/torch/encoder_layer_python.txt, committed: the layer's documented forward in float64
//     and its gradients by reverse-mode differentiation of the scalar operations, in pure Python
//     (no torch, no numpy; route "python"): checked on every build;
//   - with torch installed, a file PyTorch itself wrote (float32 and float64), through the CTest
//     test pytorch_transformer_encoder_layer, which runs the hidden test case here with the file's
//     path in ATTN_TORCH_FIXTURE (and is skipped, exit 77, where `import torch` fails).
// attn runs in double against the float64 numbers and in float against both. Tolerance: an entry
// of the block passes through about N = 2d + d_ff + T roundings (test_block.cpp's count), each
// amplified by at most κ = κ₁κ₂, κ_k = max(1, max|γ_k|·max_t r_{k,t}) (r = 1/√(σ² + ε) of each norm,
// from attn's cache), so |attn − exact| ≤ 64·N·ε_attn·κ·s and likewise for the reference: the
// bound is 64·N·(ε_attn + ε_ref)·κ·s with s = max(1, max |reference|) over the tensor; the
// gradients go through the forward's and the backward's roundings and both norms' backward too:
// 2N and κ². A wrong reading of the state (Q's and K's blocks swapped, a weight read without its
// transpose, norm_first ignored, the other activation) misses by more than 100 times the bound
// (the last test case).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "attn_catch.hpp"
#include "doc_snippets.hpp"

namespace {

const char* const state_keys[] = {"self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
                                  "self_attn.out_proj.bias",  "linear1.weight",         "linear1.bias",
                                  "linear2.weight",           "linear2.bias",           "norm1.weight",
                                  "norm1.bias",               "norm2.weight",           "norm2.bias"};

struct tensor {
  std::vector<std::size_t> dims;
  std::vector<double> v;
};

struct layer_case {
  std::string name, activation;
  std::size_t batch = 0, T = 0, d = 0, nhead = 0, d_ff = 0;
  bool norm_first = false, causal = false;
  double eps = 0;
  std::map<std::string, tensor> t;
};

struct fixture {
  std::string route;
  std::vector<layer_case> cases;
};

[[noreturn]] void bad_file(const std::string& path, const std::string& why) {
  throw std::runtime_error(path + ": " + why);
}

// The file's format: tests/torch/encoder_layer.py's docstring.
fixture read_fixture(const std::string& path) {
  std::ifstream in(path);
  if (!in) bad_file(path, "cannot be read");
  fixture f;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "route") {
      f.route = line.substr(6);
    } else if (kind == "case") {
      layer_case c;
      words >> c.name;
      std::string kv;
      while (words >> kv) {
        const auto eq = kv.find('=');
        const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
        if (key == "activation") c.activation = value;
        else if (key == "eps") c.eps = std::stod(value);
        else {
          const std::size_t n = std::stoul(value);
          if (key == "batch") c.batch = n;
          else if (key == "T") c.T = n;
          else if (key == "d_model") c.d = n;
          else if (key == "nhead") c.nhead = n;
          else if (key == "d_ff") c.d_ff = n;
          else if (key == "norm_first") c.norm_first = n != 0;
          else if (key == "causal") c.causal = n != 0;
        }
      }
      f.cases.push_back(c);
    } else if (kind == "tensor") {
      if (f.cases.empty()) bad_file(path, "a tensor before its case");
      std::string name;
      words >> name;
      tensor t;
      std::size_t n = 1, dim = 0;
      while (words >> dim) {
        t.dims.push_back(dim);
        n *= dim;
      }
      std::string numbers;
      std::getline(in, numbers);
      std::istringstream values(numbers);
      t.v.reserve(n);
      for (std::string s; values >> s;) t.v.push_back(std::strtod(s.c_str(), nullptr));  // (exact: repr)
      if (t.v.size() != n) bad_file(path, name + " has " + std::to_string(t.v.size()) + " numbers, not " + std::to_string(n));
      f.cases.back().t[name] = std::move(t);
    }
  }
  if (f.cases.empty()) bad_file(path, "holds no case");
  return f;
}

// PyTorch's state_dict, its tensors' numbers in T, row-major as PyTorch holds them.
template <class T>
struct state_dict {
  std::map<std::string, std::vector<T>> numbers;
  const T* operator()(const std::string& key) const { return numbers.at(key).data(); }
};

// What the mapping could get wrong, for the last test case: each flag one mistake.
struct mistakes {
  bool swap_q_k = false, untransposed_out_proj = false, ignore_norm_first = false, other_activation = false;
};

template <class T>
attn::block_parameters<T> pytorch_block(const state_dict<T>& sd, std::size_t d, std::size_t nhead, std::size_t d_ff,
                                        bool norm_first, bool gelu, double layer_norm_eps, mistakes m = {}) {
  // docs/block.md:begin
  // sd(key): a pointer to the state_dict tensor's numbers, row-major as PyTorch holds them
  const T* in_w = sd("self_attn.in_proj_weight");  // 3d × d: rows [0, d) W_Qᵀ, [d, 2d) W_Kᵀ, [2d, 3d) W_Vᵀ
  const T* in_b = sd("self_attn.in_proj_bias");    // 3d: b_Q, b_K, b_V
  const auto weight = [](const T* w, std::size_t d_out, std::size_t d_in) {  // PyTorch's d_out × d_in
    return attn::transposed(attn::MatrixView<const T>(w, d_out, d_in));      // as attn's d_in × d_out: no copy
  };
  attn::block_parameters<T> p;
  p.attention = {.W_Q = weight(in_w, d, d),
                 .W_K = weight(in_w + d * d, d, d),
                 .W_V = weight(in_w + 2 * d * d, d, d),
                 .W_O = weight(sd("self_attn.out_proj.weight"), d, d),
                 .b_Q = {in_b, d},
                 .b_K = {in_b + d, d},
                 .b_V = {in_b + 2 * d, d},
                 .b_O = {sd("self_attn.out_proj.bias"), d},
                 .heads = nhead};  // the score: scaled_dot, 1/√(d/nhead), as PyTorch's
  p.ffn = {.W_1 = weight(sd("linear1.weight"), d_ff, d),
           .b_1 = {sd("linear1.bias"), d_ff},
           .W_2 = weight(sd("linear2.weight"), d, d_ff),
           .b_2 = {sd("linear2.bias"), d},
           .act = gelu ? attn::activation::gelu : attn::activation::relu};  // "gelu": the erf form
  p.norm_1 = {.gamma = {sd("norm1.weight"), d}, .beta = {sd("norm1.bias"), d}, .eps = layer_norm_eps};
  p.norm_2 = {.gamma = {sd("norm2.weight"), d}, .beta = {sd("norm2.bias"), d}, .eps = layer_norm_eps};
  p.placement = norm_first ? attn::norm_placement::pre : attn::norm_placement::post;
  // docs/block.md:end
  if (m.swap_q_k) {
    std::swap(p.attention.W_Q, p.attention.W_K);
    std::swap(p.attention.b_Q, p.attention.b_K);
  }
  if (m.untransposed_out_proj) p.attention.W_O = attn::MatrixView<const T>(sd("self_attn.out_proj.weight"), d, d);
  if (m.ignore_norm_first) p.placement = attn::norm_placement::post;
  if (m.other_activation) p.ffn.act = gelu ? attn::activation::relu : attn::activation::gelu;
  return p;
}

// The gradients, into buffers laid out as PyTorch's .grad of each parameter.
template <class T>
attn::block_gradients<T> pytorch_gradients(std::map<std::string, std::vector<T>>& grad, attn::MatrixView<T> dX,
                                           std::size_t d, std::size_t d_ff) {
  const auto at = [&](const std::string& key) { return grad.at(key).data(); };
  // docs/block.md:gradients:begin
  // grad(key): PyTorch's .grad of that parameter, d_out × d_in for a weight: written where it lies
  T* in_w = at("self_attn.in_proj_weight");
  T* in_b = at("self_attn.in_proj_bias");
  const auto weight = [](T* w, std::size_t d_out, std::size_t d_in) {
    return attn::transposed(attn::MatrixView<T>(w, d_out, d_in));
  };
  attn::block_gradients<T> g{.input = dX,
                             .W_Q = weight(in_w, d, d),
                             .W_K = weight(in_w + d * d, d, d),
                             .W_V = weight(in_w + 2 * d * d, d, d),
                             .W_O = weight(at("self_attn.out_proj.weight"), d, d),
                             .b_Q = {in_b, d},
                             .b_K = {in_b + d, d},
                             .b_V = {in_b + 2 * d, d},
                             .b_O = {at("self_attn.out_proj.bias"), d},
                             .W_1 = weight(at("linear1.weight"), d_ff, d),
                             .W_2 = weight(at("linear2.weight"), d, d_ff),
                             .b_1 = {at("linear1.bias"), d_ff},
                             .b_2 = {at("linear2.bias"), d},
                             .gamma_1 = {at("norm1.weight"), d},
                             .beta_1 = {at("norm1.bias"), d},
                             .gamma_2 = {at("norm2.weight"), d},
                             .beta_2 = {at("norm2.bias"), d}};
  // docs/block.md:gradients:end
  return g;
}

// attn's block in T on case c; the largest |attn − reference| over the bound, per tensor.
struct comparison {
  std::map<std::string, double> ratio;  // max over entries of |attn − ref| / bound
  double worst = 0;
};

template <class T>
comparison run_case(const layer_case& c, const std::string& precision, mistakes m = {}) {
  state_dict<T> sd;
  for (const char* key : state_keys) {
    const std::vector<double>& v = c.t.at(key).v;
    sd.numbers[key] = std::vector<T>(v.begin(), v.end());  // float32 numbers: exact in T
  }
  const std::size_t rows = c.batch * c.T, d = c.d;
  const std::vector<double>& xd = c.t.at("input").v;
  const std::vector<double>& gd = c.t.at("grad_output").v;
  const std::vector<T> x(xd.begin(), xd.end()), dy(gd.begin(), gd.end());
  const attn::block_parameters<T> p =
      pytorch_block(sd, d, c.nhead, c.d_ff, c.norm_first, c.activation == "gelu", c.eps, m);
  std::vector<T> y(rows * d), dx(rows * d);
  attn::block_cache<T> cache;
  const attn::MatrixView<const T> X(x.data(), rows, d);
  const attn::options opt{.causal = c.causal};
  attn::transformer_block(X, p, attn::MatrixView<T>(y.data(), rows, d), cache, opt, c.batch);
  std::map<std::string, std::vector<T>> grad;
  for (const char* key : state_keys) grad[key].assign(sd.numbers[key].size(), T(-7));
  attn::transformer_block_backward(X, p, cache, attn::MatrixView<const T>(dy.data(), rows, d),
                                   pytorch_gradients<T>(grad, attn::MatrixView<T>(dx.data(), rows, d), d, c.d_ff), opt,
                                   c.batch);
  // κ_k = max(1, max|γ_k|·max r_k)
  const auto kappa = [](const std::vector<double>& gamma, const std::vector<T>& rstd) {
    double g = 0, r = 0;
    for (const double v : gamma) g = std::max(g, std::abs(v));
    for (const T v : rstd) r = std::max(r, static_cast<double>(v));
    return std::max(1.0, g * r);
  };
  const double k = kappa(c.t.at("norm1.weight").v, cache.rstd_1) * kappa(c.t.at("norm2.weight").v, cache.rstd_2);
  const double n = static_cast<double>(2 * d + c.d_ff + c.T);
  const double eps = static_cast<double>(std::numeric_limits<T>::epsilon()) +
                     (precision == "float32" ? 0x1p-23 : 0x1p-52);
  comparison out;
  const auto compare = [&](const std::string& name, const std::vector<T>& got, double rounds, double amplification) {
    const std::vector<double>& want = c.t.at(precision + ":" + name).v;
    REQUIRE(got.size() == want.size());
    double s = 1;
    for (const double v : want) s = std::max(s, std::abs(v));
    const double bound = 64 * rounds * n * eps * amplification * s;
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]) / bound);
    if (std::isnan(worst)) worst = std::numeric_limits<double>::infinity();
    out.ratio[name] = worst;
    out.worst = std::max(out.worst, worst);
  };
  compare("output", y, 1, k);
  compare("grad.input", dx, 2, k * k);
  for (const char* key : state_keys) compare(std::string("grad.") + key, grad[key], 2, k * k);
  return out;
}

void check_fixture(const fixture& f) {
  INFO("route: " << f.route);
  for (const layer_case& c : f.cases)
    for (const std::string precision : {"float64", "float32"}) {
      if (c.t.count(precision + ":output") == 0) continue;
      INFO("case " << c.name << ", PyTorch's " << precision);
      const auto report = [&](const comparison& r, const char* attn_type) {
        for (const auto& [name, ratio] : r.ratio) {
          INFO("attn in " << attn_type << ": " << name << ": largest |attn - reference| / bound = " << ratio);
          CHECK(ratio <= 1);
        }
      };
      if (precision == "float64") report(run_case<double>(c, precision), "double");
      report(run_case<float>(c, precision), "float");
    }
}

}  // namespace

TEST_CASE("pytorch: nn.TransformerEncoderLayer's state as docs/block.md maps it gives its output and every "
          "gradient (the committed pure-Python fixture)",
          "[block][pytorch]") {
  const fixture f = read_fixture(attn_test::document_path(__FILE__, "tests/torch/encoder_layer_python.txt"));
  REQUIRE(f.cases.size() == 4);
  check_fixture(f);
}

TEST_CASE("pytorch: the file named by ATTN_TORCH_FIXTURE", "[.][torch]") {
  // run by the CTest test pytorch_transformer_encoder_layer (tests/torch/encoder_layer.py --route torch --check)
  const char* path = std::getenv("ATTN_TORCH_FIXTURE");
  if (path == nullptr) FAIL("ATTN_TORCH_FIXTURE is not set: tests/torch/encoder_layer.py --route torch --check runs this");
  const fixture f = read_fixture(path);
  REQUIRE(f.route.rfind("torch", 0) == 0);
  check_fixture(f);
}

TEST_CASE("pytorch: each wrong reading of the state misses PyTorch's numbers by far more than the bound",
          "[block][pytorch]") {
  const fixture f = read_fixture(attn_test::document_path(__FILE__, "tests/torch/encoder_layer_python.txt"));
  for (const layer_case& c : f.cases) {
    INFO("case " << c.name);
    CHECK(run_case<double>(c, "float64", {.swap_q_k = true}).worst > 100);
    CHECK(run_case<double>(c, "float64", {.untransposed_out_proj = true}).worst > 100);
    CHECK(run_case<double>(c, "float64", {.other_activation = true}).worst > 100);
    if (c.norm_first) CHECK(run_case<double>(c, "float64", {.ignore_norm_first = true}).worst > 100);
  }
}

TEST_CASE("pytorch: docs/block.md quotes the mapping as this file runs it", "[block][pytorch][docs]") {
  REQUIRE(attn_test::quoted_in(__FILE__, "docs/block.md", "// docs/block.md:begin\n", "  // docs/block.md:end"));
  REQUIRE(attn_test::quoted_in(__FILE__, "docs/block.md", "// docs/block.md:gradients:begin\n",
                               "  // docs/block.md:gradients:end"));
}
