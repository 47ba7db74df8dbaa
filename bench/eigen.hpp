#pragma once
/// \file bench/eigen.hpp
/// Eigen 3.4 for the baselines, when CMake found it (ATTN_BENCH_HAVE_EIGEN). GCC 12 reports
/// -Wmaybe-uninitialized inside Eigen's AVX-512 intrinsics once they are inlined into a
/// benchmark (the `_mm512_undefined_pd()` idiom), which -Werror would turn into an error.
#ifdef ATTN_BENCH_HAVE_EIGEN
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#endif
