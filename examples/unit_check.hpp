#pragma once
// examples/unit_check.hpp: how a worked example checks what it prints against the unit.
//
// Every number an example prints goes through `print`: it is rounded once (attn::report::fixed,
// the unit's 3 decimals unless told otherwise), and when the unit gives that number the rounded
// text must equal the unit's. A claim that is not a number ("मैं looks hardest at I") goes
// through `claim`. `finish` prints the verdict and returns the exit code: 0 only when every
// check passed, so CTest fails an example whose numbers drift from the unit's. `matrix_table`
// prints a map or any small matrix through `print`, row and column labels beside it.

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attn/report/format.hpp"
#include "attn/report/table.hpp"

namespace unit {

class checker {
  int checked_ = 0;
  int failed_ = 0;

public:
  /// Returns x as printed (fixed, `decimals` digits). When `expected` is not empty it is the
  /// unit's number, and the printed text must equal it.
  std::string print(std::string_view what, double x, std::string_view expected = {}, int decimals = 3) {
    std::string text = attn::report::fixed(x, decimals);
    if (!expected.empty()) {
      ++checked_;
      if (text != expected) {
        ++failed_;
        std::fprintf(stderr, "MISMATCH: %.*s is %s but the unit says %.*s\n", static_cast<int>(what.size()),
                     what.data(), text.c_str(), static_cast<int>(expected.size()), expected.data());
      }
    }
    return text;
  }

  /// Checks a claim that is not a single number; returns it for printing.
  bool claim(bool holds, std::string_view what) {
    ++checked_;
    if (!holds) {
      ++failed_;
      std::fprintf(stderr, "MISMATCH: not true that %.*s\n", static_cast<int>(what.size()), what.data());
    }
    return holds;
  }

  /// Prints how many checks passed; returns the process exit code (0: all passed).
  int finish() const {
    if (failed_ == 0) {
      std::printf("\nAll %d checks agree with the unit.\n", checked_);
      return 0;
    }
    std::printf("\n%d of %d checks FAILED (see stderr).\n", failed_, checked_);
    return 1;
  }
};

/// Prints a table as text, then `after` (a blank line unless told).
inline void show(const attn::report::table& t, const char* after = "\n") {
  std::printf("%s%s", attn::report::to_text(t).c_str(), after);
}

/// A matrix m (rows(), cols(), m(r, c)) as a table, labels beside it: every number printed (and
/// checked against expected[r·cols + c] when expected is given) and, with `row_sums`, a column
/// of each row's sum, which must print as 1.000.
template <class M>
attn::report::table matrix_table(checker& check, const std::string& what, const M& m,
                                 const std::vector<std::string>& row_labels,
                                 const std::vector<std::string>& col_labels,
                                 const char* const* expected = nullptr, bool row_sums = false) {
  attn::report::table t;
  t.title = what;
  t.header.emplace_back("");
  for (const std::string& c : col_labels) t.header.emplace_back(c);
  if (row_sums) t.header.emplace_back("sum");
  for (std::size_t r = 0; r < m.rows(); ++r) {
    std::vector<attn::report::cell> row{row_labels[r]};
    double sum = 0;
    for (std::size_t c = 0; c < m.cols(); ++c) {
      const std::string name = what + " (" + row_labels[r] + ", " + col_labels[c] + ")";
      row.emplace_back(check.print(name, m(r, c), expected ? expected[r * m.cols() + c] : ""));
      sum += m(r, c);
    }
    if (row_sums)
      row.emplace_back(check.print(what + ": row sum of " + row_labels[r], sum, "1.000"));
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace unit
