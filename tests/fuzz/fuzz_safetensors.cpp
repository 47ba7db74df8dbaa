// libFuzzer target: attn/safetensors.hpp's reader on any bytes. The first byte chooses what is
// asked (float or double buffers; one tensor left out of the request, one renamed, one shape
// changed; allow_extra_tensors, allow_rounding); the rest is the file. Checks (docs/errors.md,
// "Fuzzing"):
//   - read_safetensors_header either returns or throws attn::file_error, nothing else (no crash,
//     no sanitizer report, no allocation beyond a few times the input: libFuzzer's -rss_limit_mb
//     and -malloc_limit_mb catch one);
//   - a header it refuses, load_safetensors refuses too, with file_error, every buffer untouched;
//   - for a header it accepts, the request made from it: loaded exactly when the request fits
//     (every name there with its shape and a dtype the buffer holds, extras only when allowed),
//     else file_error with every buffer untouched; loaded numbers are the file's, decoded here
//     independently (F32 and F64 by their bits, F16 and BF16 by ldexp of their fields, F64 into
//     float as the nearest float); then saved again and loaded again, the same bits.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attn/safetensors.hpp"
#include "fuzz_common.hpp"

namespace {

using attn::safetensors_dtype;

std::uint64_t le(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int k = 0; k < bytes; ++k) v |= static_cast<std::uint64_t>(p[k]) << (8 * k);
  return v;
}

/// Number k of a tensor of dtype t at p, as a double (F16 and BF16 from their fields).
double reference(safetensors_dtype t, const unsigned char* p, std::size_t k, bool& nan) {
  nan = false;
  switch (t) {
    case safetensors_dtype::F16:
    case safetensors_dtype::BF16: {
      const auto h = static_cast<std::uint32_t>(le(p + 2 * k, 2));
      const bool half = t == safetensors_dtype::F16;
      const int mbits = half ? 10 : 7, emax = half ? 31 : 255, bias = half ? 15 : 127;
      const std::uint32_t e = (h >> mbits) & static_cast<std::uint32_t>(emax), m = h & ((1u << mbits) - 1);
      const double s = (h >> 15) != 0 ? -1 : 1;
      if (e == static_cast<std::uint32_t>(emax)) {
        nan = m != 0;
        return s * std::numeric_limits<double>::infinity();
      }
      if (e == 0) return s * std::ldexp(m, 1 - bias - mbits);
      return s * std::ldexp((1u << mbits) + m, static_cast<int>(e) - bias - mbits);
    }
    case safetensors_dtype::F32: {
      float f;
      const auto bits = static_cast<std::uint32_t>(le(p + 4 * k, 4));
      std::memcpy(&f, &bits, 4);
      nan = std::isnan(f);
      return f;
    }
    default: {
      double d;
      const std::uint64_t bits = le(p + 8 * k, 8);
      std::memcpy(&d, &bits, 8);
      nan = std::isnan(d);
      return d;
    }
  }
}

bool readable(safetensors_dtype t) {
  return t == safetensors_dtype::F16 || t == safetensors_dtype::BF16 || t == safetensors_dtype::F32 ||
         t == safetensors_dtype::F64;
}

/// Runs f; 0 if it returned, 1 for attn::file_error; anything else aborts (a finding).
template <class F>
int outcome(F&& f) {
  try {
    f();
    return 0;
  } catch (const attn::file_error& e) {
    if (attn_fuzz::verbose) std::fprintf(stderr, "file_error: %s\n", e.what());
    return 1;
  }
}

template <class T>
void run(std::uint8_t flags, std::span<const std::byte> file) {
  attn::safetensors_header h;
  const bool header_ok = outcome([&] { h = attn::read_safetensors_header(file); }) == 0;
  attn::safetensors_load_options options{.allow_extra_tensors = (flags & 8) != 0, .allow_rounding = (flags & 16) != 0};

  // the request: every tensor of the header (or one made-up tensor when it was refused)
  std::vector<attn::named_tensor<T>> list;
  std::vector<std::vector<T>> buffers;
  std::vector<const attn::safetensors_tensor_info*> source;
  if (header_ok) {
    for (const attn::safetensors_tensor_info& t : h.tensors) {
      std::size_t count = 1;
      for (const std::size_t d : t.shape) count *= d;  // ≤ the file's bytes: checked by the header
      ATTN_FUZZ_CHECK(count * attn::dtype_bytes(t.dtype) == t.end - t.begin, "a header with offsets that lie passed");
      buffers.emplace_back(count);
      source.push_back(&t);
    }
  } else {
    buffers.emplace_back(1);
    source.push_back(nullptr);
  }
  for (std::size_t k = 0; k < buffers.size(); ++k) {
    for (T& x : buffers[k]) x = static_cast<T>(-12345.5);
    list.push_back({source[k] != nullptr ? source[k]->name : std::string("a"),
                    source[k] != nullptr ? source[k]->shape : std::vector<std::size_t>{1}, buffers[k]});
  }
  // the request changed as the flags say: one tensor left out, one renamed, one shape changed
  bool left_out = false, renamed = false, reshaped = false;
  if (header_ok && !list.empty()) {
    const std::size_t pick = static_cast<std::size_t>((flags >> 5) & 3) % list.size();
    if ((flags & 2) != 0) {
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(pick));
      source.erase(source.begin() + static_cast<std::ptrdiff_t>(pick));
      left_out = true;
    } else if ((flags & 4) != 0) {
      // a name the file does not hold (every name it holds is in the list), if "~" makes one
      const std::string name = list[pick].name + "~";
      renamed = true;
      for (const auto& t : list) renamed = renamed && t.name != name;
      if (renamed) list[pick].name = name;
    } else if ((flags & 1) != 0 && !list[pick].data.empty()) {
      list[pick].shape.insert(list[pick].shape.begin(), 1);  // the same count, another shape
      reshaped = true;
    }
  }
  if (attn_fuzz::verbose)
    std::fprintf(stderr, "%s, header %s, %zu tensors asked, left out %d, renamed %d, reshaped %d, extras %d, rounding %d\n",
                 sizeof(T) == 4 ? "float" : "double", header_ok ? "accepted" : "refused", list.size(), left_out, renamed,
                 reshaped, options.allow_extra_tensors, options.allow_rounding);

  const int got = outcome([&] { attn::load_safetensors(file, list, options); });
  bool expect_ok = header_ok && !renamed && !reshaped && (!left_out || options.allow_extra_tensors);
  if (header_ok)
    for (const auto* t : source)
      if (t != nullptr && (!readable(t->dtype) || (sizeof(T) == 4 && t->dtype == safetensors_dtype::F64 && !options.allow_rounding)))
        expect_ok = false;
  ATTN_FUZZ_CHECK(got == (expect_ok ? 0 : 1), "load_safetensors %s, expected %s", got == 0 ? "loaded" : "refused",
                  expect_ok ? "a load" : "a refusal");
  if (got != 0) {
    for (const auto& b : buffers)
      for (const T x : b) ATTN_FUZZ_CHECK(x == static_cast<T>(-12345.5), "a refused load wrote to a buffer");
    return;
  }
  // the numbers, decoded here
  const auto* data = reinterpret_cast<const unsigned char*>(file.data()) + h.data_offset;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const attn::safetensors_tensor_info& t = *source[k];
    for (std::size_t i = 0; i < list[k].data.size(); ++i) {
      bool nan = false;
      const double want = reference(t.dtype, data + t.begin, i, nan);
      const T x = list[k].data[i];
      if (nan) {
        ATTN_FUZZ_CHECK(std::isnan(x), "tensor %s number %zu: NaN expected", t.name.c_str(), i);
      } else if constexpr (sizeof(T) == 4) {
        // F64 into float: the nearest float (ties to even; beyond the range ±inf from 2^128 − 2^103)
        const double w = static_cast<double>(x);
        bool nearest = w == want;
        if (!nearest && t.dtype == safetensors_dtype::F64) {
          if (std::isinf(w)) {
            nearest = std::abs(want) >= 0x1p128 - 0x1p103 && std::signbit(w) == std::signbit(want);
          } else {
            // want within the midpoints to x's neighbours (2^128 standing for the one past FLT_MAX),
            // a midpoint itself only when x is even (ties to even); the sums are exact in double
            const auto neighbour = [&](float toward) {
              const float n = std::nextafter(x, toward);
              return std::isinf(n) ? std::copysign(0x1p128, static_cast<double>(n)) : static_cast<double>(n);
            };
            const double lo = (neighbour(-std::numeric_limits<float>::infinity()) + w) / 2;
            const double hi = (neighbour(std::numeric_limits<float>::infinity()) + w) / 2;
            std::uint32_t bits;
            std::memcpy(&bits, &x, 4);
            nearest = lo <= want && want <= hi && ((want != lo && want != hi) || (bits & 1) == 0);
          }
        }
        ATTN_FUZZ_CHECK(nearest && std::signbit(w) == std::signbit(want), "tensor %s number %zu: %.17g for %.17g",
                        t.name.c_str(), i, w, want);
      } else {
        ATTN_FUZZ_CHECK(x == want && std::signbit(x) == std::signbit(want), "tensor %s number %zu: %.17g for %.17g",
                        t.name.c_str(), i, x, want);
      }
    }
  }
  // saved again and loaded again: the same bits, the same names and shapes
  std::vector<attn::named_tensor<const T>> saved;
  for (const auto& t : list) saved.push_back({t.name, t.shape, t.data});
  const attn::safetensors_metadata meta = h.metadata;
  const std::vector<std::byte> again = attn::save_safetensors(saved, meta);
  std::vector<std::vector<T>> copies;
  std::vector<attn::named_tensor<T>> relist;
  for (const auto& t : list) copies.emplace_back(t.data.size());
  for (std::size_t k = 0; k < list.size(); ++k) relist.push_back({list[k].name, list[k].shape, copies[k]});
  ATTN_FUZZ_CHECK(attn::load_safetensors(again, relist) == meta, "the metadata did not round-trip");
  for (std::size_t k = 0; k < list.size(); ++k)
    ATTN_FUZZ_CHECK(copies[k].empty() || std::memcmp(copies[k].data(), list[k].data.data(), copies[k].size() * sizeof(T)) == 0,
                    "tensor %s did not round-trip bit for bit", list[k].name.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // the first byte: bit 0 reshape one tensor, bit 1 leave one out, bit 2 rename one, bit 3
  // allow_extra_tensors, bit 4 allow_rounding, bits 5–6 which tensor, bit 7 double buffers
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data + 1), size - 1);
  if ((data[0] & 128) != 0)
    run<double>(data[0], file);
  else
    run<float>(data[0], file);
  return 0;
}
