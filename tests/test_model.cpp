// The tiny transformer whole (attn/model.hpp): every parameter's gradient against central
// differences in double, tensor by tensor, in each family (encoder, decoder, encoder–decoder),
// tied and untied, with each kind of positions, post- and pre-LN, with and without the final
// norm; the layout of the one buffer; accumulation; the errors.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "attn/gradcheck.hpp"
#include "attn/model.hpp"
#include "attn/safetensors.hpp"
#include "attn_catch.hpp"
#include "reference_attention.hpp"

namespace {

const char* family_name(attn::model_family f) {
  switch (f) {
    case attn::model_family::encoder: return "encoder";
    case attn::model_family::decoder: return "decoder";
    default: return "encoder-decoder";
  }
}

const char* positions_name(attn::position_encoding p) {
  switch (p) {
    case attn::position_encoding::learned: return "learned";
    case attn::position_encoding::sinusoidal: return "sinusoidal";
    case attn::position_encoding::rotary: return "rotary";
    case attn::position_encoding::alibi: return "alibi";
    default: return "none";
  }
}

// A small model, its parameters drawn at random (not the initialisation: γ ≠ 1, β ≠ 0, biases ≠ 0,
// so that every path carries a gradient), B = 2 sentences of T = 3 tokens (source: S = 4).
template <class T>
struct model_case {
  attn::model_config c;
  std::vector<T> buffer;
  std::vector<std::int64_t> tokens{1, 4, 2, 0, 3, 3}, source{2, 0, 1, 4, 4, 3, 2, 1};
  std::size_t batch = 2;
  bool padded = false;  // the second sentence's last token and the second source's last two: padding
  const bool token_mask[6] = {true, true, true, true, true, false};
  const bool source_mask[8] = {true, true, true, true, true, true, false, false};

  model_case(attn::model_config config, std::mt19937_64& rng) : c(config), buffer(attn::parameter_count(config)) {
    std::normal_distribution<double> normal(0, 0.5);
    for (T& v : buffer) v = static_cast<T>(normal(rng));
    // the norms' γ near 1 (a norm of γ ≈ 0 would hide its input's gradient)
    for (const attn::model_tensor& t : attn::model_tensors(c))
      if (t.name.ends_with(".gamma"))
        for (std::size_t i = 0; i < t.cols; ++i) buffer[t.offset + i] += T(1);
  }
  attn::model_input input() const {
    const bool enc_dec = c.family == attn::model_family::encoder_decoder;
    return {.tokens = tokens, .batch = batch,
            .source = enc_dec ? std::span<const std::int64_t>(source) : std::span<const std::int64_t>(),
            .token_mask = padded ? std::span<const bool>(token_mask) : std::span<const bool>(),
            .source_mask = padded && enc_dec ? std::span<const bool>(source_mask) : std::span<const bool>()};
  }
  std::vector<T> logits(std::span<T> params) const {
    const attn::model_parameters<T> p = attn::bind_parameters<T>(c, params);
    attn::model_cache<T> cache;
    std::vector<T> out(tokens.size() * c.vocabulary);
    attn::model_forward(p, input(), attn::MatrixView<T>(out.data(), tokens.size(), c.vocabulary), cache);
    return out;
  }
};

}  // namespace

TEST_CASE("model_backward: every parameter against central differences, each family, tied or not",
          "[model][derivatives]") {
  using T = double;
  std::mt19937_64 rng(131);
  using F = attn::model_family;
  using P = attn::position_encoding;
  struct variant {
    F family;
    P positions;
    bool tied, final_norm, pre, padded = false;
  };
  const variant variants[] = {
      {F::decoder, P::learned, false, false, false},   {F::decoder, P::learned, true, true, true},
      {F::encoder, P::learned, true, true, false, true}, {F::encoder_decoder, P::rotary, false, true, true, true},
      {F::decoder, P::sinusoidal, true, false, false}, {F::decoder, P::rotary, false, true, true},
      {F::decoder, P::alibi, true, true, false},       {F::encoder, P::learned, false, true, false},
      {F::encoder, P::rotary, true, false, true},      {F::encoder_decoder, P::learned, false, true, false},
      {F::encoder_decoder, P::learned, true, false, true}, {F::encoder_decoder, P::sinusoidal, true, true, true},
      {F::encoder_decoder, P::alibi, false, false, false},
  };
  for (const variant& v : variants) {
    const attn::model_config config{.family = v.family, .vocabulary = 5, .d_model = 4, .layers = 2, .heads = 2,
                                    .d_ff = 6, .max_positions = 6, .positions = v.positions,
                                    .act = v.pre ? attn::activation::gelu_tanh : attn::activation::gelu,
                                    .placement = v.pre ? attn::norm_placement::pre : attn::norm_placement::post,
                                    .final_norm = v.final_norm, .tied = v.tied};
    model_case<T> m(config, rng);
    m.padded = v.padded;
    const attn::model_parameters<T> p = attn::bind_parameters<T>(config, std::span<T>(m.buffer));
    attn::model_cache<T> cache;
    const std::size_t rows = m.tokens.size(), V = config.vocabulary;
    std::vector<T> logits(rows * V), G(rows * V);
    std::normal_distribution<double> normal(0, 1);
    for (T& g : G) g = static_cast<T>(normal(rng));
    attn::model_forward(p, m.input(), attn::MatrixView<T>(logits.data(), rows, V), cache);
    std::vector<T> grad_buffer(m.buffer.size(), T(7));  // (overwritten: not added to)
    const attn::model_parameters<T> g = attn::bind_parameters<T>(config, std::span<T>(grad_buffer));
    attn::model_backward(p, m.input(), cache, attn::MatrixView<const T>(G.data(), rows, V), g);
    for (const attn::model_tensor& t : attn::model_tensors(config)) {
      INFO(family_name(v.family) << ", " << positions_name(v.positions) << (v.tied ? ", tied" : ", untied")
                                 << (v.final_norm ? ", final norm" : "") << (v.pre ? ", pre-LN" : ", post-LN")
                                 << (v.padded ? ", padded" : "") << ": dL/d" << t.name);
      const std::size_t n = t.rows * t.cols;
      const auto f = [&](std::span<const T> x) {
        std::vector<T> moved = m.buffer;
        std::copy(x.begin(), x.end(), moved.begin() + static_cast<std::ptrdiff_t>(t.offset));
        return m.logits(moved);
      };
      const std::span<const T> x(m.buffer.data() + t.offset, n), analytic(grad_buffer.data() + t.offset, n);
      const auto report = attn::check_vjp(f, x, std::span<const T>(G), analytic);
      CHECK(report.passed(attn::gradcheck_tolerance<T>()));
    }
    // accumulate: the same gradients once more, added
    std::vector<T> twice = grad_buffer;
    attn::model_backward(p, m.input(), cache, attn::MatrixView<const T>(G.data(), rows, V),
                         attn::bind_parameters<T>(config, std::span<T>(twice)), true);
    for (std::size_t i = 0; i < twice.size(); ++i)
      CHECK(std::abs(twice[i] - 2 * grad_buffer[i]) <= 1e-12 * (1 + std::abs(grad_buffer[i])));
  }
}

TEST_CASE("bind_parameters: one buffer, the matrices first, every tensor named once", "[model]") {
  using F = attn::model_family;
  for (const F family : {F::encoder, F::decoder, F::encoder_decoder})
    for (const bool tied : {false, true}) {
      const attn::model_config c{.family = family, .vocabulary = 7, .d_model = 6, .layers = 3, .heads = 3,
                                 .max_positions = 5, .final_norm = true, .tied = tied};
      INFO(family_name(family) << (tied ? ", tied" : ""));
      const std::vector<attn::model_tensor> ts = attn::model_tensors(c);
      std::set<std::string> names;
      std::size_t at = 0, matrices = 0;
      bool vectors_started = false;
      for (const attn::model_tensor& t : ts) {
        CHECK(names.insert(t.name).second);
        CHECK(t.offset == at);
        at += t.rows * t.cols;
        if (t.matrix) {
          CHECK_FALSE(vectors_started);
          matrices += t.rows * t.cols;
        } else {
          vectors_started = true;
          CHECK(t.rows == 1);
        }
      }
      CHECK(at == attn::parameter_count(c));
      CHECK(matrices == attn::decayed_count(c));
      CHECK(names.count("output") == (tied ? 0u : 1u));
      CHECK(names.count("decoder.0.cross_attention.W_Q") == (family == F::encoder_decoder ? 1u : 0u));
      CHECK(names.count("encoder_norm.gamma") == (family == F::encoder_decoder ? 1u : 0u));
      // d_ff = 0 means 4·d_model
      const auto w1 = std::find_if(ts.begin(), ts.end(), [](const attn::model_tensor& t) { return t.name.ends_with("ffn.W_1"); });
      REQUIRE(w1 != ts.end());
      CHECK(w1->cols == 24);
    }
}

TEST_CASE("initialize: the same seed gives the same model, the norms start at 1 and 0", "[model]") {
  const attn::model_config c{.vocabulary = 11, .d_model = 8, .layers = 2, .heads = 2, .max_positions = 9,
                             .final_norm = true};
  std::vector<float> a(attn::parameter_count(c), -1.f), b(a.size(), -2.f);
  attn::initialize(attn::bind_parameters<float>(c, std::span<float>(a)), 5);
  attn::initialize(attn::bind_parameters<float>(c, std::span<float>(b)), 5);
  CHECK(a == b);
  for (const attn::model_tensor& t : attn::model_tensors(c)) {
    INFO(t.name);
    const std::span<const float> v(a.data() + t.offset, t.rows * t.cols);
    if (t.name.ends_with(".gamma")) {
      for (const float x : v) CHECK(x == 1.f);
    } else if (t.name.ends_with(".beta") || t.name.find(".attention.b_") != std::string::npos) {
      for (const float x : v) CHECK(x == 0.f);  // (PyTorch's in_proj_bias and out_proj.bias start at 0)
    } else {
      // U(−bound, bound) with a bound of the tensor's own: the embeddings √3·0.02
      float top = 0;
      for (const float x : v) top = std::max(top, std::abs(x));
      CHECK(top > 0.f);
      if (t.name == "token_embedding" || t.name == "position_table") CHECK(top <= std::sqrt(3.f) * 0.02f);
    }
  }
}

TEST_CASE("model_forward and model_backward: bad input is refused before anything is written", "[model][errors]") {
  const attn::model_config c{.vocabulary = 5, .d_model = 4, .heads = 2, .max_positions = 4};
  std::vector<double> buf(attn::parameter_count(c));
  const attn::model_parameters<double> p = attn::bind_parameters<double>(c, std::span<double>(buf));
  attn::initialize(p, 1);
  attn::model_cache<double> cache;
  attn::Matrix<double> logits(4, 5);
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 5; ++j) logits(i, j) = 42;
  const std::vector<std::int64_t> bad{0, 1, 5, 2}, good{0, 1, 4, 2}, long_one{0, 1, 2, 3, 4};
  CHECK_THROWS_MATCHES(attn::model_forward(p, {.tokens = bad}, logits, cache), attn::domain_error,
                       Catch::Matchers::Message("attn::model_forward: token 5 at position 2 is outside the vocabulary [0, 5)"));
  attn::Matrix<double> five(5, 5);
  CHECK_THROWS_MATCHES(attn::model_forward(p, {.tokens = long_one}, five, cache), attn::dimension_error,
                       Catch::Matchers::Message("attn::model_forward: the tokens has 5 positions per sentence, more than "
                                                "max_positions (4)"));
  attn::Matrix<double> wrong(4, 6);
  CHECK_THROWS_AS(attn::model_forward(p, {.tokens = good}, wrong, cache), attn::dimension_error);
  CHECK_THROWS_AS(attn::model_forward(p, {.tokens = good, .batch = 3}, logits, cache), attn::dimension_error);
  CHECK_THROWS_AS(attn::model_forward(p, {.tokens = good, .source = good}, logits, cache), attn::dimension_error);
  CHECK(logits(2, 3) == 42);
  CHECK_THROWS_AS(attn::bind_parameters<double>(c, std::span<double>(buf).subspan(1)), attn::dimension_error);
  CHECK_THROWS_AS(attn::parameter_count(attn::model_config{.vocabulary = 5, .d_model = 6, .heads = 4, .max_positions = 2}),
                  attn::dimension_error);
  // the backward of another forward
  std::vector<double> gbuf(buf.size(), 3.0);
  const attn::model_parameters<double> g = attn::bind_parameters<double>(c, std::span<double>(gbuf));
  CHECK_THROWS_AS(attn::model_backward(p, {.tokens = good}, cache, logits, g), attn::forward_mismatch_error);
  attn::model_forward(p, {.tokens = good}, logits, cache);
  const std::vector<std::int64_t> other{0, 1, 3, 2};
  CHECK_THROWS_AS(attn::model_backward(p, {.tokens = other}, cache, logits, g), attn::forward_mismatch_error);
  const double e0 = buf[0];
  buf[0] += 1;  // E changed in place after the forward
  CHECK_THROWS_AS(attn::model_backward(p, {.tokens = good}, cache, logits, g), attn::forward_mismatch_error);
  buf[0] = e0;
  // a gradient view of another shape, named
  attn::model_parameters<double> g_bad = g;
  g_bad.decoder[0].ffn.W_1 = attn::MatrixView<double>(gbuf.data(), 4, 6);
  CHECK_THROWS_MATCHES(attn::model_backward(p, {.tokens = good}, cache, logits, g_bad), attn::dimension_error,
                       Catch::Matchers::Message("attn::model_backward: dL/ddecoder.0.ffn.W_1 is 4x6 but should be 4x16"));
  for (const double v : gbuf) CHECK(v == 3.0);
  attn::model_backward(p, {.tokens = good}, cache, logits, g);
  // decoding: a capacity past max_positions, an encoder, a full cache, an encoder-decoder not encoded
  CHECK_THROWS_AS(attn::model_kv_cache<double>(c, 1, 5), attn::dimension_error);
  attn::model_config enc = c;
  enc.family = attn::model_family::encoder;
  CHECK_THROWS_AS(attn::model_kv_cache<double>(enc, 1, 4), attn::dimension_error);
  attn::model_config ed = c;
  ed.family = attn::model_family::encoder_decoder;
  std::vector<double> ebuf(attn::parameter_count(ed));
  const attn::model_parameters<double> pe = attn::bind_parameters<double>(ed, std::span<double>(ebuf));
  attn::initialize(pe, 2);
  attn::model_kv_cache<double> ekv(ed, 1, 4);
  attn::Matrix<double> one(1, 5);
  const std::vector<std::int64_t> first{1};
  CHECK_THROWS_MATCHES(attn::model_step(pe, first, ekv, one), attn::dimension_error,
                       Catch::Matchers::Message("attn::model_step: an encoder-decoder decodes after model_encode (no "
                                                "source encoded)"));
  attn::model_kv_cache<double> ed_cache(ed, 1, 4);
  CHECK_THROWS_AS(attn::model_step(p, first, ed_cache, one), attn::dimension_error);  // a cache of another model
}

TEST_CASE("transformer_block: a memory without cross-attention, or cross-attention without one, is refused",
          "[block][errors]") {
  const attn::model_config c{.family = attn::model_family::encoder_decoder, .vocabulary = 5, .d_model = 4, .heads = 2,
                             .max_positions = 4};
  std::vector<double> buf(attn::parameter_count(c));
  const attn::model_parameters<double> p = attn::bind_parameters<double>(c, std::span<double>(buf));
  attn::initialize(p, 1);
  const attn::block_parameters<double> with_cross = attn::parameters_of(p.decoder[0]);
  const attn::block_parameters<double> without = attn::parameters_of(p.encoder[0]);
  attn::Matrix<double> X(3, 4), M(2, 4), Y(3, 4);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) X(i, j) = Y(i, j) = static_cast<double>(i + j);
  attn::block_cache<double> cache;
  CHECK_THROWS_MATCHES(attn::transformer_block(X, with_cross, Y, cache), attn::dimension_error,
                       Catch::Matchers::Message("attn::transformer_block: the block has cross-attention but no memory "
                                                "M was given"));
  CHECK_THROWS_MATCHES(attn::transformer_block(X, M, without, Y, cache), attn::dimension_error,
                       Catch::Matchers::Message("attn::transformer_block: a memory M (or its gradient) was given but "
                                                "the block has no cross-attention"));
  CHECK(Y(2, 3) == 5.0);
}

TEMPLATE_TEST_CASE("model_step: decoding with the cache gives the forward's logits, row for row", "[model][cache]",
                   float, double) {
  using T = TestType;
  using F = attn::model_family;
  using P = attn::position_encoding;
  std::mt19937_64 rng(132);
  struct variant {
    F family;
    P positions;
    bool tied, final_norm, pre;
  };
  const variant variants[] = {
      {F::decoder, P::learned, false, false, false}, {F::decoder, P::sinusoidal, true, true, true},
      {F::decoder, P::rotary, false, true, false},   {F::decoder, P::alibi, true, false, true},
      {F::encoder_decoder, P::learned, false, true, true}, {F::encoder_decoder, P::rotary, true, false, false},
  };
  for (const variant& v : variants) {
    const attn::model_config config{.family = v.family, .vocabulary = 7, .d_model = 8, .layers = 2, .heads = 2,
                                    .d_ff = 12, .max_positions = 6, .positions = v.positions,
                                    .placement = v.pre ? attn::norm_placement::pre : attn::norm_placement::post,
                                    .final_norm = v.final_norm, .tied = v.tied};
    INFO(family_name(v.family) << ", " << positions_name(v.positions) << (v.tied ? ", tied" : ", untied")
                               << (v.final_norm ? ", final norm" : "") << (v.pre ? ", pre-LN" : ", post-LN"));
    std::vector<T> buffer(attn::parameter_count(config));
    const attn::model_parameters<T> p = attn::bind_parameters<T>(config, std::span<T>(buffer));
    attn::initialize(p, 9);
    std::uniform_int_distribution<std::int64_t> token(0, 6);
    const std::size_t B = 2, len = 5, S = 4;
    std::vector<std::int64_t> tokens(B * len), source(B * S);
    for (auto& t : tokens) t = token(rng);
    for (auto& t : source) t = token(rng);
    const bool enc_dec = v.family == F::encoder_decoder;
    attn::model_cache<T> cache;
    attn::Matrix<T> whole(B * len, 7);
    attn::model_forward(p, {.tokens = tokens, .batch = B, .source = enc_dec ? std::span<const std::int64_t>(source)
                                                                              : std::span<const std::int64_t>()},
                        whole, cache);
    attn::model_kv_cache<T> kv(config, B, 6);
    if (enc_dec) attn::model_encode(p, source, kv);
    // a prompt of two tokens a sequence, then one token at a time
    std::size_t at = 0;
    for (const std::size_t t : {std::size_t{2}, std::size_t{1}, std::size_t{1}, std::size_t{1}}) {
      std::vector<std::int64_t> step(B * t);
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t r = 0; r < t; ++r) step[b * t + r] = tokens[b * len + at + r];
      attn::Matrix<T> logits(B * t, 7);
      attn::model_step(p, step, kv, logits);
      for (std::size_t b = 0; b < B; ++b)
        for (std::size_t r = 0; r < t; ++r)
          for (std::size_t j = 0; j < 7; ++j) {
            INFO("sequence " << b << ", position " << at + r << ", token " << j);
            CHECK(logits(b * t + r, j) == whole(b * len + at + r, j));
          }
      at += t;
    }
    CHECK(kv.length() == 5);
    // the cache says when it is full, and nothing moves
    attn::Matrix<T> two(B * 2, 7);
    const std::vector<std::int64_t> more{1, 2, 3, 4};
    CHECK_THROWS_AS(attn::model_step(p, more, kv, two), attn::dimension_error);
    CHECK(kv.length() == 5);
  }
}

// ---- the whole model written out in long double from NEXT_SECTIONS.md, reading the parameters
// by their names (nothing of attn's but the names and the buffer's layout) ----
namespace {

using ld = long double;
using LM = std::vector<ld>;  // row-major

struct reference_model {
  const attn::model_config& c;
  std::span<const double> buf;
  std::map<std::string, attn::model_tensor> at;
  std::size_t d, h, dk;

  reference_model(const attn::model_config& config, std::span<const double> b)
      : c(config), buf(b), d(config.d_model), h(config.heads), dk(config.d_model / config.heads) {
    for (const attn::model_tensor& t : attn::model_tensors(c)) at.emplace(t.name, t);
  }
  bool has(const std::string& n) const { return at.count(n) != 0; }
  ld w(const std::string& n, std::size_t i, std::size_t j = 0) const {
    const attn::model_tensor& t = at.at(n);
    return static_cast<ld>(buf[t.offset + i * t.cols + j]);
  }
  LM lin(const LM& x, std::size_t rows, std::size_t k, const std::string& W, std::size_t cols, const std::string& b) const {
    LM y(rows * cols);
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t j = 0; j < cols; ++j) {
        ld s = has(b) ? w(b, 0, j) : 0;
        for (std::size_t m = 0; m < k; ++m) s += x[r * k + m] * w(W, m, j);
        y[r * cols + j] = s;
      }
    return y;
  }
  LM norm(const LM& x, const std::string& n) const {
    const std::size_t rows = x.size() / d;
    LM y(x.size());
    const ld eps = static_cast<ld>(static_cast<double>(c.norm_eps));
    for (std::size_t r = 0; r < rows; ++r) {
      ld mu = 0, var = 0;
      for (std::size_t i = 0; i < d; ++i) mu += x[r * d + i];
      mu /= static_cast<ld>(d);
      for (std::size_t i = 0; i < d; ++i) var += (x[r * d + i] - mu) * (x[r * d + i] - mu);
      var /= static_cast<ld>(d);
      for (std::size_t i = 0; i < d; ++i)
        y[r * d + i] = w(n + ".gamma", 0, i) * (x[r * d + i] - mu) / std::sqrt(var + eps) + w(n + ".beta", 0, i);
    }
    return y;
  }
  ld act(ld x) const {
    switch (c.act) {
      case attn::activation::relu: return x > 0 ? x : 0;
      case attn::activation::gelu: return x * std::erfc(-x / std::sqrt(2.0L)) / 2;
      default: {
        const ld k = std::sqrt(2 / (4 * std::atan(1.0L)));
        return x * (1 + std::tanh(k * (x + 0.044715L * x * x * x))) / 2;
      }
    }
  }
  // RoPE, interleaved pairs, on one head's dk numbers at position pos
  void rope(ld* v, std::size_t pos) const {
    for (std::size_t i = 0; i < dk / 2; ++i) {
      const ld phi = static_cast<ld>(pos) * std::pow(10000.0L, -static_cast<ld>(2 * i) / static_cast<ld>(dk));
      const ld a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * std::cos(phi) - b * std::sin(phi);
      v[2 * i + 1] = a * std::sin(phi) + b * std::cos(phi);
    }
  }
  // multi-head attention of one sentence: queries from x (tq rows), keys/values from kv (n rows)
  LM attention(const LM& x, std::size_t tq, const LM& kv, std::size_t n, const std::string& a, bool self, bool causal) const {
    LM Q = lin(x, tq, d, a + ".W_Q", d, a + ".b_Q"), K = lin(kv, n, d, a + ".W_K", d, a + ".b_K"),
       V = lin(kv, n, d, a + ".W_V", d, a + ".b_V");
    if (self && c.positions == attn::position_encoding::rotary)
      for (std::size_t i = 0; i < h; ++i) {
        for (std::size_t t = 0; t < tq; ++t) rope(&Q[t * d + i * dk], t);
        for (std::size_t j = 0; j < n; ++j) rope(&K[j * d + i * dk], j);
      }
    LM Z(tq * d);
    for (std::size_t i = 0; i < h; ++i) {
      // ALiBi's slopes for h a power of 2 (the tests' h): 2^(−8(i+1)/h)
      const ld m = self && c.positions == attn::position_encoding::alibi
                       ? std::pow(2.0L, -8.0L * static_cast<ld>(i + 1) / static_cast<ld>(h))
                       : 0;
      reference::attention_head(Q.data(), K.data(), V.data(), Z.data(), d, i * dk, tq, n, dk, causal, m);
    }
    return lin(Z, tq, d, a + ".W_O", d, a + ".b_O");
  }
  static LM add(LM u, const LM& v) {
    for (std::size_t k = 0; k < u.size(); ++k) u[k] += v[k];
    return u;
  }
  LM ffn(const LM& x, std::size_t rows, const std::string& f) const {
    const std::size_t dff = at.at(f + ".W_1").cols;
    LM hdn = lin(x, rows, d, f + ".W_1", dff, f + ".b_1");
    for (ld& v : hdn) v = act(v);
    return lin(hdn, rows, dff, f + ".W_2", d, f + ".b_2");
  }
  LM block(const LM& x, std::size_t tq, const std::string& at_, bool causal, const LM* mem, std::size_t n) const {
    const bool pre = c.placement == attn::norm_placement::pre;
    if (!pre) {
      LM s = norm(add(x, attention(x, tq, x, tq, at_ + ".attention", true, causal)), at_ + ".norm_1");
      if (mem) s = norm(add(s, attention(s, tq, *mem, n, at_ + ".cross_attention", false, false)), at_ + ".norm_cross");
      return norm(add(s, ffn(s, tq, at_ + ".ffn")), at_ + ".norm_2");
    }
    const LM a = norm(x, at_ + ".norm_1");
    LM s = add(x, attention(a, tq, a, tq, at_ + ".attention", true, causal));
    if (mem) s = add(s, attention(norm(s, at_ + ".norm_cross"), tq, *mem, n, at_ + ".cross_attention", false, false));
    return add(s, ffn(norm(s, at_ + ".norm_2"), tq, at_ + ".ffn"));
  }
  LM embed(std::span<const std::int64_t> toks) const {
    LM x(toks.size() * d);
    for (std::size_t t = 0; t < toks.size(); ++t)
      for (std::size_t i = 0; i < d; ++i) {
        ld v = w("token_embedding", static_cast<std::size_t>(toks[t]), i);
        if (c.positions == attn::position_encoding::learned) v += w("position_table", t, i);
        if (c.positions == attn::position_encoding::sinusoidal) {
          const ld freq = std::pow(10000.0L, -static_cast<ld>(i - i % 2) / static_cast<ld>(d));
          v += i % 2 == 0 ? std::sin(static_cast<ld>(t) * freq) : std::cos(static_cast<ld>(t) * freq);
        }
        x[t * d + i] = v;
      }
    return x;
  }
  // the logits of one sentence (and its source, for an encoder–decoder)
  LM logits(std::span<const std::int64_t> toks, std::span<const std::int64_t> src) const {
    const std::size_t tq = toks.size(), V = c.vocabulary;
    LM mem;
    const bool enc_dec = c.family == attn::model_family::encoder_decoder;
    if (enc_dec) {
      mem = embed(src);
      for (std::size_t l = 0; l < c.layers; ++l) mem = block(mem, src.size(), "encoder." + std::to_string(l), false, nullptr, 0);
      if (c.final_norm) mem = norm(mem, "encoder_norm");
    }
    LM x = embed(toks);
    const std::string stack = c.family == attn::model_family::encoder ? "encoder." : "decoder.";
    for (std::size_t l = 0; l < c.layers; ++l)
      x = block(x, tq, stack + std::to_string(l), c.family != attn::model_family::encoder, enc_dec ? &mem : nullptr, src.size());
    if (c.final_norm) x = norm(x, "final_norm");
    LM out(tq * V);
    for (std::size_t t = 0; t < tq; ++t)
      for (std::size_t v = 0; v < V; ++v) {
        ld s = 0;
        for (std::size_t i = 0; i < d; ++i) s += x[t * d + i] * (c.tied ? w("token_embedding", v, i) : w("output", i, v));
        out[t * V + v] = s;
      }
    return out;
  }
};

}  // namespace

TEST_CASE("model_forward: the logits of NEXT_SECTIONS.md's model, written out in long double", "[model]") {
  using F = attn::model_family;
  using P = attn::position_encoding;
  std::mt19937_64 rng(133);
  for (const F family : {F::encoder, F::decoder, F::encoder_decoder})
    for (const P positions : {P::learned, P::sinusoidal, P::rotary, P::alibi})
      for (const bool pre : {false, true}) {
        const bool tied = positions == P::sinusoidal || positions == P::alibi, final_norm = pre != tied;
        const attn::model_config config{.family = family, .vocabulary = 6, .d_model = 8, .layers = 2, .heads = 2,
                                        .d_ff = 10, .max_positions = 5, .positions = positions,
                                        .act = pre ? attn::activation::gelu_tanh : attn::activation::gelu,
                                        .placement = pre ? attn::norm_placement::pre : attn::norm_placement::post,
                                        .final_norm = final_norm, .tied = tied};
        INFO(family_name(family) << ", " << positions_name(positions) << (tied ? ", tied" : ", untied")
                                 << (final_norm ? ", final norm" : "") << (pre ? ", pre-LN" : ", post-LN"));
        model_case<double> m(config, rng);
        m.tokens = {1, 5, 2, 0, 3, 3, 4, 1};  // B = 2 sentences of 4
        m.source = {2, 0, 1, 4, 5, 3};        // of 3
        const std::vector<double> got = m.logits(std::span<double>(m.buffer));
        const reference_model ref(config, m.buffer);
        ld top = 0;
        LM want;
        for (std::size_t b = 0; b < 2; ++b) {
          const LM one = ref.logits(std::span<const std::int64_t>(m.tokens).subspan(b * 4, 4),
                                    std::span<const std::int64_t>(m.source).subspan(b * 3, 3));
          want.insert(want.end(), one.begin(), one.end());
        }
        for (const ld v : want) top = std::max(top, std::abs(v));
        // Each logit passes through two blocks (each ~ 3d + d_ff + n roundings per entry, amplified by
        // the norms' 1/σ: σ ≥ 0.1 here, so ×10 a norm, four norms at most on a path) and the final
        // product: 64·(3d + d_ff + T)·ε·10⁴ relative to the largest logit bounds it with room.
        const ld bound = 64 * static_cast<ld>(3 * 8 + 10 + 4) * static_cast<ld>(std::numeric_limits<double>::epsilon()) *
                         1e4L * std::max(top, 1.0L);
        REQUIRE(got.size() == want.size());
        for (std::size_t k = 0; k < got.size(); ++k) CHECK(std::abs(static_cast<ld>(got[k]) - want[k]) <= bound);
      }
}

TEST_CASE("model_named_tensors: a checkpoint in safetensors round-trips; another model's is refused untouched",
          "[model][safetensors]") {
  const attn::model_config c{.family = attn::model_family::encoder_decoder, .vocabulary = 9, .d_model = 8,
                             .layers = 2, .heads = 2, .max_positions = 5, .final_norm = true};
  std::vector<float> w(attn::parameter_count(c)), back(w.size(), -1.f);
  attn::initialize(attn::bind_parameters<float>(c, std::span<float>(w)), 4);
  const std::vector<std::byte> file =
      attn::save_safetensors(attn::model_named_tensors<const float>(c, std::span<const float>(w)), {{"what", "test"}});
  const attn::safetensors_metadata meta = attn::load_safetensors(file, attn::model_named_tensors<float>(c, std::span<float>(back)));
  CHECK(w == back);
  CHECK(meta.at("what") == "test");
  // the names and shapes as the header says them
  const attn::safetensors_header h = attn::read_safetensors_header(file);
  REQUIRE(h.tensors.size() == attn::model_tensors(c).size());
  CHECK(h.tensors[0].name == "token_embedding");
  CHECK(h.tensors[0].shape == std::vector<std::size_t>{9, 8});
  // a model of another width: refused by name, nothing written
  attn::model_config wider = c;
  wider.d_ff = 40;
  std::vector<float> other(attn::parameter_count(wider), 3.f);
  CHECK_THROWS_AS(attn::load_safetensors(file, attn::model_named_tensors<float>(wider, std::span<float>(other))),
                  attn::file_error);
  for (const float x : other) CHECK(x == 3.f);
  CHECK_THROWS_AS(attn::model_named_tensors<float>(c, std::span<float>(other)), attn::dimension_error);
}

TEST_CASE("model_generate: greedy tokens are the forward's argmax, step after step; sampling is seeded",
          "[model][cache]") {
  const attn::model_config c{.vocabulary = 11, .d_model = 8, .layers = 2, .heads = 2, .max_positions = 10,
                             .positions = attn::position_encoding::rotary, .placement = attn::norm_placement::pre,
                             .final_norm = true, .tied = true};
  std::vector<double> w(attn::parameter_count(c));
  const attn::model_parameters<double> p = attn::bind_parameters<double>(c, std::span<double>(w));
  attn::initialize(p, 21);
  for (double& x : w) x *= 20;  // (sharper logits than the initialisation's, so the argmax is clear)
  const std::vector<std::int64_t> prompt{3, 1, 4, 1, 5, 9};  // B = 2 sentences of 3
  std::vector<std::int64_t> out(2 * 5);
  attn::model_kv_cache<double> kv(c, 2, 10);
  attn::random_generator gen(5);
  attn::model_generate(p, prompt, kv, out, gen, {.temperature = 0});
  CHECK(kv.length() == 3 + 5 - 1);
  // each greedy token is the argmax of the uncached forward over the sentence so far
  for (std::size_t b = 0; b < 2; ++b) {
    std::vector<std::int64_t> sentence(prompt.begin() + static_cast<std::ptrdiff_t>(3 * b),
                                       prompt.begin() + static_cast<std::ptrdiff_t>(3 * b + 3));
    for (std::size_t i = 0; i < 5; ++i) {
      attn::model_cache<double> cache;
      attn::Matrix<double> logits(sentence.size(), 11);
      attn::model_forward(p, {.tokens = sentence}, logits, cache);
      INFO("sentence " << b << ", token " << i);
      CHECK(out[b * 5 + i] == static_cast<std::int64_t>(attn::greedy(logits.row(sentence.size() - 1))));
      sentence.push_back(out[b * 5 + i]);
    }
  }
  // sampled: the same seed, the same tokens; the cache refuses what does not fit, before writing
  std::vector<std::int64_t> a(10), b2(10);
  attn::model_kv_cache<double> k1(c, 2, 10), k2(c, 2, 10);
  attn::random_generator g1(7), g2(7);
  attn::model_generate(p, prompt, k1, a, g1, {.temperature = 1.0, .top_k = 4});
  attn::model_generate(p, prompt, k2, b2, g2, {.temperature = 1.0, .top_k = 4});
  CHECK(a == b2);
  std::vector<std::int64_t> too_many(2 * 9, -7);  // 3 + 9 − 1 = 11 positions > 10
  attn::model_kv_cache<double> k3(c, 2, 10);
  CHECK_THROWS_AS(attn::model_generate(p, prompt, k3, too_many, g1), attn::dimension_error);
  CHECK(k3.length() == 0);
  CHECK(too_many[0] == -7);
}

TEST_CASE("model_forward: padding changes nothing a real token computes", "[model]") {
  // Sentence A (3 tokens) alone, and padded to 5 in a batch beside another sentence: A's logits
  // agree to the roundings of sums over keys in another grouping (the tiles take 3 or 5 keys);
  // an encoder–decoder's padded source the same for the decoder's logits.
  using F = attn::model_family;
  for (const F family : {F::encoder, F::encoder_decoder}) {
    INFO(family_name(family));
    const attn::model_config c{.family = family, .vocabulary = 7, .d_model = 8, .layers = 2, .heads = 2,
                               .max_positions = 5, .placement = attn::norm_placement::pre, .final_norm = true};
    std::vector<double> w(attn::parameter_count(c));
    const attn::model_parameters<double> p = attn::bind_parameters<double>(c, std::span<double>(w));
    attn::initialize(p, 8);
    for (double& x : w) x *= 10;  // (larger weights: padding that leaked would show)
    const bool enc_dec = family == F::encoder_decoder;
    const std::vector<std::int64_t> alone{2, 5, 1}, padded{2, 5, 1, 6, 6, 3, 3, 4, 0, 1};
    const std::vector<std::int64_t> src_alone{4, 1}, src_padded{4, 1, 6, 2, 5, 0, 3, 3};
    const bool mask[10] = {true, true, true, false, false, true, true, true, true, true};
    const bool src_mask[8] = {true, true, false, false, true, true, true, true};
    attn::model_cache<double> c1, c2;
    attn::Matrix<double> l1(3, 7), l2(10, 7), l3(5, 7);
    if (enc_dec) {
      // the source padded, the decoder's tokens the same 3 (+2 of sentence B's)
      const std::vector<std::int64_t> t2{2, 5, 1, 3, 3, 4};
      attn::Matrix<double> l4(6, 7);
      attn::model_forward(p, {.tokens = alone, .source = src_alone}, l1, c1);
      attn::model_forward(p, {.tokens = t2, .batch = 2, .source = src_padded, .source_mask = src_mask}, l4, c2);
      for (std::size_t t = 0; t < 3; ++t)
        for (std::size_t j = 0; j < 7; ++j) CHECK(std::abs(l4(t, j) - l1(t, j)) <= 1e-12 * (1 + std::abs(l1(t, j))));
      // decoding with the padded source: the forward's rows
      attn::model_kv_cache<double> kv(c, 2, 5);
      attn::model_encode(p, src_padded, kv, src_mask);
      attn::Matrix<double> step(6, 7);
      attn::model_step(p, t2, kv, step);
      for (std::size_t t = 0; t < 6; ++t)
        for (std::size_t j = 0; j < 7; ++j) CHECK(step(t, j) == l4(t, j));
    } else {
      attn::model_forward(p, {.tokens = alone}, l1, c1);
      attn::model_forward(p, {.tokens = padded, .batch = 2, .token_mask = mask}, l2, c2);
      for (std::size_t t = 0; t < 3; ++t)
        for (std::size_t j = 0; j < 7; ++j) CHECK(std::abs(l2(t, j) - l1(t, j)) <= 1e-12 * (1 + std::abs(l1(t, j))));
      // without the mask the padding does leak (the check above can fail)
      attn::model_forward(p, {.tokens = std::span<const std::int64_t>(padded).first(5)}, l3, c2);
      double moved = 0;
      for (std::size_t j = 0; j < 7; ++j) moved = std::max(moved, std::abs(l3(0, j) - l1(0, j)));
      CHECK(moved > 1e-6);
    }
  }
  // a mask of another size is refused by name
  const attn::model_config c{.family = F::encoder, .vocabulary = 7, .d_model = 8, .heads = 2, .max_positions = 5};
  std::vector<double> w(attn::parameter_count(c));
  const attn::model_parameters<double> p = attn::bind_parameters<double>(c, std::span<double>(w));
  attn::model_cache<double> cache;
  attn::Matrix<double> l(3, 7);
  const std::vector<std::int64_t> toks{1, 2, 3};
  const bool two[2] = {true, false};
  CHECK_THROWS_MATCHES(attn::model_forward(p, {.tokens = toks, .token_mask = two}, l, cache), attn::dimension_error,
                       Catch::Matchers::Message("attn::model_forward: size of the token mask is 2 but the number of tokens "
                                                "is 3"));
}
