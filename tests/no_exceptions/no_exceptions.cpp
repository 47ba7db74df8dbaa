// attn built with -fno-exceptions: every error prints its message on stderr and aborts
// (docs/errors.md, "Without exceptions"). Run with one case name; each makes one error. The CTest
// tests no_exceptions_<case> (death_test.cmake) expect the abort and the message.
#include <attn/attn.hpp>
#include <attn/report.hpp>
#include <attn/safetensors.hpp>

#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const char* c = argv[1];
  const attn::Matrix<double> notes{{1, 0, 0}, {0, 1, 0}};
  std::vector<double> q3{1, 2, 3}, s(2), w(2), c3(3);
  if (std::strcmp(c, "dimension") == 0) {
    const std::vector<double> q2{1, 2};
    attn::attend(q2, notes, attn::dot, s, w, c3);
  } else if (std::strcmp(c, "domain") == 0) {
    (void)attn::softmax(q3, {.beta = std::numeric_limits<double>::quiet_NaN()});
  } else if (std::strcmp(c, "all_masked") == 0) {
    const std::vector<bool> none(2, false);
    (void)attn::attend(q3, notes, attn::dot,
                       {.mask = none, .if_all_masked = attn::all_masked_policy::throw_error});
  } else if (std::strcmp(c, "overlap") == 0) {
    attn::attend(q3, notes, attn::dot, s, w, q3);
  } else if (std::strcmp(c, "view") == 0) {
    (void)attn::MatrixView<double>(nullptr, 3, 4);
  } else if (std::strcmp(c, "length") == 0) {
    (void)attn::Matrix<double>(std::numeric_limits<std::size_t>::max() / 2, 4);
  } else if (std::strcmp(c, "report") == 0) {
    attn::report::heatmap_options opt;
    opt.lo = 1;
    opt.hi = 0;
    (void)attn::report::heatmap_svg(notes, {"a", "b"}, {"x", "y", "z"}, opt);
  } else if (std::strcmp(c, "file") == 0) {
    const std::vector<std::byte> short_file(5);
    const std::vector<attn::named_tensor<double>> list{{"q", {3}, q3}};
    (void)attn::load_safetensors(short_file, list);
  } else {
    std::puts("unknown case");
    return 2;
  }
  std::puts("no error");  // the test fails: it expected an abort
  return 0;
}
