#pragma once
/// \file examples/attn_calc/model_walk.hpp
/// attn-calc --model: the tiny model's forward, step by step (the unit's §10–§13; docs/model.md).
/// A decoder of one block (d_model 8, two heads of 4, a feed-forward layer of 32 GELU units,
/// pre-LN with a final LayerNorm, learned positions, GPT-2's arrangement) over a vocabulary of
/// the sentence's own words (in the order they first appear), every parameter from
/// attn::initialize with the author's --seed. It walks tokens → E[y] + P[t] = X₀ → the block's
/// stages → H = LN_f(X₁) → logits → softmax over the next word, with each head's causal map and
/// the per-position losses of attn::cross_entropy (each word's target the word after it) and
/// their mean. Every number comes from the library (attn::model_forward and its cache,
/// attn::multi_head_attention asked for the maps, attn::softmax, attn::cross_entropy); this file
/// names, orders and prints them, in attn-calc's formats.
///
/// Kept apart from parse.hpp and lessons.hpp: main.cpp hands every command line holding --model
/// to run() (its own options, below) before attn-calc's parser sees it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attn/cross_entropy.hpp"
#include "attn/heads.hpp"
#include "attn/model.hpp"
#include "attn/report/json.hpp"
#include "attn/report/svg.hpp"
#include "attn/softmax.hpp"
#include "lessons.hpp"
#include "parse.hpp"
#include "render.hpp"

namespace attn_calc::model_walk {

/// The options of --model, and what they are without them.
struct options {
  std::vector<std::string> words{"I", "drink", "green", "tea", "."};  ///< --words: the sentence (W10's)
  std::uint64_t seed = 0;                                             ///< --seed
  bool steps = false;                                                 ///< --steps: every stage
  config out;                                                         ///< --format, --decimals
};

/// The walk's model: d_model 8, one block, two heads (d_k = 4), d_ff 32, pre-LN with a final
/// norm, learned positions, GELU, biases; V = the sentence's distinct words, T of them.
[[nodiscard]] inline attn::model_config model_of(std::size_t vocabulary, std::size_t T) {
  return {.family = attn::model_family::decoder, .vocabulary = vocabulary, .d_model = 8, .layers = 1, .heads = 2,
          .d_ff = 32, .max_positions = T, .positions = attn::position_encoding::learned,
          .act = attn::activation::gelu, .placement = attn::norm_placement::pre, .final_norm = true};
}

inline constexpr std::string_view help_text = R"(
The tiny model's forward (--model; its own options, none of the map's):
  --model             a decoder of one block (d_model 8, two heads, 32 GELU units, pre-LN,
                      a final LayerNorm, learned positions) over a vocabulary of the
                      sentence's words, initialised by attn::initialize from --seed: the
                      tokens, each head's causal map, the softmax over the next word at
                      each position, each position's loss (its target the next word) and
                      their mean
                        e.g. --model    --model --format json    --model --format svg > maps.svg
  --words LIST        with --model: the sentence, one word a token (default
                      "I,drink,green,tea,.", W10's), or @file with one word a line
                        e.g. --model --words "the,cat,sat,on,the,mat"
  --seed N            with --model: the parameters' seed, 0..2^32-1 (default 0)
                        e.g. --model --seed 7
  --steps             with --model: every stage's numbers: E[y], P[t], X0, LN1, the maps,
                      attention's output, the residual, LN2, the FFN's hidden layer before
                      and after GELU, its output, the block's output, LN_f, the logits
                        e.g. --model --steps --format md
  (--format text, md, latex, json, csv (the losses), csv-long (every table) or svg (the
   maps); --decimals D)
)";

/// Whether the command line asks for --model (then run() takes all of it).
[[nodiscard]] inline bool wanted(const std::vector<std::string_view>& args) noexcept {
  for (const auto a : args)
    if (a == "--model") return true;
  return false;
}

/// --model's options; usage_error naming the option for anything else.
[[nodiscard]] inline options parse(const std::vector<std::string_view>& args) {
  options o;
  bool words = false, seed = false, format = false, decimals = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view name = args[i], value;
    bool has_value = false;
    if (const auto eq = name.find('='); name.starts_with("--") && eq != std::string_view::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    const auto take = [&](bool& given) {
      if (given) throw usage_error(std::string(name) + " is given twice");
      given = true;
      if (has_value) return value;
      if (i + 1 >= args.size()) throw usage_error(std::string(name) + " needs a value");
      return args[++i];
    };
    if (name == "--model" || name == "--steps") {
      if (has_value) throw usage_error(std::string(name) + " takes no value");
      if (name == "--steps") o.steps = true;
    } else if (name == "--words") {
      o.words = labels_argument(take(words), "--words");
    } else if (name == "--seed") {
      const std::string_view t = trim(take(seed));
      std::uint64_t s = 0;
      const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), s);
      if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || s > 0xFFFFFFFFull)
        throw usage_error("--seed: " + shown(t) + " is not a whole number in 0..4294967295");
      o.seed = s;
    } else if (name == "--format") {
      const std::string_view f = trim(take(format));
      bool known = false;
      for (const auto k : {output_format::text, output_format::md, output_format::latex, output_format::json,
                           output_format::csv, output_format::csv_long, output_format::svg})
        if (format_name(k) == f) o.out.format = k, known = true;
      if (!known) throw usage_error("--format: " + shown(f) + " is not a format (text, md, latex, json, csv, csv-long, svg)");
    } else if (name == "--decimals") {
      o.out.decimals = parse_int(take(decimals), "--decimals", 0, 17);
    } else {
      throw usage_error(std::string(name) +
                        " is not an option of --model (it takes --words, --seed, --steps, --format, --decimals)");
    }
  }
  if (o.words.size() < 2) throw usage_error("--model --words: a sentence of at least 2 words (a next word to predict)");
  if (o.words.size() > 64) throw usage_error("--model --words: at most 64 words, not " + std::to_string(o.words.size()));
  return o;
}

/// The walk: every table, in the order printed; L.main (csv) the losses.
[[nodiscard]] inline lesson_results walk(const options& o) {
  using attn::report::cell;
  using detail::numbered_cells;
  const std::size_t T = o.words.size();
  std::vector<std::string> vocab;
  std::vector<std::int64_t> tokens, targets;
  for (const auto& w : o.words) {
    std::size_t v = 0;
    while (v < vocab.size() && vocab[v] != w) ++v;
    if (v == vocab.size()) vocab.push_back(w);
    tokens.push_back(static_cast<std::int64_t>(v));
  }
  for (std::size_t t = 0; t < T; ++t) targets.push_back(t + 1 < T ? tokens[t + 1] : -100);  // the last: no next word
  const attn::model_config mc = model_of(vocab.size(), T);
  std::vector<double> buffer(attn::parameter_count(mc));
  const auto p = attn::bind_parameters<double>(mc, buffer);
  attn::initialize(p, o.seed);
  attn::model_cache<double> cache;
  attn::Matrix<double> logits(T, vocab.size());
  attn::model_forward(p, attn::model_input{.tokens = tokens}, logits, cache);
  // each head's causal map: the block's attention on its input LN₁(X₀), asked for its weights
  const auto bp = attn::detail::model_block(mc, p.decoder[0]);
  const auto& bc = cache.blocks[0];
  attn::Matrix<double> maps(mc.heads * T, T), again_out(T, mc.d_model);
  attn::multi_head_cache<double> again;
  attn::options causal;
  causal.causal = true;
  attn::multi_head_attention(bc.normed_1, bp.attention,
                             attn::multi_head_views<double>{.out = again_out.view(), .maps = maps.view()}, again, causal);
  attn::Matrix<double> probabilities(T, vocab.size());
  for (std::size_t t = 0; t < T; ++t) attn::softmax(logits.row(t), probabilities.row(t));
  std::vector<double> losses(T);
  const double mean = attn::cross_entropy(logits, targets, losses);
  attn::Matrix<double> per(T - 1, 2), mean_m(1, 1);
  for (std::size_t t = 0; t + 1 < T; ++t) {
    per(t, 0) = probabilities(t, static_cast<std::size_t>(targets[t]));
    per(t, 1) = losses[t];
  }
  mean_m(0, 0) = mean;
  attn::Matrix<double> E_rows(T, mc.d_model), P_rows(T, mc.d_model), token_ids(T, 1);
  for (std::size_t t = 0; t < T; ++t) {
    token_ids(t, 0) = static_cast<double>(tokens[t]);
    for (std::size_t i = 0; i < mc.d_model; ++i) {
      E_rows(t, i) = p.token_embedding(static_cast<std::size_t>(tokens[t]), i);
      P_rows(t, i) = p.position_table(t, i);
    }
  }

  lesson_results L;
  L.heading = {"attn-calc: the tiny model's forward on \"" + [&] {
                 std::string s;
                 for (const auto& w : o.words) s += (s.empty() ? "" : " ") + w;
                 return s;
               }() + "\" (seed " + std::to_string(o.seed) + ")"};
  L.paragraph(cell{"A decoder of one block: d_model 8, two heads (scaled dot, d_k = 4, causal), a feed-forward layer "
                   "of 32 GELU units, pre-LN with a final LayerNorm, learned positions; a vocabulary of the sentence's " +
                   std::to_string(vocab.size()) + " words; every parameter from attn::initialize with seed " +
                   std::to_string(o.seed) + ". X₀ = E[y] + P[t]; A = LN₁(X₀); H₁ = X₀ + MHA(A); B = LN₂(H₁); X₁ = H₁ + "
                   "FFN(B); H = LN_f(X₁); logits = H W_vocab; each position's loss −log p(the next word)."});
  std::vector<cell> words, vocab_cells, head_rows, next_rows;
  for (const auto& w : o.words) words.emplace_back(w);
  for (const auto& w : vocab) vocab_cells.emplace_back(w);
  for (std::size_t h = 0; h < mc.heads; ++h)
    for (std::size_t t = 0; t < T; ++t) head_rows.emplace_back("head " + std::to_string(h + 1) + ": " + o.words[t]);
  for (std::size_t t = 0; t + 1 < T; ++t) next_rows.emplace_back(o.words[t] + " → " + o.words[t + 1]);
  const auto add = [&](std::string id, std::string title, const std::vector<cell>& rows, std::vector<cell> cols,
                       const attn::Matrix<double>& m, bool input = false) {
    return L.table({std::move(id), cell(std::move(title)), {"word"}, rows, std::move(cols), m, input});
  };
  const auto dims = [&] { return numbered_cells(mc.d_model, 1); };
  add("tokens", "The tokens y: each word's place in the vocabulary (" + [&] {
        std::string s;
        for (std::size_t v = 0; v < vocab.size(); ++v) s += (v ? ", " : "") + std::to_string(v) + " " + vocab[v];
        return s;
      }() + ")", words, {cell("y")}, token_ids, true);
  if (o.steps) {
    add("E", "Token embeddings E[y] (the rows of E the tokens pick)", words, dims(), E_rows);
    add("P", "Learned positions P[t]", words, dims(), P_rows);
    add("X0", "X₀ = E[y] + P[t]", words, dims(), cache.embedded);
    add("A", "The first norm: A = LN₁(X₀)", words, dims(), bc.normed_1);
  }
  add("map", "Each head's causal map: softmax(Q Kᵀ / √4) over the words so far (rows ask, columns answer)", head_rows,
      words, maps);
  if (o.steps) {
    add("attention", "Attention output MHA(A) (both heads through W_O)", words, dims(), bc.attention_out);
    add("H1", "After the first residual: H₁ = X₀ + MHA(A)", words, dims(), bc.residual_1);
    add("B", "The second norm: B = LN₂(H₁)", words, dims(), bc.residual_2);
    add("ffn_pre", "FFN hidden layer before the activation: B W₁ + b₁", words, numbered_cells(32, 1), bc.ffn.pre);
    add("ffn_hidden", "FFN hidden layer after the activation: GELU(B W₁ + b₁)", words, numbered_cells(32, 1),
        bc.ffn.hidden);
    add("ffn_out", "FFN output: GELU(B W₁ + b₁) W₂ + b₂", words, dims(), bc.ffn_out);
    add("X1", "The block's output: X₁ = H₁ + FFN(B)", words, dims(), cache.outputs[0]);
    add("H", "The final norm: H = LN_f(X₁)", words, dims(), cache.hidden);
    add("logits", "Logits: H W_vocab, one column per word of the vocabulary", words, vocab_cells, logits);
  }
  add("probabilities", "The next word: softmax of each position's logits over the vocabulary", words, vocab_cells,
      probabilities);
  L.main = add("losses", "Each position's loss: −log p(the next word)", next_rows,
               {cell("p(next)"), cell("loss")}, per);
  add("mean_loss", "The loss: the mean over the " + std::to_string(T - 1) + " positions with a next word", {cell("L")},
      {cell("mean")}, mean_m);
  L.texts = {{"arrangement", "decoder, pre-LN, final LayerNorm, learned positions, GELU"}};
  L.numbers = {{"seed", static_cast<double>(o.seed)}, {"d_model", 8.0}, {"heads", 2.0}, {"d_ff", 32.0},
               {"vocabulary", static_cast<double>(vocab.size())}, {"parameters", static_cast<double>(buffer.size())}};
  return L;
}

/// The walk as JSON: "mode": "model", its options, and every table as attn-calc's lessons write them.
[[nodiscard]] inline std::string render_json(const options& o, const lesson_results& L) {
  attn::report::json_writer j;
  j.begin_object();
  j.key("tool").string("attn-calc");
  j.key("mode").string("model");
  j.key("options").begin_object();
  j.key("words").strings(o.words);
  for (const auto& [k, v] : L.texts) j.key(k).string(v);
  for (const auto& [k, v] : L.numbers) j.key(k).number(v);
  j.key("steps").boolean(o.steps);
  j.key("decimals").integer(o.out.decimals);
  j.end_object();
  j.key("tables");
  detail::json_lesson_tables(j, L, o.out.decimals);
  j.end_object();
  return j.str();
}

/// The maps as SVG: one panel per head, the future hatched (the causal mask).
[[nodiscard]] inline std::string render_svg(const options& o, const lesson_results& L) {
  const std::size_t T = o.words.size();
  const lesson_table* maps = nullptr;
  for (const auto& t : L.tables)
    if (t.id == "map") maps = &t;
  attn::report::heatmap_options opt;
  opt.title = "The tiny model's causal maps, seed " + std::to_string(o.seed) + " (each row sums to 1)";
  opt.row_axis = "queries (words)";
  opt.col_axis = "keys (words so far)";
  opt.decimals = o.out.decimals;
  opt.legend_title = "weight α";
  opt.id = "model";
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < T; ++j) opt.masked.push_back(j > t);
  std::vector<attn::report::heatmap_panel> panels;
  std::vector<attn::Matrix<double>> heads;
  for (std::size_t h = 0; h * T < maps->values.rows(); ++h) {
    attn::Matrix<double> m(T, T);
    for (std::size_t t = 0; t < T; ++t)
      for (std::size_t j = 0; j < T; ++j) m(t, j) = maps->values(h * T + t, j);
    heads.push_back(std::move(m));
  }
  for (std::size_t h = 0; h < heads.size(); ++h) panels.push_back({heads[h].view(), "head " + std::to_string(h + 1)});
  return attn::report::heatmap_grid_svg(panels, o.words, o.words, opt, 0);
}

/// attn-calc --model …: the walk in the format asked for.
[[nodiscard]] inline std::string run(const std::vector<std::string_view>& args) {
  const options o = parse(args);
  const lesson_results L = walk(o);
  for (const auto& t : L.tables)
    for (std::size_t i = 0; i < t.values.rows(); ++i)
      for (std::size_t k = 0; k < t.values.cols(); ++k)
        if (!std::isfinite(t.values(i, k))) throw usage_error("the numbers of the model's walk are not finite");
  switch (o.out.format) {
    case output_format::md: return render_markdown(lesson_document(o.out, L));
    case output_format::latex: return render_latex(lesson_document(o.out, L));
    case output_format::json: return render_json(o, L);
    case output_format::csv: return render_lesson_csv(o.out, L, false);
    case output_format::csv_long: return render_lesson_csv(o.out, L, true);
    case output_format::svg: return render_svg(o, L);
    case output_format::text: break;
  }
  return render_text(lesson_document(o.out, L));
}

}  // namespace attn_calc::model_walk
