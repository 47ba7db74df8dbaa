// The tiny transformer whole (attn/model.hpp): every parameter's gradient against central
// differences in double, tensor by tensor, in each family (encoder, decoder, encoder–decoder),
// tied and untied, with each kind of positions, post- and pre-LN, with and without the final
// norm; the layout of the one buffer; accumulation; the errors.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "attn/gradcheck.hpp"
#include "attn/model.hpp"
#include "attn_catch.hpp"

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

  model_case(attn::model_config config, std::mt19937_64& rng) : c(config), buffer(attn::parameter_count(config)) {
    std::normal_distribution<double> normal(0, 0.5);
    for (T& v : buffer) v = static_cast<T>(normal(rng));
    // the norms' γ near 1 (a norm of γ ≈ 0 would hide its input's gradient)
    for (const attn::model_tensor& t : attn::model_tensors(c))
      if (t.name.ends_with(".gamma"))
        for (std::size_t i = 0; i < t.cols; ++i) buffer[t.offset + i] += T(1);
  }
  attn::model_input input() const {
    return {.tokens = tokens, .batch = batch,
            .source = c.family == attn::model_family::encoder_decoder ? std::span<const std::int64_t>(source)
                                                                       : std::span<const std::int64_t>()};
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
    bool tied, final_norm, pre;
  };
  const variant variants[] = {
      {F::decoder, P::learned, false, false, false},   {F::decoder, P::learned, true, true, true},
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
                                 << ": dL/d" << t.name);
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
  for (const double v : gbuf) CHECK(v == 3.0);
  attn::model_backward(p, {.tokens = good}, cache, logits, g);
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
