#pragma once
/// \file attn/safetensors.hpp
/// Tensors saved and loaded in Hugging Face's safetensors format (docs/safetensors.md): 8 bytes,
/// a little-endian u64 N; N bytes of a UTF-8 JSON object {"name": {"dtype": "F32", "shape": [..],
/// "data_offsets": [begin, end]}, ..., "__metadata__": {string: string}}; then the data, each
/// tensor row-major and little-endian at [begin, end) of it. float is written as F32 and double
/// as F64; F16, BF16, F32 and F64 are read into float or double (F64 into float only when
/// `safetensors_load_options::allow_rounding` says so). Every check — the file's layout, each
/// tensor's name, dtype and shape — is made before the first byte of the caller's buffers is
/// written: a load that throws leaves them as they were. A save writes a temporary file in the
/// same directory and renames it over the path, so a save that fails leaves the file that was
/// there whole. Not part of attn/attn.hpp (it includes <filesystem>, <fstream> and <map>).

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "attn/detail/json.hpp"
#include "attn/detail/utf8.hpp"
#include "attn/error.hpp"
#include "attn/named_tensor.hpp"

namespace attn {

/// The dtypes of the format (each a fixed number of bytes per number). attn reads F16, BF16, F32
/// and F64; the others it knows only to check a file's layout (allow_extra_tensors).
enum class safetensors_dtype : unsigned char { BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64, C64 };

/// The dtype's name as the header writes it: "F32".
[[nodiscard]] constexpr std::string_view dtype_name(safetensors_dtype t) noexcept {
  constexpr std::string_view names[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "F8_E8M0",
                                        "I16",  "U16", "F16", "BF16",    "I32",     "U32",
                                        "F32",  "F64", "I64", "U64",     "C64"};
  return names[static_cast<unsigned>(t)];
}

/// Bytes per number of the dtype.
[[nodiscard]] constexpr std::size_t dtype_bytes(safetensors_dtype t) noexcept {
  constexpr std::size_t bytes[] = {1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 8, 8, 8, 8};
  return bytes[static_cast<unsigned>(t)];
}

/// The file's "__metadata__": free-form strings (a model's configuration, say).
using safetensors_metadata = std::map<std::string, std::string>;

/// What a load allows beyond the strict default (PyTorch's load_state_dict(strict=True)).
struct safetensors_load_options {
  /// Tensors in the file that were not asked for: refused by default (a checkpoint that holds
  /// more than the model reads is how a renamed parameter goes unnoticed).
  bool allow_extra_tensors = false;
  /// F64 tensors into float buffers, each number rounded to the nearest float (beyond float's
  /// range: ±inf as IEEE rounds); refused by default ("tensor X is F64, the buffer is float").
  bool allow_rounding = false;
};

/// The most header bytes attn reads: 100,000,000, the reference library's bound. A larger N is
/// refused before anything is allocated.
inline constexpr std::uint64_t safetensors_max_header_bytes = 100'000'000;

/// One tensor as a header describes it: bytes [begin, end) of the data.
struct safetensors_tensor_info {
  std::string name;
  safetensors_dtype dtype{};
  std::vector<std::size_t> shape;
  std::size_t begin = 0, end = 0;
};

/// A file's header, checked: its tensors in the order of their data, the metadata, and where the
/// data starts (8 + N).
struct safetensors_header {
  std::vector<safetensors_tensor_info> tensors;
  safetensors_metadata metadata;
  std::size_t data_offset = 0;
};

namespace detail {

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big,
              "attn/safetensors.hpp: a mixed-endian host is not supported");

inline constexpr const char* save_name = "attn::save_safetensors";
inline constexpr const char* load_name = "attn::load_safetensors";
inline constexpr const char* header_name = "attn::read_safetensors_header";
inline constexpr const char* in_memory = "the bytes given";

[[noreturn]] ATTN_NOINLINE inline void throw_file_error(const char* where, const std::string& source,
                                                       const std::string& what) {
  raise<file_error>(std::string(where) + ": " + source + ": " + what);
}

[[noreturn]] ATTN_NOINLINE inline void throw_list_error(const char* where, const std::string& what) {
  raise<domain_error>(std::string(where) + ": " + what);
}

/// "[2, 3]"
inline std::string shape_text(std::span<const std::size_t> shape) {
  std::string s = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) {
    if (k != 0) s += ", ";
    s += std::to_string(shape[k]);
  }
  return s + "]";
}

/// Appends s to out as a JSON string's contents between its quotes: '"' and '\\' escaped,
/// control bytes as \u00XX (the one home of both quoted_name and the header's strings).
inline void append_json_escaped(std::string& out, std::string_view text) {
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      constexpr char hex[] = "0123456789abcdef";
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
}

/// "\"name\"", a name quoted for a message (as its JSON string would be, control bytes escaped).
inline std::string quoted_name(std::string_view name) {
  std::string s = "\"";
  append_json_escaped(s, name);
  return s + "\"";
}

/// product(shape), or false when it passes std::size_t.
[[nodiscard]] inline bool count_of(std::span<const std::size_t> shape, std::size_t& count) noexcept {
  std::size_t n = 1;
  for (const std::size_t d : shape) {
    if (d != 0 && n > std::numeric_limits<std::size_t>::max() / d) return false;
    n *= d;
  }
  count = n;
  return true;
}

/// The unsigned integer of `Bytes` little-endian bytes at p. By shifts, so the same code on a
/// little- and a big-endian host; with the count fixed, GCC and clang compile it to one load
/// (and a byte swap on a big-endian host).
/// (Written as one expression: GCC 12 at -O2 kept a loop of byte loads, 6 times slower.)
template <int Bytes>
[[nodiscard]] inline std::uint64_t read_le(const unsigned char* p) noexcept {
  return [p]<std::size_t... k>(std::index_sequence<k...>) {
    return ((static_cast<std::uint64_t>(p[k]) << (8 * k)) | ...);
  }(std::make_index_sequence<Bytes>{});
}

/// v's low `Bytes` bytes, little-endian, at p (by shifts: one store).
template <int Bytes>
inline void write_le(unsigned char* p, std::uint64_t v) noexcept {
  [p, v]<std::size_t... k>(std::index_sequence<k...>) {
    ((p[k] = static_cast<unsigned char>(v >> (8 * k))), ...);
  }(std::make_index_sequence<Bytes>{});
}

/// An IEEE binary16 number as a float, exactly (every half is a float).
[[nodiscard]] inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h >> 15) << 31;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa·2⁻²⁴, exact in float
    const float v = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -v : v;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/// A bfloat16 number as a float: its bits are a float's upper half.
[[nodiscard]] inline float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

/// x rounded to the nearest float, ties to even; beyond float's range ±inf from 2¹²⁸ − 2¹⁰³ (the
/// midpoint above FLT_MAX) on, else ±FLT_MAX — what IEEE rounding gives, without the cast that
/// C++ leaves undefined for a double beyond float's range.
[[nodiscard]] inline float round_to_float(double x) noexcept {
  constexpr double top = static_cast<double>(std::numeric_limits<float>::max());
  if (x > top || x < -top) {  // NaN compares false: it takes the cast below
    const float inf = std::numeric_limits<float>::infinity();
    const float big = (x > 0 ? x : -x) >= 0x1p128 - 0x1p103 ? inf : std::numeric_limits<float>::max();
    return x > 0 ? big : -big;
  }
  return static_cast<float>(x);
}

/// Numbers of dtype `from` (F16, BF16, F32 or F64), little-endian at `src`, into `out`.
template <class T>
void decode_numbers(safetensors_dtype from, const unsigned char* src, std::span<T> out) noexcept {
  const std::size_t n = out.size();
  switch (from) {
    case safetensors_dtype::F16:
      for (std::size_t k = 0; k < n; ++k)
        out[k] = static_cast<T>(half_to_float(static_cast<std::uint16_t>(read_le<2>(src + 2 * k))));
      break;
    case safetensors_dtype::BF16:
      for (std::size_t k = 0; k < n; ++k)
        out[k] = static_cast<T>(bf16_to_float(static_cast<std::uint16_t>(read_le<2>(src + 2 * k))));
      break;
    case safetensors_dtype::F32:
      for (std::size_t k = 0; k < n; ++k)
        out[k] = static_cast<T>(std::bit_cast<float>(static_cast<std::uint32_t>(read_le<4>(src + 4 * k))));
      break;
    default:  // F64
      for (std::size_t k = 0; k < n; ++k) {
        const double x = std::bit_cast<double>(read_le<8>(src + 8 * k));
        if constexpr (std::is_same_v<T, float>)
          out[k] = round_to_float(x);
        else
          out[k] = x;
      }
      break;
  }
}

/// `in` as F32 (float) or F64 (double) bytes, little-endian, at `dst`.
template <class T>
void encode_numbers(std::span<const T> in, unsigned char* dst) noexcept {
  if constexpr (std::is_same_v<T, float>) {
    for (std::size_t k = 0; k < in.size(); ++k) write_le<4>(dst + 4 * k, std::bit_cast<std::uint32_t>(in[k]));
  } else {
    for (std::size_t k = 0; k < in.size(); ++k) write_le<8>(dst + 8 * k, std::bit_cast<std::uint64_t>(in[k]));
  }
}

template <class T>
constexpr void check_number_type() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "attn safetensors: only float (F32) and double (F64) are saved and loaded; long double "
                "has no safetensors dtype (copy it into double, which rounds it)");
  static_assert(std::numeric_limits<T>::is_iec559,
                "attn safetensors: float and double must be IEEE binary32 and binary64");
}

/// N of the first 8 bytes, checked against the bound and the file's size, before anything is
/// allocated or read.
inline std::size_t header_length(const char* where, const std::string& source, const unsigned char* first8,
                                 std::uint64_t file_bytes) {
  const std::uint64_t n = read_le<8>(first8);
  if (n > safetensors_max_header_bytes)
    throw_file_error(where, source,
                     "the header length is " + std::to_string(n) + " bytes, more than the " +
                         std::to_string(safetensors_max_header_bytes) + " attn reads");
  if (n > file_bytes - 8)
    throw_file_error(where, source,
                     "the header length is " + std::to_string(n) + " bytes but the file has only " +
                         std::to_string(file_bytes - 8) + " after the 8 that give it");
  return static_cast<std::size_t>(n);
}

inline void check_file_start(const char* where, const std::string& source, std::uint64_t file_bytes) {
  if (file_bytes < 8)
    throw_file_error(where, source,
                     "the file is " + std::to_string(file_bytes) +
                         " bytes, shorter than the 8 that give the header's length");
}

inline safetensors_dtype parse_dtype(std::string_view s, bool& known) noexcept {
  for (unsigned k = 0; k <= static_cast<unsigned>(safetensors_dtype::C64); ++k)
    if (dtype_name(static_cast<safetensors_dtype>(k)) == s) {
      known = true;
      return static_cast<safetensors_dtype>(k);
    }
  known = false;
  return safetensors_dtype::BOOL;
}

/// The header's JSON, parsed and checked against `data_bytes` bytes of data: every tensor's
/// bytes its dtype × shape, the tensors in order of their offsets covering the data exactly (no
/// overlap, no hole, nothing past the end), names unique.
inline safetensors_header parse_header(const char* where, const std::string& source, std::string_view text,
                                       std::uint64_t data_bytes) {
  safetensors_header h;
  auto fail_at = [&](const char* what, std::size_t at) {
    throw_file_error(where, source,
                     std::string("the header is not the JSON safetensors needs: ") + what + " (byte " +
                         std::to_string(at) + " of the header)");
  };
  if (text.empty() || text[0] != '{') fail_at("it does not start with '{'", 0);
  json_reader<decltype(fail_at)> r(text, fail_at);
  std::map<std::string, std::size_t, std::less<>> index;
  bool seen_metadata = false;
  r.expect('{', "expected '{'");
  if (!r.consume('}')) {
    for (;;) {
      const std::size_t key_at = r.position();
      std::string name = r.string();
      r.expect(':', "expected ':' after a name");
      if (name == "__metadata__") {
        if (seen_metadata) fail_at("\"__metadata__\" appears twice", key_at);
        seen_metadata = true;
        r.expect('{', "\"__metadata__\" must be an object of strings");
        if (!r.consume('}')) {
          for (;;) {
            const std::size_t at = r.position();
            std::string key = r.string();
            r.expect(':', "expected ':' after a name");
            if (r.peek() != '"') fail_at("a value of \"__metadata__\" that is not a string", r.position());
            std::string value = r.string();
            if (!h.metadata.emplace(std::move(key), std::move(value)).second)
              fail_at("a key of \"__metadata__\" appears twice", at);
            if (r.consume(',')) continue;
            r.expect('}', "expected ',' or '}'");
            break;
          }
        }
      } else {
        safetensors_tensor_info t;
        t.name = std::move(name);
        bool has_dtype = false, has_shape = false, has_offsets = false;
        r.expect('{', "a tensor must be an object {\"dtype\", \"shape\", \"data_offsets\"}");
        if (!r.consume('}')) {
          for (;;) {
            const std::size_t at = r.position();
            const std::string field = r.string();
            r.expect(':', "expected ':' after a name");
            if (field == "dtype") {
              if (has_dtype) fail_at("\"dtype\" appears twice in a tensor", at);
              has_dtype = true;
              const std::size_t value_at = r.position();
              bool known = false;
              t.dtype = parse_dtype(r.string(), known);
              if (!known) fail_at("a dtype the format does not have (or one attn does not know the size of)", value_at);
            } else if (field == "shape") {
              if (has_shape) fail_at("\"shape\" appears twice in a tensor", at);
              has_shape = true;
              r.expect('[', "\"shape\" must be an array of non-negative integers");
              if (!r.consume(']')) {
                for (;;) {
                  const std::size_t value_at = r.position();
                  const std::uint64_t d = r.integer();
                  if (d > std::numeric_limits<std::size_t>::max()) fail_at("a dimension beyond std::size_t", value_at);
                  t.shape.push_back(static_cast<std::size_t>(d));
                  if (r.consume(',')) continue;
                  r.expect(']', "expected ',' or ']'");
                  break;
                }
              }
            } else if (field == "data_offsets") {
              if (has_offsets) fail_at("\"data_offsets\" appears twice in a tensor", at);
              has_offsets = true;
              r.expect('[', "\"data_offsets\" must be [begin, end]");
              const std::uint64_t b = r.integer();
              r.expect(',', "\"data_offsets\" must be [begin, end]");
              const std::uint64_t e = r.integer();
              r.expect(']', "\"data_offsets\" must be [begin, end]");
              if (b > data_bytes || e > data_bytes)
                throw_file_error(where, source,
                                 "tensor " + quoted_name(t.name) + " has data_offsets [" + std::to_string(b) + ", " +
                                     std::to_string(e) + "], past the end of the data (" +
                                     std::to_string(data_bytes) + " bytes)");
              t.begin = static_cast<std::size_t>(b);
              t.end = static_cast<std::size_t>(e);
            } else {
              fail_at("a tensor field other than \"dtype\", \"shape\" and \"data_offsets\"", at);
            }
            if (r.consume(',')) continue;
            r.expect('}', "expected ',' or '}'");
            break;
          }
        }
        if (!has_dtype || !has_shape || !has_offsets)
          throw_file_error(where, source,
                           "tensor " + quoted_name(t.name) + " lacks " +
                               (!has_dtype ? "\"dtype\"" : !has_shape ? "\"shape\"" : "\"data_offsets\""));
        if (!index.emplace(t.name, h.tensors.size()).second)
          throw_file_error(where, source, "tensor " + quoted_name(t.name) + " appears twice in the header");
        h.tensors.push_back(std::move(t));
      }
      if (r.consume(',')) continue;
      r.expect('}', "expected ',' or '}'");
      break;
    }
  }
  if (!r.at_end()) fail_at("bytes after the header's object that are not white space", r.position());

  // each tensor's bytes, then the tensors in order of their offsets: no overlap, no hole
  for (const safetensors_tensor_info& t : h.tensors) {
    const std::string offsets = "[" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
    if (t.end < t.begin)
      throw_file_error(where, source, "tensor " + quoted_name(t.name) + " has data_offsets " + offsets + ": its end is before its begin");
    std::size_t count = 0;
    const std::size_t size = dtype_bytes(t.dtype);
    if (!count_of(t.shape, count) || count > std::numeric_limits<std::size_t>::max() / size)
      throw_file_error(where, source,
                       "tensor " + quoted_name(t.name) + " of shape " + shape_text(t.shape) +
                           " has more bytes than std::size_t counts");
    if (t.end - t.begin != count * size)
      throw_file_error(where, source,
                       "tensor " + quoted_name(t.name) + " is " + std::string(dtype_name(t.dtype)) + " of shape " +
                           shape_text(t.shape) + ", " + std::to_string(count * size) + " bytes, but its data_offsets " +
                           offsets + " span " + std::to_string(t.end - t.begin));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const safetensors_tensor_info& a, const safetensors_tensor_info& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::size_t at = 0;
  for (std::size_t k = 0; k < h.tensors.size(); ++k) {
    const safetensors_tensor_info& t = h.tensors[k];
    if (t.begin < at)
      throw_file_error(where, source,
                       "tensor " + quoted_name(t.name) + " (bytes " + std::to_string(t.begin) + " to " + std::to_string(t.end) +
                           ") overlaps tensor " + quoted_name(h.tensors[k - 1].name) + " (bytes " +
                           std::to_string(h.tensors[k - 1].begin) + " to " + std::to_string(h.tensors[k - 1].end) + ")");
    if (t.begin > at)
      throw_file_error(where, source,
                       "bytes " + std::to_string(at) + " to " + std::to_string(t.begin) +
                           " of the data belong to no tensor (a hole before tensor " + quoted_name(t.name) + ")");
    at = t.end;
  }
  if (at != data_bytes)
    throw_file_error(where, source,
                     "the data is " + std::to_string(data_bytes) + " bytes but the tensors end at byte " +
                         std::to_string(at) + " (the rest belongs to no tensor)");
  return h;
}

/// The header of a file in memory (all of it), checked.
inline safetensors_header header_of_bytes(const char* where, const std::string& source, std::span<const std::byte> file) {
  check_file_start(where, source, file.size());
  const auto* p = reinterpret_cast<const unsigned char*>(file.data());
  const std::size_t n = header_length(where, source, p, file.size());
  safetensors_header h =
      parse_header(where, source, std::string_view(reinterpret_cast<const char*>(p + 8), n), file.size() - 8 - n);
  h.data_offset = 8 + n;
  return h;
}

/// Throws overlap_error when a buffer to be written lies over the file's bytes it reads.
template <class T>
void check_apart_from_file(std::span<const named_tensor<T>> list, std::span<const std::byte> file) {
  const auto* first = reinterpret_cast<const unsigned char*>(file.data());
  const auto* last = first + file.size();
  for (const named_tensor<T>& t : list) {
    if (t.data.empty() || file.empty()) continue;
    const auto* b = reinterpret_cast<const unsigned char*>(t.data.data());
    const auto* e = reinterpret_cast<const unsigned char*>(t.data.data() + t.data.size());
    const std::less<const unsigned char*> before;
    if (before(b, last) && before(first, e))
      throw_overlap(load_name, ("the buffer of " + quoted_name(t.name)).c_str(), "the file's bytes");
  }
}

/// An open file and its size.
struct input_file {
  std::ifstream in;
  std::uint64_t bytes = 0;
};

inline std::string path_text(const std::filesystem::path& path) { return path.string(); }

inline input_file open_input(const char* where, const std::filesystem::path& path) {
  std::error_code ec;
  const bool regular = std::filesystem::is_regular_file(path, ec);
  if (!regular)
    throw_file_error(where, path_text(path), ec ? "cannot be read: " + ec.message() : std::string("is not a regular file"));
  input_file f;
  f.bytes = std::filesystem::file_size(path, ec);
  if (ec) throw_file_error(where, path_text(path), "cannot be read: " + ec.message());
  if (f.bytes > std::numeric_limits<std::size_t>::max())
    throw_file_error(where, path_text(path), "is larger than std::size_t counts");
  f.in.open(path, std::ios::binary);
  if (!f.in) throw_file_error(where, path_text(path), "cannot be opened for reading");
  return f;
}

inline void read_exactly(const char* where, const std::filesystem::path& path, std::ifstream& in, void* to,
                         std::size_t bytes) {
  if (bytes == 0) return;
  in.read(static_cast<char*>(to), static_cast<std::streamsize>(bytes));
  if (!in || static_cast<std::size_t>(in.gcount()) != bytes)
    throw_file_error(where, path_text(path), "the file ended early or could not be read (was it changed while being read?)");
}

/// The header of a file on disk: 8 bytes, then N ≤ the bound and ≤ what the file holds.
inline safetensors_header header_of_file(const char* where, const std::filesystem::path& path, input_file& f) {
  const std::string source = path_text(path);
  check_file_start(where, source, f.bytes);
  unsigned char first8[8];
  read_exactly(where, path, f.in, first8, 8);
  const std::size_t n = header_length(where, source, first8, f.bytes);
  std::string text(n, '\0');
  read_exactly(where, path, f.in, text.data(), n);
  safetensors_header h = parse_header(where, source, text, f.bytes - 8 - n);
  h.data_offset = 8 + n;
  return h;
}

/// One requested tensor as the file holds it.
struct load_step {
  std::size_t tensor;  // in the caller's list
  safetensors_dtype dtype;
  std::size_t begin, bytes;
};

/// The caller's list checked (each buffer product(shape) numbers, names unique, buffers apart),
/// then matched against the header: each name there, a dtype T can hold, the same shape; no
/// tensor left over unless allowed. Throws before anything is written.
/// A named tensor's buffer holds product(shape) numbers, else dimension_error naming it.
template <class T>
void check_tensor_size(const char* where, const named_tensor<T>& t) {
  std::size_t count = 0;
  if (!count_of(t.shape, count) || count != t.data.size())
    raise<dimension_error>(std::string(where) + ": the buffer of tensor " + quoted_name(t.name) + " holds " +
                           std::to_string(t.data.size()) + " numbers but its shape " + shape_text(t.shape) +
                           " has " + (count_of(t.shape, count) ? std::to_string(count) : std::string("more than std::size_t counts")));
}

template <class T>
std::vector<load_step> plan_load(const char* where, const std::string& source, const safetensors_header& h,
                                 std::span<const named_tensor<T>> list, const safetensors_load_options& options) {
  check_number_type<T>();
  std::map<std::string_view, std::size_t, std::less<>> asked;
  std::vector<std::pair<const T*, std::size_t>> spans;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const named_tensor<T>& t = list[k];
    check_tensor_size(where, t);
    if (!asked.emplace(t.name, k).second) throw_list_error(where, "tensor " + quoted_name(t.name) + " is asked for twice");
    if (!t.data.empty()) spans.emplace_back(t.data.data(), k);
  }
  // buffers apart: sorted by address, each must end before the next begins
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return std::less<const T*>{}(a.first, b.first); });
  for (std::size_t k = 1; k < spans.size(); ++k) {
    const named_tensor<T>& prev = list[spans[k - 1].second];
    if (std::less<const T*>{}(spans[k].first, prev.data.data() + prev.data.size()))
      throw_overlap(where, ("the buffer of " + quoted_name(list[spans[k].second].name)).c_str(),
                    ("the buffer of " + quoted_name(prev.name)).c_str());
  }
  std::vector<load_step> steps(list.size());
  std::vector<bool> found(list.size(), false);
  for (const safetensors_tensor_info& f : h.tensors) {
    const auto it = asked.find(std::string_view(f.name));
    if (it == asked.end()) {
      if (!options.allow_extra_tensors)
        throw_file_error(where, source,
                         "the file holds tensor " + quoted_name(f.name) +
                             ", which was not asked for (safetensors_load_options::allow_extra_tensors reads "
                             "a file that holds more)");
      continue;
    }
    const named_tensor<T>& t = list[it->second];
    const bool readable = f.dtype == safetensors_dtype::F16 || f.dtype == safetensors_dtype::BF16 ||
                          f.dtype == safetensors_dtype::F32 || f.dtype == safetensors_dtype::F64;
    const char* type_name = std::is_same_v<T, float> ? "float" : "double";
    if (!readable)
      throw_file_error(where, source,
                       "tensor " + quoted_name(f.name) + " is " + std::string(dtype_name(f.dtype)) + "; attn reads F16, BF16, F32 and F64");
    if (std::is_same_v<T, float> && f.dtype == safetensors_dtype::F64 && !options.allow_rounding)
      throw_file_error(where, source,
                       "tensor " + quoted_name(f.name) + " is F64, the buffer is " + type_name +
                           " (safetensors_load_options::allow_rounding rounds each number to the nearest float)");
    if (!std::ranges::equal(f.shape, t.shape))
      throw_file_error(where, source,
                       "tensor " + quoted_name(f.name) + " is " + shape_text(f.shape) + " in the file but " +
                           shape_text(t.shape) + " in the buffer");
    steps[it->second] = {it->second, f.dtype, f.begin, f.end - f.begin};
    found[it->second] = true;
  }
  for (std::size_t k = 0; k < list.size(); ++k)
    if (!found[k]) throw_file_error(where, source, "the file holds no tensor " + quoted_name(list[k].name));
  return steps;
}

/// The caller's list for a save checked: each buffer product(shape) numbers, names unique, UTF-8
/// and not "__metadata__", the metadata UTF-8; the header, padded with spaces to a multiple of 8
/// bytes (as the reference library does), and the data's size.
template <class T>
std::string header_for_save(std::span<const named_tensor<T>> list, const safetensors_metadata& metadata,
                            std::size_t& data_bytes) {
  using U = std::remove_const_t<T>;
  check_number_type<U>();
  const char* where = save_name;
  auto check_text = [&](const std::string& s, const char* what) {
    if (first_invalid_utf8(s) != std::string_view::npos)
      throw_list_error(where, std::string(what) + " " + quoted_name(s) + " is not UTF-8");
  };
  auto json_string = [](std::string& out, std::string_view s) {
    out += '"';
    append_json_escaped(out, s);
    out += '"';
  };
  std::string text = "{";
  if (!metadata.empty()) {
    text += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      check_text(key, "the metadata key");
      check_text(value, "the metadata value");
      if (!first) text += ',';
      first = false;
      json_string(text, key);
      text += ':';
      json_string(text, value);
    }
    text += '}';
  }
  std::map<std::string_view, std::size_t, std::less<>> names;
  std::size_t offset = 0;
  for (std::size_t k = 0; k < list.size(); ++k) {
    const named_tensor<T>& t = list[k];
    check_tensor_size(where, t);
    check_text(t.name, "the tensor name");
    if (t.name == "__metadata__") throw_list_error(where, "a tensor may not be named \"__metadata__\"");
    if (!names.emplace(t.name, k).second) throw_list_error(where, "tensor " + quoted_name(t.name) + " is given twice");
    const std::size_t bytes = t.data.size() * sizeof(U);  // a buffer in memory: no overflow
    if (offset > std::numeric_limits<std::size_t>::max() - bytes)
      raise<dimension_error>(std::string(where) + ": the tensors hold more bytes than std::size_t counts");
    if (text.size() > 1) text += ',';
    json_string(text, t.name);
    text += std::is_same_v<U, float> ? ":{\"dtype\":\"F32\",\"shape\":[" : ":{\"dtype\":\"F64\",\"shape\":[";
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
      if (d != 0) text += ',';
      text += std::to_string(t.shape[d]);
    }
    text += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  text += '}';
  text.append((8 - text.size() % 8) % 8, ' ');
  data_bytes = offset;
  return text;
}

/// The 8-byte length, the header and each tensor's numbers, in pieces to `sink(bytes, count)`.
template <class T, class Sink>
void write_file_bytes(std::span<const named_tensor<T>> list, const std::string& header, Sink&& sink) {
  using U = std::remove_const_t<T>;
  unsigned char length[8];
  write_le<8>(length, header.size());
  sink(length, 8);
  sink(reinterpret_cast<const unsigned char*>(header.data()), header.size());
  constexpr std::size_t chunk = 4096;
  unsigned char buffer[chunk * sizeof(U)];
  for (const named_tensor<T>& t : list) {
    const std::span<const U> numbers(t.data.data(), t.data.size());
    for (std::size_t at = 0; at < numbers.size(); at += chunk) {
      const std::span<const U> piece = numbers.subspan(at, std::min(chunk, numbers.size() - at));
      encode_numbers<U>(piece, buffer);
      sink(buffer, piece.size() * sizeof(U));
    }
  }
}

template <class R>
using tensor_number_t = typename std::ranges::range_value_t<const R>::value_type;

template <class R>
auto span_of(const R& tensors) {
  return std::span<const std::ranges::range_value_t<const R>>(std::ranges::data(tensors), std::ranges::size(tensors));
}

/// A name for a temporary file beside `path`: path + ".tmp-" and 16 hexadecimal digits from the
/// clock and a counter.
inline std::filesystem::path temporary_beside(const std::filesystem::path& path) {
  static std::atomic<std::uint64_t> counter{0};
  const auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::uint64_t bits = now ^ ((counter.fetch_add(1) + 1) * 0x9E3779B97F4A7C15u) ^ reinterpret_cast<std::uintptr_t>(&path);
  std::string suffix = ".tmp-";
  for (int k = 0; k < 16; ++k, bits >>= 4) suffix += "0123456789abcdef"[bits & 15];
  std::filesystem::path tmp = path;
  tmp += suffix;
  return tmp;
}

}  // namespace detail

/// The file's bytes in memory: the header (padded with spaces to a multiple of 8 bytes), then
/// each tensor's numbers in the list's order, F32 for float and F64 for double, little-endian.
/// Throws dimension_error when a buffer does not hold product(shape) numbers, domain_error for a
/// name given twice, one that is not UTF-8 or is "__metadata__", or metadata that is not UTF-8.
template <named_tensor_list R>
[[nodiscard]] std::vector<std::byte> save_safetensors(const R& tensors, const safetensors_metadata& metadata = {}) {
  const auto list = detail::span_of(tensors);
  std::size_t data_bytes = 0;
  const std::string header = detail::header_for_save(list, metadata, data_bytes);
  std::vector<std::byte> out;
  out.reserve(8 + header.size() + data_bytes);
  detail::write_file_bytes(list, header, [&](const unsigned char* p, std::size_t n) {
    const auto* b = reinterpret_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  });
  return out;
}

/// Writes the file save_safetensors(tensors, metadata) gives to `path`: to a temporary file
/// beside it, then renamed over it, so that the path holds the old file or the new one whole,
/// never a part (no fsync: the standard has none). Throws as the in-memory form does, and
/// file_error when the file cannot be written or renamed (the temporary file removed).
template <named_tensor_list R>
void save_safetensors(const std::filesystem::path& path, const R& tensors, const safetensors_metadata& metadata = {}) {
  const auto list = detail::span_of(tensors);
  std::size_t data_bytes = 0;
  const std::string header = detail::header_for_save(list, metadata, data_bytes);
  const std::filesystem::path tmp = detail::temporary_beside(path);
  const std::string source = detail::path_text(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      detail::throw_file_error(detail::save_name, source,
                               "cannot create the temporary file " + detail::path_text(tmp) + " beside it");
    detail::write_file_bytes(list, header, [&](const unsigned char* p, std::size_t n) {
      if (out) out.write(reinterpret_cast<const char*>(p), static_cast<std::streamsize>(n));
    });
    out.flush();
    out.close();
    if (!out) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      detail::throw_file_error(detail::save_name, source,
                               "writing the temporary file " + detail::path_text(tmp) +
                                   " failed (is the disk full?); the file at the path is as it was");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    detail::throw_file_error(detail::save_name, source, "cannot rename the temporary file over it: " + ec.message());
  }
}

/// The header of a file in memory, checked as a load checks it (layout, offsets, names).
[[nodiscard]] inline safetensors_header read_safetensors_header(std::span<const std::byte> file) {
  return detail::header_of_bytes(detail::header_name, detail::in_memory, file);
}

/// The header of the file at `path`, checked; reads the 8 + N bytes of the header only.
[[nodiscard]] inline safetensors_header read_safetensors_header(const std::filesystem::path& path) {
  detail::input_file f = detail::open_input(detail::header_name, path);
  return detail::header_of_file(detail::header_name, path, f);
}

/// Reads the named tensors of a file in memory into the caller's buffers and returns the file's
/// metadata. Each name must be in the file with the same shape and a dtype the buffer holds
/// (F16, BF16, F32, F64; F64 into float only with allow_rounding); tensors not asked for are
/// refused unless allow_extra_tensors. Throws file_error for a file that breaks the format or
/// does not fit, dimension_error for a buffer that does not hold product(shape) numbers,
/// domain_error for a name asked for twice, overlap_error for buffers that overlap — each before
/// anything is written.
template <named_tensor_list R>
  requires(!std::is_const_v<detail::tensor_number_t<R>>)
safetensors_metadata load_safetensors(std::span<const std::byte> file, const R& tensors,
                                      const safetensors_load_options& options = {}) {
  using T = detail::tensor_number_t<R>;
  const auto list = detail::span_of(tensors);
  const std::string source = detail::in_memory;
  safetensors_header h = detail::header_of_bytes(detail::load_name, source, file);
  const std::vector<detail::load_step> steps = detail::plan_load<T>(detail::load_name, source, h, list, options);
  detail::check_apart_from_file(list, file);
  const auto* data = reinterpret_cast<const unsigned char*>(file.data()) + h.data_offset;
  for (const detail::load_step& s : steps) detail::decode_numbers<T>(s.dtype, data + s.begin, list[s.tensor].data);
  return std::move(h.metadata);
}

/// load_safetensors from the file at `path`: reads the header, checks everything, then reads the
/// requested tensors' bytes into one scratch buffer and only then converts them into the
/// caller's buffers, so that a read that fails part way leaves them untouched too.
template <named_tensor_list R>
  requires(!std::is_const_v<detail::tensor_number_t<R>>)
safetensors_metadata load_safetensors(const std::filesystem::path& path, const R& tensors,
                                      const safetensors_load_options& options = {}) {
  using T = detail::tensor_number_t<R>;
  const auto list = detail::span_of(tensors);
  detail::check_number_type<T>();
  detail::input_file f = detail::open_input(detail::load_name, path);
  safetensors_header h = detail::header_of_file(detail::load_name, path, f);
  const std::vector<detail::load_step> steps =
      detail::plan_load<T>(detail::load_name, detail::path_text(path), h, list, options);
  std::size_t total = 0;
  for (const detail::load_step& s : steps) total += s.bytes;  // distinct ranges of the file: no overflow
  std::vector<unsigned char> scratch(total);
  std::size_t at = 0;
  for (const detail::load_step& s : steps) {
    f.in.seekg(static_cast<std::streamoff>(h.data_offset + s.begin));
    detail::read_exactly(detail::load_name, path, f.in, scratch.data() + at, s.bytes);
    at += s.bytes;
  }
  at = 0;
  for (const detail::load_step& s : steps) {
    detail::decode_numbers<T>(s.dtype, scratch.data() + at, list[s.tensor].data);
    at += s.bytes;
  }
  return std::move(h.metadata);
}

}  // namespace attn
