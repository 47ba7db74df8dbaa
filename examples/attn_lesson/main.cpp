// attn-lesson: writes the unit's widgets as ONE self-contained HTML page (docs/course-authors.md,
// "The lesson page"). The page runs attn itself, compiled to WebAssembly (lesson_module.cpp) and
// inlined as base64; its script only moves numbers between the controls and that module.
//
// Inputs are attn-calc's options and files, read by attn-calc's own parser: the options of the
// map (--q, --notes, --keys/--values, --query-labels, --note-labels, --score and its weights,
// --beta, --decimals) set section 1's translation; --self, --words, --wq, --wk, --wv, --wo and
// --heads set the self-attention lab (default: attn-lesson's small table of words, W3's
// projections). Its own: --widgets LIST, --page-title TEXT, --output FILE (written atomically:
// a failed run leaves the previous page as it was), --module FILE and --template FILE (the
// built module and page; default: where the build put them).
// Exit status: 0 on success, 2 on bad input (one line on stderr says what), 1 if the page cannot
// be written.

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "../attn_calc/model_walk.hpp"
#include "../attn_calc/parse.hpp"
#include "attn/error.hpp"
#include "attn/report/format.hpp"
#include "attn/report/json.hpp"

#ifndef ATTN_LESSON_MODULE
#define ATTN_LESSON_MODULE "lesson_module.js"
#endif
#ifndef ATTN_LESSON_TEMPLATE
#define ATTN_LESSON_TEMPLATE "page.html"
#endif

namespace {

using attn_calc::usage_error;

/// Every widget of the page, in the page's order.
constexpr std::string_view all_widgets[] = {"translate", "scores", "additive",  "lab",  "sqrtd",
                                            "heads",     "causal", "price",     "positions", "block",
                                            "model"};

constexpr std::string_view help_text = R"(attn-lesson: the unit's widgets as one self-contained HTML page, computed by attn
compiled to WebAssembly in the page.

usage: attn-lesson [attn-calc's options] [--widgets LIST] [--page-title TEXT] --output page.html

  the translation (section 1):  --q --notes --keys --values --query-labels --note-labels
                                --score --W --W1 --W2 --v --beta --decimals   (as attn-calc)
  the self-attention lab:       --self --words --wq --wk --wv --wo --heads     (as attn-calc --self)
  the block step by step:       --ffn-w1 --ffn-w2 with --self: the author's block (as attn-calc
                                --block --self); without them W9's
  the tiny model:               --model-words LIST (its sentence, as attn-calc --model --words;
                                default "I,drink,green,tea,.") --seed N (as attn-calc --model --seed)
  --widgets LIST    which widgets, in the page's order, separated by commas (default: all):
                    translate,scores,additive,lab,sqrtd,heads,causal,price,positions,block,model
  --page-title TEXT the page's title (default: "Attention, live")
  --output FILE     where to write the page (atomically); without it, standard output
  --module FILE     the WebAssembly module built from lesson_module.cpp (default: the build's)
  --template FILE   the page (default: the build's copy of examples/attn_lesson/page.html)
)";

std::string read_all(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw usage_error(std::string("cannot read ") + what + " " + attn_calc::shown(path));
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string json_number(double x) { return attn::report::shortest(x); }

std::string json_matrix(const attn_calc::matrix& m) {
  if (m.rows == 0) return "null";
  std::string out = "[";
  for (std::size_t i = 0; i < m.rows; ++i) {
    out += i == 0 ? "[" : ",[";
    for (std::size_t j = 0; j < m.cols; ++j) {
      if (j > 0) out += ',';
      out += json_number(m.data[i * m.cols + j]);
    }
    out += "]";
  }
  return out + "]";
}

std::string json_strings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ',';
    out += attn::report::json_quote(v[i]);
  }
  return out + "]";
}

std::string json_vector(const std::vector<double>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ',';
    out += json_number(v[i]);
  }
  return out + "]";
}

/// JSON inside a <script> element: "</" and "<!--" could end or confuse it, so '<' is escaped.
std::string script_safe(const std::string& json) {
  std::string out;
  for (const char c : json) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return out;
}

void replace_once(std::string& page, std::string_view marker, const std::string& with) {
  const auto at = page.find(marker);
  if (at == std::string::npos) throw usage_error("the template has no " + std::string(marker));
  page.replace(at, marker.size(), with);
}

/// Writes `text` to `path` through a temporary file in the same directory and a rename, so that
/// a failed run never leaves a half-written or empty page where the previous one was.
int write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp-attn-lesson";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())) || !f.flush()) {
      std::fprintf(stderr, "attn-lesson: cannot write %s\n", tmp.c_str());
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return 1;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::fprintf(stderr, "attn-lesson: cannot write %s: %s\n", path.c_str(), ec.message().c_str());
    std::filesystem::remove(tmp, ec);
    return 1;
  }
  return 0;
}

int run(int argc, char** argv) {
  std::vector<std::string_view> map_args, lab_args;
  std::vector<std::string_view> ffn_args;
  std::string model_words, model_seed = "0";
  std::string widgets_arg, output, title = "Attention, live", module_path = ATTN_LESSON_MODULE,
                               template_path = ATTN_LESSON_TEMPLATE;
  const std::set<std::string_view> lab_options = {"--self", "--words", "--wq", "--wk", "--wv", "--wo", "--heads"};
  const std::set<std::string_view> shared_options = {"--beta", "--decimals"};
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fwrite(help_text.data(), 1, help_text.size(), stdout);
      return 0;
    }
    const auto eq = arg.find('=');
    const std::string_view name = arg.starts_with("--") ? arg.substr(0, eq) : arg;
    const bool inline_value = eq != std::string_view::npos && arg.starts_with("--");
    auto value = [&]() -> std::string_view {
      if (inline_value) return arg.substr(eq + 1);
      if (i + 1 >= argc) throw usage_error(std::string(name) + " needs a value");
      return argv[++i];
    };
    if (name == "--widgets") widgets_arg = value();
    else if (name == "--output") output = value();
    else if (name == "--page-title") title = value();
    else if (name == "--module") module_path = value();
    else if (name == "--template") template_path = value();
    else if (name == "--model-words") model_words = value();
    else if (name == "--seed") model_seed = value();
    else if (name == "--ffn-w1" || name == "--ffn-w2") {
      ffn_args.push_back(arg);
      if (!inline_value) ffn_args.push_back(value());
    }
    else if (lab_options.contains(name)) {
      lab_args.push_back(arg);
      if (!inline_value) lab_args.push_back(value());
    } else if (shared_options.contains(name)) {
      map_args.push_back(arg);
      lab_args.push_back(arg);
      if (!inline_value) {
        const std::string_view v = value();
        map_args.push_back(v);
        lab_args.push_back(v);
      }
    } else {
      map_args.push_back(arg);  // attn-calc's parser says what is wrong with anything else
    }
  }

  std::vector<std::string> widgets;
  if (widgets_arg.empty()) {
    for (const auto w : all_widgets) widgets.emplace_back(w);
  } else {
    std::string_view rest = widgets_arg;
    while (true) {
      const auto comma = rest.find(',');
      const std::string_view w = attn_calc::trim(rest.substr(0, comma));
      bool known = false;
      for (const auto k : all_widgets) known = known || k == w;
      if (!known)
        throw usage_error("--widgets: " + attn_calc::shown(w) +
                          " is not a widget (translate, scores, additive, lab, sqrtd, heads, causal, price, positions, block, model)");
      widgets.emplace_back(w);
      if (comma == std::string_view::npos) break;
      rest = rest.substr(comma + 1);
    }
  }

  const attn_calc::config s1 = attn_calc::parse_args(map_args);
  if (s1.self_attention || s1.dot_vs_scaled || s1.format != attn_calc::output_format::text)
    throw usage_error("--format and --dot-vs-scaled are attn-calc's: the page shows its own views");
  if (!s1.mask.empty() || !s1.row_mask.empty() || s1.causal)
    throw usage_error("--mask is not shown by the lesson page (its causal widget masks the lab)");
  if (!s1.beta_sweep.empty())
    throw usage_error("--beta-sweep is attn-calc's chart: the page's \"how sure\" slider sweeps β live");

  std::string lab_json = "null";
  if (!lab_args.empty()) {
    if (std::find(lab_args.begin(), lab_args.end(), std::string_view("--self")) == lab_args.end() &&
        std::none_of(lab_args.begin(), lab_args.end(), [](std::string_view a) { return a.starts_with("--self="); }))
      lab_args.clear();  // only --beta / --decimals: the built-in lab
  }
  if (!lab_args.empty()) {
    const attn_calc::config lab = attn_calc::parse_args(lab_args);
    const auto identity_if_empty = [&](const attn_calc::matrix& m) {
      return m.empty() ? json_matrix(attn_calc::detail::identity(lab.queries.cols)) : json_matrix(m);
    };
    lab_json = "{\"X\":" + json_matrix(lab.queries) + ",\"words\":" + json_strings(lab.query_labels) +
               ",\"WQ\":" + identity_if_empty(lab.WQ) + ",\"WK\":" + identity_if_empty(lab.WK) +
               ",\"WV\":" + identity_if_empty(lab.WV) + ",\"WO\":" + json_matrix(lab.WO) +
               ",\"heads\":" + std::to_string(lab.heads) +
               ",\"scaled\":" + (lab.score == attn_calc::score_kind::dot ? "false" : "true") +
               ",\"source\":\"the author's --self\"}";
  }

  // the block: the author's (--self with --ffn-w1, --ffn-w2, checked by attn-calc --block's parser)
  std::string block_json = "null";
  if (!ffn_args.empty()) {
    if (lab_args.empty()) throw usage_error("--ffn-w1 and --ffn-w2 need --self (the block's sentence and attention)");
    std::vector<std::string_view> block_args{"--block"};
    for (std::size_t i = 0; i < lab_args.size(); ++i) {  // the lab's options but --beta, --decimals
      const std::string_view a = lab_args[i];
      const bool shared = shared_options.contains(a.substr(0, a.find('=')));
      if (shared && a.find('=') == std::string_view::npos) ++i;  // and its value
      if (!shared) block_args.push_back(a);
    }
    block_args.insert(block_args.end(), ffn_args.begin(), ffn_args.end());
    const attn_calc::config b = attn_calc::parse_args(block_args);
    const auto identity_if_empty = [&](const attn_calc::matrix& m) {
      return m.empty() ? json_matrix(attn_calc::detail::identity(b.queries.cols)) : json_matrix(m);
    };
    block_json = "{\"X\":" + json_matrix(b.queries) + ",\"words\":" + json_strings(b.query_labels) +
                 ",\"WQ\":" + identity_if_empty(b.WQ) + ",\"WK\":" + identity_if_empty(b.WK) +
                 ",\"WV\":" + identity_if_empty(b.WV) + ",\"WO\":" + json_matrix(b.WO) + ",\"W1\":" +
                 json_matrix(b.ffn_w1) + ",\"W2\":" + json_matrix(b.ffn_w2) + ",\"heads\":" + std::to_string(b.heads) +
                 ",\"eps\":" + json_number(b.eps) + "}";
  }
  // the tiny model: its sentence and seed, checked by attn-calc --model's parser
  std::vector<std::string_view> model_args{"--model", "--seed", model_seed};
  if (!model_words.empty()) model_args.insert(model_args.end(), {"--words", model_words});
  const auto model = attn_calc::model_walk::parse(model_args);
  const std::string model_json = "{\"words\":" + json_strings(model.words) + ",\"seed\":" + std::to_string(model.seed) + "}";

  const attn_calc::matrix& values = s1.blended();
  std::string data = "{\"title\":" + attn::report::json_quote(title) + ",\"decimals\":" + std::to_string(s1.decimals) +
                     ",\"beta\":" + json_number(s1.beta) + ",\"widgets\":" + json_strings(widgets) +
                     ",\"s1\":{\"Q\":" + json_matrix(s1.queries) + ",\"K\":" + json_matrix(s1.notes) +
                     ",\"V\":" + json_matrix(values) + ",\"qlabels\":" + json_strings(s1.query_labels) +
                     ",\"nlabels\":" + json_strings(s1.note_labels) + ",\"score\":" +
                     std::to_string(static_cast<int>(s1.score)) + ",\"W\":" + json_matrix(s1.W) + ",\"W1\":" +
                     json_matrix(s1.W1) + ",\"W2\":" + json_matrix(s1.W2) + ",\"v\":" + json_vector(s1.v) +
                     ",\"unit\":" + (s1.example == attn_calc::unit_example::e3_alignment_map ? "true" : "false") +
                     "},\"lab\":" + lab_json + ",\"block\":" + block_json + ",\"model\":" + model_json + "}";

  std::string page = read_all(template_path, "the page template");
  std::string module = read_all(module_path, "the WebAssembly module");
  if (module.find("</") != std::string::npos)
    throw usage_error("the module " + attn_calc::shown(module_path) + " holds \"</\": it cannot be inlined in a <script>");
  replace_once(page, "/*ATTN_LESSON_MODULE*/", module);
  replace_once(page, "/*ATTN_LESSON_DATA*/", script_safe(data));
  replace_once(page, "<!--ATTN_LESSON_TITLE-->", [&] {
    std::string t;
    for (const char c : title) t += c == '<' ? "&lt;" : c == '&' ? "&amp;" : std::string(1, c);
    return t;
  }());

  if (output.empty()) {
    if (std::fwrite(page.data(), 1, page.size(), stdout) != page.size() || std::fflush(stdout) != 0) {
      std::fputs("attn-lesson: cannot write the output\n", stderr);
      return 1;
    }
    return 0;
  }
  return write_atomically(output, page);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    const std::string line = "attn-lesson: " + attn_calc::detail::one_line(e.what()) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    return 2;
  }
}
