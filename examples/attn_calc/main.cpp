// attn-calc: the attention numbers of a lesson, computed and printed as text, Markdown, LaTeX,
// JSON, CSV or an SVG heatmap. With no arguments it prints the unit's "I drink tea" example.
// Exit status: 0 on success, 2 on bad input (one line on stderr says what), 1 if the output
// cannot be written. With --output FILE the output is written atomically (write_file): a run
// that fails leaves an existing FILE as it was.

#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
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

/// Writes `s` to `path` atomically: into a new temporary file beside it (same directory, so the
/// rename cannot cross file systems), flushed and closed, then renamed over `path`. On any
/// failure the temporary is removed and `path` is as it was (absent, or its old bytes).
int write_file(const std::string& path, const std::string& s) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (fs::is_directory(target, ec)) return fail(("--output: \"" + path + "\" is a directory, not a file").c_str(), 1);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::random_device seed;
  fs::path temp;
  std::FILE* out = nullptr;
  for (int attempt = 0; attempt < 16 && out == nullptr; ++attempt) {
    temp = dir / ("." + target.filename().string() + ".attn-calc-" + std::to_string(seed() % 1000000000u) + ".tmp");
    out = std::fopen(temp.string().c_str(), "wbx");  // x: fails if it exists, never clobbers
  }
  if (out == nullptr) return fail(("--output: cannot create a file in \"" + dir.string() + "\"").c_str(), 1);
  const bool written = std::fwrite(s.data(), 1, s.size(), out) == s.size() && std::fflush(out) == 0;
  const bool closed = std::fclose(out) == 0;
  if (written && closed) {
    fs::rename(temp, target, ec);
    if (!ec) return 0;
  }
  fs::remove(temp, ec);
  return fail(("--output: cannot write \"" + path + "\"").c_str(), 1);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (const std::vector<std::string_view> args(argv + 1, argv + argc); attn_calc::model_walk::wanted(args)) {
      // --model: its own options (model_walk.hpp), and --output FILE as every run has it
      std::vector<std::string_view> own;
      std::optional<std::string> output;
      for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] != "--output") {
          own.push_back(args[i]);
          continue;
        }
        if (output) throw attn_calc::usage_error("--output is given twice");
        if (i + 1 == args.size()) throw attn_calc::usage_error("--output needs a value");
        output = std::string(args[++i]);
      }
      const std::string out = attn_calc::model_walk::run(own);
      return output ? write_file(*output, out) : write_all(out);
    }
    const attn_calc::config c = attn_calc::parse_args(argc, argv);
    if (c.help) return write_all(std::string(attn_calc::help_text) + std::string(attn_calc::model_walk::help_text));
    const attn_calc::results r = attn_calc::compute(c);
    const std::string out = attn_calc::render(c, r);
    return c.output ? write_file(*c.output, out) : write_all(out);
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
