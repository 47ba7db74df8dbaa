// The README's usage example, compiled and run: the lines between the markers below must
// appear verbatim in README.md's code block (checked by the test case), so the two cannot drift.
#include <filesystem>
#include <string>

#include "attn_catch.hpp"
#include "doc_snippets.hpp"
// Included before `main` is renamed, so the rename touches the example alone.
#include <attn/attn.hpp>
#include <cstdio>
#include <vector>

#define main readme_main  // the README shows a whole program
// README:begin
#include <attn/attn.hpp>
#include <cstdio>
#include <vector>

int main() {
  // "I drink tea": one note per word, and the decoder's state before it writes चाय.
  const attn::Matrix<double, 3, 3> notes{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  const attn::Vector<double, 3> q{0, 0.5, 2};
  const auto r = attn::attend(q, notes, attn::dot);  // fixed sizes: nothing is allocated
  std::printf("weights %.3f %.3f %.3f\n", r.weights[0], r.weights[1], r.weights[2]);
  // prints: weights 0.100 0.164 0.736

  // Your own memory, borrowed without a copy: 4 notes of 2 floats, and a sharper look (β = 2).
  std::vector<float> buffer{1, 0, 0, 1, 1, 1, -1, 0};
  std::vector<float> query{0.5f, -0.5f}, weights(4), scores(4), context(2);
  const attn::MatrixView<const float> H(buffer.data(), 4, 2);
  attn::attend(query, H, attn::scaled_dot, scores, weights, context, {.beta = 2});

  // Sizes that disagree: a compile error when fixed, attn::dimension_error when dynamic.
  try {
    const std::vector<float> wrong{1, 2, 3};
    (void)attn::attend(wrong, H, attn::dot);
  } catch (const attn::dimension_error& e) {
    std::printf("%s\n", e.what());  // attn::attend: query size is 3 but note size is 2
  }
  return weights[0] > weights[1] ? 0 : 1;
}
// README:end
#undef main

TEST_CASE("The README's example compiles, runs and is quoted verbatim", "[readme]") {
  REQUIRE(readme_main() == 0);
  REQUIRE(attn_test::quoted_in(__FILE__, "README.md", "// README:begin\n", "// README:end"));
}

TEST_CASE("The README's table names every public header", "[readme]") {
  const std::string readme = attn_test::file_text(attn_test::document_path(__FILE__, "README.md"));
  REQUIRE(!readme.empty());
  std::size_t headers = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(attn_test::document_path(__FILE__, "include/attn"))) {
    if (entry.path().extension() != ".hpp") continue;
    ++headers;
    const std::string name = "`attn/" + entry.path().filename().string() + "`";
    INFO(name);
    const auto at = readme.find(name);  // in the first column of a row of the table
    const auto line = readme.rfind('\n', at == std::string::npos ? 0 : at) + 1;
    CHECK((at != std::string::npos && readme.compare(line, 2, "| ") == 0 &&
           readme.find(" |", line) > at));
  }
  REQUIRE(headers >= 12);
}
