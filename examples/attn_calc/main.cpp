// attn-calc: the attention numbers of a lesson, computed and printed as text, Markdown, LaTeX,
// JSON, CSV or an SVG heatmap. With no arguments it prints the unit's "I drink tea" example.
// Exit status: 0 on success, 2 on bad input (one line on stderr says what), 1 if the output
// cannot be written.

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "attn/error.hpp"
#include "calc.hpp"
#include "model_walk.hpp"
#include "parse.hpp"
#include "render.hpp"

namespace {

int write_all(const std::string& s) {
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size() || std::fflush(stdout) != 0) {
    std::fputs("attn-calc: cannot write the output\n", stderr);
    return 1;
  }
  return 0;
}

/// Prints "attn-calc: <message>" as one line on stderr (usage_error's messages already are;
/// the library's are made so too) and returns the exit code.
int fail(const char* message, int code = 2) {
  const std::string line = "attn-calc: " + attn_calc::detail::one_line(message) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (const std::vector<std::string_view> args(argv + 1, argv + argc); attn_calc::model_walk::wanted(args))
      return write_all(attn_calc::model_walk::run(args));  // --model: its own options (model_walk.hpp)
    const attn_calc::config c = attn_calc::parse_args(argc, argv);
    if (c.help) return write_all(std::string(attn_calc::help_text) + std::string(attn_calc::model_walk::help_text));
    const attn_calc::results r = attn_calc::compute(c);
    return write_all(attn_calc::render(c, r));
  } catch (const attn_calc::usage_error& e) {
    return fail(e.what());
  } catch (const attn::dimension_error& e) {  // a size the parser did not foresee
    return fail(e.what());
  } catch (const attn::domain_error& e) {
    return fail(e.what());
  } catch (const std::bad_alloc&) {
    return fail("out of memory (the inputs are too large)");
  } catch (const std::exception& e) {
    return fail((std::string("internal error: ") + e.what()).c_str(), 1);
  }
}
