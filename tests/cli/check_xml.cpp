// check_xml FILE: exits 0 when FILE is a well-formed XML document (tests/well_formed.hpp's strict
// checker, written from the XML 1.0 grammar), else prints what is wrong and where, and exits 1.
// The loss-curve chain (tests/cli/loss_chain.cmake) checks the SVG it draws with it.

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "well_formed.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: check_xml FILE\n", stderr);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "check_xml: cannot read %s\n", argv[1]);
    return 2;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string problem = attn_test::xml_problem(text);
  if (!problem.empty()) {
    std::fprintf(stderr, "check_xml: %s is not well-formed XML: %s\n", argv[1], problem.c_str());
    return 1;
  }
  return 0;
}
