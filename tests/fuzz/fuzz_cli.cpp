// libFuzzer target: attn-calc's input parsing (examples/attn_calc/parse.hpp). The bytes are
// split at '\0' and '\n' into a command line; it must be refused with a usage_error or give a
// config whose every size is consistent, and then compute (small inputs only, to stay fast)
// must give finite results or a usage_error, and every output format must render. Nothing else
// may escape: an attn::dimension_error here is a size check the parser missed. The options of
// self-attention (--self, --words, --wq, --wk, --wv, --wo, --heads), per-row masks (--mask
// causal, a matrix, several --mask), --dot-vs-scaled, --head-labels, --beta-sweep and --cross
// with biases are checked the same way, with masked weights exactly 0. The same bytes are also read as the contents of an "@file" matrix and as
// labels, inline and from a file, and as a training log (--loss-curve): refused, or runs whose
// steps increase and whose rows are finite and as wide as their columns, drawn in every format.
// A command line with --model goes, as in main.cpp, to model_walk.hpp's run: a usage_error or a
// non-empty output, nothing else.

#include <cstddef>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "../../examples/attn_calc/calc.hpp"
#include "../../examples/attn_calc/model_walk.hpp"
#include "../../examples/attn_calc/parse.hpp"
#include "../../examples/attn_calc/render.hpp"
#include "fuzz_common.hpp"

namespace {

void check_config(const attn_calc::config& c) {
  const std::size_t n = c.notes.rows, t = c.queries.rows;
  ATTN_FUZZ_CHECK(n > 0 && t > 0, "no notes or no queries");
  ATTN_FUZZ_CHECK(c.notes.data.size() == n * c.notes.cols && c.queries.data.size() == t * c.queries.cols,
                  "matrix data and shape disagree");
  ATTN_FUZZ_CHECK(c.note_labels.size() == n && c.query_labels.size() == t, "labels and rows disagree");
  ATTN_FUZZ_CHECK(c.mask.empty() || c.mask.size() == n, "mask and notes disagree");
  ATTN_FUZZ_CHECK(c.row_mask.empty() || c.row_mask.size() == t * n, "mask matrix and queries x notes disagree");
  if (c.self_attention) {
    // --self: the sentence is the queries and the notes; the projections fit it and the heads
    // --cross: the queries X_q and the sentence X_kv apart, W_Q fitting X_q and W_K, W_V X_kv
    const std::size_t d = c.queries.cols, dkv = c.notes.cols;
    if (!c.cross)
      ATTN_FUZZ_CHECK(c.notes.data == c.queries.data && c.note_labels == c.query_labels, "--self's words differ");
    ATTN_FUZZ_CHECK(c.WQ.empty() || (c.WQ.rows == d && c.WQ.data.size() == d * c.WQ.cols), "W_Q does not fit X_q");
    for (const auto* m : {&c.WK, &c.WV})
      ATTN_FUZZ_CHECK(m->empty() || (m->rows == dkv && m->data.size() == dkv * m->cols), "a projection does not fit X_kv");
    const std::size_t dq = c.WQ.empty() ? d : c.WQ.cols, dk = c.WK.empty() ? dkv : c.WK.cols,
                      dv = c.WV.empty() ? dkv : c.WV.cols;
    ATTN_FUZZ_CHECK(c.heads >= 1 && dq == dk && dq % c.heads == 0 && dv % c.heads == 0, "heads and projections disagree");
    ATTN_FUZZ_CHECK(c.WO.empty() || c.WO.rows == dv, "W_O does not fit W_V");
    ATTN_FUZZ_CHECK((c.bQ.empty() || c.bQ.size() == dq) && (c.bK.empty() || c.bK.size() == dk) &&
                        (c.bV.empty() || c.bV.size() == dv) && (c.bO.empty() || (!c.WO.empty() && c.bO.size() == c.WO.cols)),
                    "a bias does not fit its projection");
    ATTN_FUZZ_CHECK(c.head_labels.empty() || c.head_labels.size() == c.heads, "head labels and heads disagree");
  } else {
    ATTN_FUZZ_CHECK(c.WQ.empty() && c.WK.empty() && c.WV.empty() && c.WO.empty() && c.heads == 1 && !c.cross &&
                        c.bQ.empty() && c.bK.empty() && c.bV.empty() && c.bO.empty(),
                    "projections without --self or --cross");
  }
  ATTN_FUZZ_CHECK(c.values.empty() || (c.values.rows == n && c.values.data.size() == n * c.values.cols),
                  "values and keys disagree");
  for (const double x : c.values.data) ATTN_FUZZ_CHECK(std::isfinite(x), "a value is not finite");
  ATTN_FUZZ_CHECK(std::isfinite(c.beta), "beta not finite");
  if (!c.beta_sweep.empty()) {  // --beta-sweep: one query, 2 to 1001 finite values of β, increasing
    ATTN_FUZZ_CHECK(t == 1 && c.beta_sweep.size() >= 2 && c.beta_sweep.size() <= 1001, "a sweep of another shape");
    for (std::size_t k = 0; k < c.beta_sweep.size(); ++k)
      ATTN_FUZZ_CHECK(std::isfinite(c.beta_sweep[k]) && (k == 0 || c.beta_sweep[k - 1] < c.beta_sweep[k]),
                      "a sweep's β not finite or not increasing");
  }
  ATTN_FUZZ_CHECK(c.decimals >= 0 && c.decimals <= 17, "decimals out of range");
  for (const double x : c.notes.data) ATTN_FUZZ_CHECK(std::isfinite(x), "a note number is not finite");
  for (const double x : c.queries.data) ATTN_FUZZ_CHECK(std::isfinite(x), "a query number is not finite");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);

  // The bytes as the contents of a matrix file, and as labels: a usage_error or a result.
  try {
    const attn_calc::matrix m = attn_calc::parse_matrix(bytes, "--notes (file)", true);
    ATTN_FUZZ_CHECK(m.rows > 0 && m.cols > 0 && m.data.size() == m.rows * m.cols, "file matrix shape");
  } catch (const attn_calc::usage_error&) {
  }
  try {
    for (const std::string& label : attn_calc::parse_labels(bytes, "--note-labels"))
      ATTN_FUZZ_CHECK(!label.empty() && attn_calc::printable_utf8(label), "a label that is not printable");
  } catch (const attn_calc::usage_error&) {
  }
  try {
    for (const std::string& label : attn_calc::parse_label_lines(bytes, "--note-labels (file)"))
      ATTN_FUZZ_CHECK(!label.empty() && attn_calc::printable_utf8(label), "a label that is not printable");
  } catch (const attn_calc::usage_error& e) {
    // every message is one line of printable text, whatever the bytes held
    for (const char ch : std::string_view(e.what()))
      ATTN_FUZZ_CHECK(static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7F, "a message with a control character");
  }

  // The bytes as a training log (--loss-curve's file): a usage_error, or runs that render
  try {
    attn_calc::config log;
    attn_calc::detail::read_loss_log(bytes, "--loss-curve (run.csv)", "run", "run.csv", false, log.loss_runs);
    ATTN_FUZZ_CHECK(!log.loss_runs.empty() && log.loss_runs.size() <= attn_calc::detail::most_loss_runs,
                    "a log of no runs or too many");
    for (const auto& run : log.loss_runs) {
      ATTN_FUZZ_CHECK(!run.steps.empty() && run.rows.size() == run.steps.size() && run.columns.front() == "loss",
                      "a run of another shape");
      for (std::size_t i = 0; i < run.rows.size(); ++i) {
        ATTN_FUZZ_CHECK(std::isfinite(run.steps[i]) && (i == 0 || run.steps[i - 1] < run.steps[i]),
                        "a run's steps not finite or not increasing");
        ATTN_FUZZ_CHECK(run.rows[i].size() == run.columns.size(), "a row as wide as its run's columns");
        for (const double x : run.rows[i]) ATTN_FUZZ_CHECK(std::isfinite(x), "a log's number is not finite");
      }
    }
    log.lesson = attn_calc::lesson_kind::loss_curve;
    log.vocabulary = 5;
    const attn_calc::results lr = attn_calc::compute(log);
    for (const auto f : {attn_calc::output_format::text, attn_calc::output_format::md, attn_calc::output_format::latex,
                         attn_calc::output_format::json, attn_calc::output_format::csv,
                         attn_calc::output_format::csv_long, attn_calc::output_format::svg}) {
      log.format = f;
      ATTN_FUZZ_CHECK(!attn_calc::render(log, lr).empty(), "an empty rendering of a log");
    }
  } catch (const attn_calc::usage_error& e) {
    for (const char ch : std::string_view(e.what()))
      ATTN_FUZZ_CHECK(static_cast<unsigned char>(ch) >= 0x20 && ch != 0x7F, "a message with a control character");
  }

  // The bytes as a command line. '@' and --loss-curve would read files: left to the contents
  // checks above.
  std::vector<std::string> args;
  std::string current;
  for (const char ch : bytes) {
    if (ch == '@') return 0;
    if (ch == '\0' || ch == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current.push_back(ch);
    }
  }
  if (!current.empty()) args.push_back(current);
  for (const std::string& a : args)
    if (a.starts_with("--loss-curve")) return 0;
  const std::vector<std::string_view> views(args.begin(), args.end());
  if (attn_calc::model_walk::wanted(views)) {  // --model: its own options (main.cpp hands it over)
    try {
      const std::string out = attn_calc::model_walk::run(views);
      ATTN_FUZZ_CHECK(!out.empty(), "--model: empty output");
    } catch (const attn_calc::usage_error&) {
    }
    return 0;
  }
  attn_calc::config c;
  try {
    c = attn_calc::parse_args(views);
  } catch (const attn_calc::usage_error&) {
    return 0;
  }
  if (c.help) return 0;
  check_config(c);
  // compute and render small problems only (the Jacobians' finite differences cost n·d² attends)
  std::size_t projections = 0;  // --self: X W_Q, X W_K, X W_V, Z W_O
  for (const auto* m : {&c.WQ, &c.WK, &c.WV, &c.WO}) projections += m->rows * m->cols;
  if (c.self_attention && c.WQ.empty()) projections += 3 * c.queries.cols * c.queries.cols;
  if (c.cross) projections += 2 * c.notes.cols * c.notes.cols + c.notes.rows * c.notes.cols;  // X_kv W_K, X_kv W_V
  const std::size_t work = c.queries.rows * (c.notes.rows * (c.notes.cols + c.queries.cols + 1) + projections);
  if (work > 2000 || (c.jacobian && work > 200)) return 0;
  attn_calc::results r;
  try {
    r = attn_calc::compute(c);
  } catch (const attn_calc::usage_error&) {
    return 0;  // results that are not finite are refused as bad input
  }
  for (std::size_t i = 0; i < r.weights.size(); ++i)
    ATTN_FUZZ_CHECK(std::isfinite(r.weights.data()[i]), "a weight that is not finite was printed");
  for (const auto& m : r.maps) {  // --self's heads, --dot-vs-scaled's two maps
    ATTN_FUZZ_CHECK(m.weights.rows() == c.queries.rows && m.weights.cols() == c.notes.rows, "a map of another shape");
    for (std::size_t t = 0; t < m.weights.rows(); ++t)
      for (std::size_t j = 0; j < m.weights.cols(); ++j)
        ATTN_FUZZ_CHECK(std::isfinite(m.weights(t, j)) && (c.allowed(t, j) || m.weights(t, j) == 0),
                        "a map weight that is not finite, or not 0 where a mask forbids it");
  }
  ATTN_FUZZ_CHECK(r.sweep.rows() == c.beta_sweep.size(), "a sweep of another length");
  for (std::size_t i = 0; i < r.sweep.size(); ++i)
    ATTN_FUZZ_CHECK(std::isfinite(r.sweep.data()[i]), "a sweep's weight that is not finite was printed");
  for (const auto f : {attn_calc::output_format::text, attn_calc::output_format::md, attn_calc::output_format::latex,
                       attn_calc::output_format::json, attn_calc::output_format::csv,
                       attn_calc::output_format::csv_long, attn_calc::output_format::svg}) {
    c.format = f;
    ATTN_FUZZ_CHECK(!attn_calc::render(c, r).empty(), "empty output");
  }
  return 0;
}
