#pragma once
/// \file attn/report.hpp
/// The report headers in one: number formatting, tables (text, Markdown, LaTeX, CSV), JSON and
/// SVG heatmaps. Not part of attn/attn.hpp: only code that writes reports pays for <string>.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include "attn/report/format.hpp"  // IWYU pragma: export
#include "attn/report/json.hpp"    // IWYU pragma: export
#include "attn/report/svg.hpp"     // IWYU pragma: export
#include "attn/report/table.hpp"   // IWYU pragma: export
