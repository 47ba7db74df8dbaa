#pragma once
/// \file tests/doc_snippets.hpp
/// For tests that compile a documentation example, so that the two cannot drift: either the
/// example sits in the test's source between two marker lines, which must appear verbatim in
/// the document,
///   REQUIRE(attn_test::quoted_in(__FILE__, "README.md", "// README:begin\n", "// README:end"));
/// or each of the document's code blocks is the body of a test case (code_blocks, indented).

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace attn_test {

/// The whole text of the file at `path` (empty if it cannot be read).
inline std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// The path of `document` (a file or folder, from the repository root), for a test source
/// `source` (its __FILE__, under tests/).
inline std::string document_path(const std::string& source, const std::string& document) {
  return source.substr(0, source.rfind("tests")) + document;
}

/// The code blocks of a Markdown text fenced as ```<language>, each as its lines with
/// `indent` put before every line that is not empty (as they read inside a function body).
inline std::vector<std::string>
code_blocks(const std::string& markdown, const std::string& language, const std::string& indent) {
  std::vector<std::string> blocks;
  const std::string open = "```" + language + "\n";
  for (auto at = markdown.find(open); at != std::string::npos; at = markdown.find(open, at)) {
    at += open.size();
    const auto close = markdown.find("```", at);
    if (close == std::string::npos) break;
    std::string block;
    for (auto line = at; line < close;) {
      const auto end = markdown.find('\n', line);
      const std::string text = markdown.substr(line, end - line);
      block += (text.empty() ? "" : indent) + text + "\n";
      line = end + 1;
    }
    blocks.push_back(block);
    at = close + 3;
  }
  return blocks;
}

/// Whether the lines of the test source `source` (its __FILE__, under tests/) between the
/// lines `begin` and `end` appear, as they are, in `document` (a path from the repository
/// root). False if either file cannot be read or a marker is missing.
inline bool quoted_in(const std::string& source, const std::string& document,
                      const std::string& begin, const std::string& end) {
  const std::string text = file_text(document_path(source, document));
  const std::string self = file_text(source);
  const auto from = self.find(begin);
  const auto to = self.find(end, from == std::string::npos ? 0 : from);
  if (text.empty() || from == std::string::npos || to == std::string::npos) return false;
  const std::string snippet = self.substr(from + begin.size(), to - from - begin.size());
  return !snippet.empty() && text.find(snippet) != std::string::npos;
}

}  // namespace attn_test
