#pragma once
// examples/unit_check.hpp: how a worked example checks what it prints against the unit.
//
// Every number an example prints goes through `print`: it is rounded once (attn::report::fixed,
// the unit's 3 decimals unless told otherwise), and when the unit gives that number the rounded
// text must equal the unit's. A claim that is not a number ("मैं looks hardest at I") goes
// through `claim`. `finish` prints the verdict and returns the exit code: 0 only when every
// check passed, so CTest fails an example whose numbers drift from the unit's.

#include <cstdio>
#include <string>
#include <string_view>

#include "attn/report/format.hpp"

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

}  // namespace unit
