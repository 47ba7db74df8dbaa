#pragma once
/// \file tests/doc_snippets.hpp
/// For tests that compile a documentation example: the example sits in the test's source
/// between two marker lines, and the test checks that those lines appear verbatim in the
/// document, so that the two cannot drift.
///   REQUIRE(attn_test::quoted_in(__FILE__, "README.md", "// README:begin\n", "// README:end"));

#include <fstream>
#include <iterator>
#include <string>

namespace attn_test {

/// The whole text of the file at `path` (empty if it cannot be read).
inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Whether the lines of the test source `source` (its __FILE__, under tests/) between the
/// lines `begin` and `end` appear, as they are, in `document` (a path from the repository
/// root). False if either file cannot be read or a marker is missing.
inline bool quoted_in(const std::string& source, const std::string& document,
                      const std::string& begin, const std::string& end) {
  const std::string root = source.substr(0, source.rfind("tests"));
  const std::string text = file_text(root + document);
  const std::string self = file_text(source);
  const auto from = self.find(begin);
  const auto to = self.find(end, from == std::string::npos ? 0 : from);
  if (text.empty() || from == std::string::npos || to == std::string::npos) return false;
  const std::string snippet = self.substr(from + begin.size(), to - from - begin.size());
  return !snippet.empty() && text.find(snippet) != std::string::npos;
}

}  // namespace attn_test
