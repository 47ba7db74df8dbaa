// A character-level language model, trained on one core (docs/model.md, "A character model").
//
//   char_lm [--file TEXT] [--steps N] [--seed S] [--checkpoint FILE] [--sample N] [--temperature τ]
//           [--top-k K] [--max-loss X] [--log FILE] [--quiet]
//
// Reads a text (by default a licence that ships with Debian), makes its characters the
// vocabulary, and trains a decoder (GPT's arrangement: causal, pre-LN, learned positions, a final
// norm, tied embeddings) to guess every next character of random windows of the text, with AdamW.
// A progress line shows the step, the loss and the tokens per second; at the end the weights go
// to a safetensors checkpoint (their names: attn::model_tensors) and the model writes a sample,
// one character at a time with its key/value cache. --log FILE writes every step's loss and the
// tokens per second so far as CSV (step,loss,tokens_per_second), which
// `attn-calc --loss-curve FILE --vocabulary V --format svg` draws. Exits 1 when the loss did not fall below
// 0.8·ln(vocabulary) (or --max-loss) — a model that learned nothing —, 2 on bad options.

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>  // isatty: the progress line rewrites itself on a terminal only

#include "attn/cross_entropy.hpp"
#include "attn/model.hpp"
#include "attn/optimizer.hpp"
#include "attn/safetensors.hpp"
#include "attn/sampling.hpp"

namespace {

struct settings {
  std::string file = "/usr/share/common-licenses/GPL-3";
  std::size_t steps = 2000, sample = 400, top_k = 0;
  std::uint64_t seed = 1;
  std::string checkpoint = "char_lm.safetensors";
  std::string log;  // --log: empty, no log
  double temperature = 0.8;
  double max_loss = -1;  // < 0: 0.8·ln V
  bool quiet = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "char_lm: %s\n"
               "usage: char_lm [--file TEXT] [--steps N] [--seed S] [--checkpoint FILE] [--sample N]\n"
               "               [--temperature T] [--top-k K] [--max-loss X] [--log FILE] [--quiet]\n"
               "  --file TEXT        the text to learn (default /usr/share/common-licenses/GPL-3)\n"
               "  --steps N          training steps of 16 windows of 64 characters (default 2000)\n"
               "  --seed S           the initialisation's and the windows' seed (default 1)\n"
               "  --checkpoint FILE  where the weights go, safetensors (default char_lm.safetensors)\n"
               "  --sample N         characters to write at the end (default 400)\n"
               "  --temperature T    sampling temperature, 0 for greedy (default 0.8)\n"
               "  --top-k K          sample among the K likeliest characters (default 0: all)\n"
               "  --max-loss X       fail (exit 1) when the loss ends above X (default 0.8 ln V)\n"
               "  --log FILE         every step's loss and tokens/s as CSV: step,loss,tokens_per_second\n"
               "                     (draw it: attn-calc --loss-curve FILE --vocabulary V --format svg)\n"
               "  --quiet            no progress line\n",
               why);
  std::exit(2);
}

std::size_t number(const char* text, const char* what) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0') usage((std::string(what) + " takes a whole number").c_str());
  return static_cast<std::size_t>(v);
}

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--file") s.file = value();
    else if (a == "--steps") s.steps = number(value(), "--steps");
    else if (a == "--seed") s.seed = number(value(), "--seed");
    else if (a == "--checkpoint") s.checkpoint = value();
    else if (a == "--log") s.log = value();
    else if (a == "--sample") s.sample = number(value(), "--sample");
    else if (a == "--top-k") s.top_k = number(value(), "--top-k");
    else if (a == "--temperature") {
      char* end = nullptr;
      const char* t = value();
      s.temperature = std::strtod(t, &end);
      if (end == t || *end != '\0' || !(s.temperature >= 0)) usage("--temperature takes a number >= 0");
    } else if (a == "--max-loss") {
      char* end = nullptr;
      const char* t = value();
      s.max_loss = std::strtod(t, &end);
      if (end == t || *end != '\0' || !(s.max_loss >= 0)) usage("--max-loss takes a number >= 0");
    } else if (a == "--quiet") s.quiet = true;
    else if (a == "--help" || a == "-h") {
      std::printf("char_lm: trains a character-level transformer on a text, saves it, samples from it.\n");
      usage("(help)");
    } else usage(("unknown option " + a).c_str());
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const settings opt = parse(argc, argv);
  std::ifstream in(opt.file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "char_lm: cannot read %s\n", opt.file.c_str());
    return 2;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // the vocabulary: the bytes the text uses, in byte order
  bool used[256] = {};
  for (const char ch : text) used[static_cast<unsigned char>(ch)] = true;
  std::vector<unsigned char> alphabet;
  std::int64_t index_of[256];
  for (int b = 0; b < 256; ++b)
    if (used[b]) {
      index_of[b] = static_cast<std::int64_t>(alphabet.size());
      alphabet.push_back(static_cast<unsigned char>(b));
    }
  constexpr std::size_t T = 64, B = 16;
  if (text.size() < T + 2) {
    std::fprintf(stderr, "char_lm: %s has %zu bytes; it needs at least %zu\n", opt.file.c_str(), text.size(), T + 2);
    return 2;
  }
  std::FILE* log = nullptr;  // --log: opened before training, so that a bad path fails at once
  if (!opt.log.empty() && (log = std::fopen(opt.log.c_str(), "wb")) == nullptr) {
    std::fprintf(stderr, "char_lm: cannot write %s\n", opt.log.c_str());
    return 2;
  }
  bool log_ok = log == nullptr || std::fputs("step,loss,tokens_per_second\n", log) >= 0;
  std::vector<std::int64_t> tokens(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) tokens[i] = index_of[static_cast<unsigned char>(text[i])];

  const attn::model_config config{.family = attn::model_family::decoder, .vocabulary = alphabet.size(),
                                  .d_model = 64, .layers = 2, .heads = 4, .max_positions = T,
                                  .positions = attn::position_encoding::learned,
                                  .placement = attn::norm_placement::pre, .final_norm = true, .tied = true};
  const std::size_t count = attn::parameter_count(config), decayed = attn::decayed_count(config);
  std::vector<float> w(count), g(count), m(count), v(count);
  const attn::model_parameters<float> params = attn::bind_parameters<float>(config, std::span<float>(w));
  const attn::model_parameters<float> grads = attn::bind_parameters<float>(config, std::span<float>(g));
  attn::initialize(params, opt.seed);
  std::printf("char_lm: %s, %zu characters, a vocabulary of %zu; %zu parameters (d_model 64, 2 blocks, 4 heads)\n",
              opt.file.c_str(), text.size(), alphabet.size(), count);

  const auto first = [&](std::vector<float>& x) { return std::span<float>(x).first(decayed); };
  const auto rest = [&](std::vector<float>& x) { return std::span<float>(x).subspan(decayed); };
  attn::adamw_state<float> s_decayed{first(m), first(v)}, s_rest{rest(m), rest(v)};
  const attn::adamw_options decay{.lr = 3e-3, .weight_decay = 0.1}, no_decay{.lr = 3e-3, .weight_decay = 0};
  attn::random_generator windows(opt.seed + 1);
  std::vector<std::int64_t> inputs(B * T), targets(B * T);
  attn::model_cache<float> cache;
  attn::Matrix<float> logits(B * T, alphabet.size());
  double smoothed = std::log(static_cast<double>(alphabet.size()));
  const bool terminal = isatty(fileno(stdout)) != 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t step = 0; step < opt.steps; ++step) {
    for (std::size_t b = 0; b < B; ++b) {
      const std::size_t at = static_cast<std::size_t>(windows.next() % (text.size() - T - 1));
      for (std::size_t t = 0; t < T; ++t) {
        inputs[b * T + t] = tokens[at + t];
        targets[b * T + t] = tokens[at + t + 1];
      }
    }
    const attn::model_input batch{.tokens = inputs, .batch = B};
    attn::model_forward(params, batch, logits, cache);
    const float loss = attn::cross_entropy_backward(logits, targets, logits);
    attn::model_backward(params, batch, cache, logits, grads);
    (void)attn::clip_grad_norm(std::span<float>(g), 1.0);
    attn::adamw_step(first(w), first(g), s_decayed, decay);
    attn::adamw_step(rest(w), rest(g), s_rest, no_decay);
    smoothed = step == 0 ? loss : 0.95 * smoothed + 0.05 * loss;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (log != nullptr)  // the batch's loss (not smoothed), %.9g: a float read back exactly
      log_ok = log_ok && std::fprintf(log, "%zu,%.9g,%.0f\n", step + 1, static_cast<double>(loss),
                                      static_cast<double>((step + 1) * B * T) / seconds) > 0;
    // on a terminal one line rewritten in place every 10 steps; else a line every 100
    if (!opt.quiet && (step % (terminal ? 10 : 100) == 0 || step + 1 == opt.steps)) {
      std::printf("%sstep %5zu/%zu   loss %.3f   %7.0f tokens/s%s", terminal ? "\r" : "", step + 1, opt.steps,
                  smoothed, static_cast<double>((step + 1) * B * T) / seconds, terminal ? "" : "\n");
      std::fflush(stdout);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%strained %zu steps in %.1f s (%.0f tokens/s); loss %.3f (ln %zu = %.3f at the start)\n",
              opt.quiet || !terminal ? "" : "\n", opt.steps, seconds, static_cast<double>(opt.steps * B * T) / seconds, smoothed,
              alphabet.size(), std::log(static_cast<double>(alphabet.size())));

  if (log != nullptr) {
    log_ok = std::fclose(log) == 0 && log_ok;
    if (!log_ok) {
      std::fprintf(stderr, "char_lm: cannot write %s\n", opt.log.c_str());
      return 2;
    }
    std::printf("the log: %s (draw it: attn-calc --loss-curve %s --vocabulary %zu --format svg > curve.svg)\n",
                opt.log.c_str(), opt.log.c_str(), alphabet.size());
  }

  // the checkpoint: every tensor by its name, the alphabet in the metadata
  {
    const auto list = attn::model_named_tensors<const float>(config, std::span<const float>(w));
    std::string chars;
    for (const unsigned char ch : alphabet) chars += std::to_string(ch) + " ";
    attn::save_safetensors(opt.checkpoint, list, {{"format", "attn char_lm"}, {"alphabet_bytes", chars}});
    std::printf("saved %s (%zu tensors)\n", opt.checkpoint.c_str(), list.size());
  }

  // a sample, one character at a time through the cache, starting from the text's first character
  if (opt.sample > 0) {
    attn::model_kv_cache<float> kv(config, 1, T);
    attn::random_generator gen(opt.seed + 2);
    attn::Matrix<float> row(1, alphabet.size());
    std::vector<std::int64_t> written{tokens[0]};
    std::int64_t next = tokens[0];
    std::string out(1, static_cast<char>(alphabet[static_cast<std::size_t>(next)]));
    for (std::size_t i = 0; i < opt.sample; ++i) {
      if (kv.length() == kv.capacity()) {
        // the context holds T characters: start again from the last T/2 written, at once
        kv.clear();
        const std::span<const std::int64_t> last(written.data() + written.size() - T / 2, T / 2 - 1);
        attn::Matrix<float> prefix(last.size(), alphabet.size());
        attn::model_step(params, last, kv, prefix);
      }
      attn::model_step(params, std::span<const std::int64_t>(&next, 1), kv, row);
      next = static_cast<std::int64_t>(
          attn::sample(row.row(0), gen, {.temperature = opt.temperature, .top_k = opt.top_k}));
      out += static_cast<char>(alphabet[static_cast<std::size_t>(next)]);
      written.push_back(next);
    }
    std::printf("--- a sample (temperature %.2f) ---\n%s\n---\n", opt.temperature, out.c_str());
  }
  const double bar = opt.max_loss >= 0 ? opt.max_loss : 0.8 * std::log(static_cast<double>(alphabet.size()));
  if (smoothed >= bar) {
    std::fprintf(stderr, "char_lm: the loss %.3f did not fall below %.3f\n", smoothed, bar);
    return 1;
  }
  return 0;
}
