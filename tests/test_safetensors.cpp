// attn/safetensors.hpp: tensors saved and loaded in the safetensors format (docs/safetensors.md).
// Round trips of float and double bit for bit; the exact bytes of a small file; F16 and BF16 read
// exactly (every one of the 2^16 patterns against a widening computed by ldexp); F64 into float
// only when asked, rounded as IEEE rounds (the cases beyond float's range included); every kind of
// bad file refused with its message, from memory and from disk, and the buffers untouched; the
// caller's list checked; a save that fails leaves the earlier file whole. A file Python wrote
// (tests/python/python_written.safetensors, committed) is read on every build; the CTest tests
// python_safetensors and torch_safetensors run tests/python/safetensors_check.py, which reads what
// the hidden test cases here write and writes what they read.
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <csignal>
#include <sys/resource.h>
#define ATTN_TEST_HAVE_RLIMIT 1
#else
#define ATTN_TEST_HAVE_RLIMIT 0
#endif

#include "attn/safetensors.hpp"
#include "attn_catch.hpp"
#include "doc_snippets.hpp"

namespace {

namespace fs = std::filesystem;
using attn::named_tensor;
using bytes_t = std::vector<std::byte>;

static_assert(attn::named_tensor_list<std::vector<named_tensor<float>>>);
static_assert(attn::named_tensor_list<std::vector<named_tensor<const double>>>);
static_assert(attn::named_tensor_list<std::span<const named_tensor<double>>>);
static_assert(!attn::named_tensor_list<std::vector<named_tensor<long double>>>);  // no dtype holds it
static_assert(!attn::named_tensor_list<std::vector<named_tensor<int>>>);
// a load writes: a list of const numbers is not one it takes
template <class L>
concept loadable = requires(L l, bytes_t b) { attn::load_safetensors(b, l); };
static_assert(!loadable<std::vector<named_tensor<const float>>>);
static_assert(loadable<std::vector<named_tensor<float>>>);

/// The deterministic numbers of the round trips and of tests/python/safetensors_check.py: number k of
/// tensor t is ((37k + 11t) mod 64 − 32) / 8, exact in BF16, F16, F32 and F64.
double pattern(std::size_t t, std::size_t k) {
  return static_cast<double>(static_cast<long>((37 * k + 11 * t) % 64) - 32) / 8;
}

template <class T>
std::vector<T> pattern_numbers(std::size_t t, std::size_t n) {
  std::vector<T> v(n);
  for (std::size_t k = 0; k < n; ++k) v[k] = static_cast<T>(pattern(t, k));
  return v;
}

void append_le(bytes_t& out, std::uint64_t v, int bytes) {
  for (int k = 0; k < bytes; ++k) out.push_back(static_cast<std::byte>((v >> (8 * k)) & 0xFF));
}

/// A file: the 8-byte length of `header`, the header as given (no padding), then `data`.
bytes_t file_of(const std::string& header, const bytes_t& data = {}) {
  bytes_t f;
  append_le(f, header.size(), 8);
  for (const char c : header) f.push_back(static_cast<std::byte>(c));
  f.insert(f.end(), data.begin(), data.end());
  return f;
}

bytes_t f32_bytes(const std::vector<float>& v) {
  bytes_t b;
  for (const float x : v) append_le(b, std::bit_cast<std::uint32_t>(x), 4);
  return b;
}

bytes_t f64_bytes(const std::vector<double>& v) {
  bytes_t b;
  for (const double x : v) append_le(b, std::bit_cast<std::uint64_t>(x), 8);
  return b;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

/// A directory of its own under the system's temporary directory, removed at the end.
struct scratch_dir {
  fs::path path;
  explicit scratch_dir(const std::string& name) {
    // the clock in the name: test runs of other builds on the machine get directories of their own
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    path = fs::temp_directory_path() / ("attn_test_safetensors_" + name + "_" + std::to_string(now));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
};

void write_file(const fs::path& p, const bytes_t& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

bytes_t read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes_t b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

std::string text_of(const bytes_t& b, std::size_t from, std::size_t count) {
  return std::string(reinterpret_cast<const char*>(b.data()) + from, count);
}

}  // namespace

TEST_CASE("safetensors: a small file's bytes are the format's, header padded to 8 with spaces", "[safetensors]") {
  const std::vector<float> w{1, 2, 3, 4, 5, 6};
  const std::vector<double> b{0.5, -1};
  const std::vector<named_tensor<const float>> fl{{"w", {2, 3}, w}};
  const bytes_t file = attn::save_safetensors(fl, {{"format", "pt"}});
  const std::string header = R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";
  const std::size_t padded = (header.size() + 7) / 8 * 8;  // 87 bytes, padded to 88
  REQUIRE(file.size() == 8 + padded + 24);
  bytes_t length;
  append_le(length, padded, 8);
  REQUIRE(bytes_t(file.begin(), file.begin() + 8) == length);
  REQUIRE(text_of(file, 8, padded) == header + std::string(padded - header.size(), ' '));
  REQUIRE(bytes_t(file.begin() + static_cast<std::ptrdiff_t>(8 + padded), file.end()) == f32_bytes(w));

  // double as F64, tensors in the list's order (not sorted by name), no metadata key when none
  const std::vector<named_tensor<const double>> dl{{"z", {2}, b}, {"a", {}, std::span<const double>(b).first(1)}};
  const bytes_t f2 = attn::save_safetensors(dl);
  const std::string h2 = R"({"z":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},"a":{"dtype":"F64","shape":[],"data_offsets":[16,24]}})";
  REQUIRE(text_of(f2, 8, h2.size()) == h2);
  REQUIRE((8 + text_of(f2, 8, (f2.size() - 8 - 24)).size()) % 8 == 0);
  bytes_t data = f64_bytes(b);
  const bytes_t first = f64_bytes({b[0]});
  data.insert(data.end(), first.begin(), first.end());
  REQUIRE(bytes_t(f2.end() - 24, f2.end()) == data);
}

TEST_CASE("safetensors: float and double round trip bit for bit, in memory and on disk", "[safetensors]") {
  scratch_dir dir("round_trip");
  // every kind of float: the pattern, then ±0, ±inf, NaN with a payload, subnormals, ±max
  std::vector<float> a = pattern_numbers<float>(0, 24);
  const float nan_payload = std::bit_cast<float>(0x7FC01234u);
  for (const float x : {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                        nan_payload, std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::max(),
                        std::numeric_limits<float>::max()})
    a.push_back(x);
  std::vector<float> scalar{2.5f}, none;
  std::vector<double> d = pattern_numbers<double>(1, 12);
  d.push_back(std::numeric_limits<double>::denorm_min());
  d.push_back(1e300);
  d.push_back(std::bit_cast<double>(0xFFF8000000000ABCull));

  const std::vector<named_tensor<float>> fl{{"layers.0.weight", {4, 8}, a}, {"s", {}, scalar}, {"empty", {0, 3}, none}};
  const std::vector<named_tensor<double>> dl{{"d", {3, 5}, d}};
  const attn::safetensors_metadata meta{{"d_model", "8"}, {"note", "é ✓ \"quoted\"\n"}};

  SECTION("in memory") {
    const bytes_t ff = attn::save_safetensors(fl, meta), fd = attn::save_safetensors(dl);
    std::vector<float> a2(a.size(), 7), s2(1, 7), n2;
    std::vector<double> d2(d.size(), 7);
    const std::vector<named_tensor<float>> fl2{{"layers.0.weight", {4, 8}, a2}, {"s", {}, s2}, {"empty", {0, 3}, n2}};
    const std::vector<named_tensor<double>> dl2{{"d", {3, 5}, d2}};
    REQUIRE(attn::load_safetensors(ff, fl2) == meta);
    REQUIRE(attn::load_safetensors(fd, dl2).empty());
    REQUIRE(same_bits(a2, a));
    REQUIRE(same_bits(s2, scalar));
    REQUIRE(same_bits(d2, d));
    // F32 into double widens exactly
    std::vector<double> wide(a.size());
    const std::vector<named_tensor<double>> wl{{"layers.0.weight", {4, 8}, wide}};
    attn::load_safetensors(ff, wl, {.allow_extra_tensors = true});
    for (std::size_t k = 0; k < a.size(); ++k)
      REQUIRE((std::isnan(a[k]) ? std::isnan(wide[k]) : std::bit_cast<std::uint64_t>(wide[k]) ==
                                                                std::bit_cast<std::uint64_t>(static_cast<double>(a[k]))));
    // the header as read_safetensors_header gives it
    const attn::safetensors_header h = attn::read_safetensors_header(ff);
    REQUIRE(h.tensors.size() == 3);
    REQUIRE(h.tensors[0].name == "layers.0.weight");
    REQUIRE(h.tensors[0].dtype == attn::safetensors_dtype::F32);
    REQUIRE(h.tensors[0].shape == std::vector<std::size_t>{4, 8});
    REQUIRE((h.tensors[1].begin == 128 && h.tensors[1].end == 132));
    REQUIRE(h.metadata == meta);
    REQUIRE(h.data_offset % 8 == 0);
  }
  SECTION("on disk") {
    const fs::path pf = dir.path / "f.safetensors", pd = dir.path / "d.safetensors";
    attn::save_safetensors(pf, fl, meta);
    attn::save_safetensors(pd, dl);
    REQUIRE(read_file(pf) == attn::save_safetensors(fl, meta));  // the same bytes as in memory
    std::vector<float> a2(a.size(), 7), s2(1, 7), n2;
    std::vector<double> d2(d.size(), 7);
    const std::vector<named_tensor<float>> fl2{{"layers.0.weight", {4, 8}, a2}, {"s", {}, s2}, {"empty", {0, 3}, n2}};
    const std::vector<named_tensor<double>> dl2{{"d", {3, 5}, d2}};
    REQUIRE(attn::load_safetensors(pf, fl2) == meta);
    attn::load_safetensors(pd, dl2);
    REQUIRE(same_bits(a2, a));
    REQUIRE(same_bits(d2, d));
    REQUIRE(attn::read_safetensors_header(pf).metadata == meta);
    // saving over a file replaces it, and leaves no temporary file beside it
    attn::save_safetensors(pf, dl);
    REQUIRE(read_file(pf) == attn::save_safetensors(dl));
    REQUIRE(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 2);
  }
}

TEST_CASE("safetensors: F16 and BF16 widen exactly, every bit pattern", "[safetensors]") {
  // the reference: the formats' definitions by ldexp (sign, exponent, significand), not bit moves
  auto half_ref = [](std::uint32_t h) {
    const std::uint32_t e = (h >> 10) & 31, m = h & 1023;
    const double s = (h >> 15) != 0 ? -1 : 1;
    if (e == 31) return m == 0 ? s * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    return e == 0 ? s * std::ldexp(m, -24) : s * std::ldexp(1024 + m, static_cast<int>(e) - 25);
  };
  auto bf16_ref = [](std::uint32_t b) {
    const std::uint32_t e = (b >> 7) & 255, m = b & 127;
    const double s = (b >> 15) != 0 ? -1 : 1;
    if (e == 255) return m == 0 ? s * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    return e == 0 ? s * std::ldexp(m, -133) : s * std::ldexp(128 + m, static_cast<int>(e) - 134);
  };
  bytes_t data;
  for (std::uint32_t h = 0; h < 65536; ++h) append_le(data, h, 2);
  for (const char* dtype : {"F16", "BF16"}) {
    const bool half = std::string(dtype) == "F16";
    const bytes_t file = file_of(std::string(R"({"x":{"dtype":")") + dtype + R"(","shape":[256,256],"data_offsets":[0,131072]}})", data);
    std::vector<float> f(65536);
    std::vector<double> d(65536);
    attn::load_safetensors(file, std::vector<named_tensor<float>>{{"x", {256, 256}, f}});
    attn::load_safetensors(file, std::vector<named_tensor<double>>{{"x", {256, 256}, d}});
    std::size_t wrong = 0;
    for (std::uint32_t h = 0; h < 65536; ++h) {
      const double want = half ? half_ref(h) : bf16_ref(h);
      const bool negative = (h >> 15) != 0;
      if (std::isnan(want)) {
        wrong += !(std::isnan(f[h]) && std::isnan(d[h]) && std::signbit(f[h]) == negative && std::signbit(d[h]) == negative);
      } else {
        wrong += !(static_cast<double>(f[h]) == want && d[h] == want && std::signbit(f[h]) == negative &&
                   std::signbit(d[h]) == negative);
      }
    }
    INFO(dtype);
    REQUIRE(wrong == 0);
  }
}

TEST_CASE("safetensors: F64 into float only when asked, rounded as IEEE rounds", "[safetensors]") {
  const double fmax = std::numeric_limits<float>::max();
  const double inf = std::numeric_limits<double>::infinity();
  // beyond float's range: below the midpoint 2^128 − 2^103 to FLT_MAX, from it on to inf
  // (at 2^127 a double's ulp is 2^75: fmax + 2^103 − 2^75 is the double just below the midpoint)
  const std::vector<double> x{0.1, -1.0 / 3, 1e-46, 1e-45, -0.0, fmax, fmax + 0x1p103 - 0x1p75, -(0x1p128 - 0x1p103),
                              1e39, -inf, 3.0 * (1 + 0x1p-52)};
  const std::vector<float> want{0.1f, -1.0f / 3, 0.0f, std::numeric_limits<float>::denorm_min(), -0.0f,
                                std::numeric_limits<float>::max(), std::numeric_limits<float>::max(),
                                -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::infinity(),
                                -std::numeric_limits<float>::infinity(), 3.0f};
  const bytes_t file = file_of(R"({"x":{"dtype":"F64","shape":[11],"data_offsets":[0,88]}})", f64_bytes(x));
  std::vector<float> got(11, 7);
  const std::vector<named_tensor<float>> l{{"x", {11}, got}};
  REQUIRE_THROWS_MATCHES(attn::load_safetensors(file, l), attn::file_error,
                         Catch::Matchers::Message("attn::load_safetensors: the bytes given: tensor \"x\" is F64, the "
                                                  "buffer is float (safetensors_load_options::allow_rounding rounds "
                                                  "each number to the nearest float)"));
  REQUIRE(same_bits(got, std::vector<float>(11, 7)));
  attn::load_safetensors(file, l, {.allow_rounding = true});
  REQUIRE(same_bits(got, want));
}

namespace {

struct bad_case {
  const char* what;
  bytes_t file;
  std::string message;  // after "attn::load_safetensors: <source>: "
  bool extras = false;
};

std::string offsets_header(const std::string& a, const std::string& b) {
  return R"({"a":{"dtype":"F32","shape":[2],"data_offsets":)" + a + R"(},"b":{"dtype":"F32","shape":[2],"data_offsets":)" + b + "}}";
}

std::vector<bad_case> bad_files() {
  const bytes_t d16 = f32_bytes({1, 2, 3, 4});
  const std::string ok_b = R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]})";
  auto with_a = [&](const std::string& a_entry) { return "{" + a_entry + "," + ok_b + "}"; };
  bytes_t huge;
  append_le(huge, 0x8000000000000000ull, 8);
  bytes_t past = file_of("{}");
  past[0] = std::byte{200};
  std::vector<bad_case> c = {
      {"an empty file", {}, "the file is 0 bytes, shorter than the 8 that give the header's length"},
      {"5 bytes", bytes_t(5), "the file is 5 bytes, shorter than the 8 that give the header's length"},
      {"a huge header length", huge,
       "the header length is 9223372036854775808 bytes, more than the 100000000 attn reads"},
      {"a header length past the end", past, "the header length is 200 bytes but the file has only 2 after the 8 that give it"},
      {"a header that is not an object", file_of("[1]"),
       "the header is not the JSON safetensors needs: it does not start with '{' (byte 0 of the header)"},
      {"white space before the object", file_of(" {}"),
       "the header is not the JSON safetensors needs: it does not start with '{' (byte 0 of the header)"},
      {"a header cut short", file_of(R"({"a":{"dtype")"),
       "the header is not the JSON safetensors needs: the JSON ends early (byte 13 of the header)"},
      {"a header that is not JSON", file_of(R"({"a" 1})"),
       "the header is not the JSON safetensors needs: expected ':' after a name (byte 5 of the header)"},
      {"bytes after the object", file_of("{}x"),
       "the header is not the JSON safetensors needs: bytes after the header's object that are not white space (byte 2 of the header)"},
      {"a trailing comma", file_of(R"({"__metadata__":{},})"),
       "the header is not the JSON safetensors needs: expected a string (byte 19 of the header)"},
      {"a name that is not UTF-8", file_of("{\"\xFF\":1}"),
       "the header is not the JSON safetensors needs: a byte that is not UTF-8 (byte 2 of the header)"},
      {"an overlong UTF-8 form", file_of("{\"\xC0\xAF\":1}"),
       "the header is not the JSON safetensors needs: a byte that is not UTF-8 (byte 2 of the header)"},
      {"a lone surrogate", file_of(R"({"\ud800":1})"),
       "the header is not the JSON safetensors needs: a high surrogate not followed by a low one (byte 2 of the header)"},
      {"a lone low surrogate", file_of(R"({"\udc00x":1})"),
       "the header is not the JSON safetensors needs: a lone low surrogate (\\uDC00 to \\uDFFF) (byte 2 of the header)"},
      {"an unknown escape", file_of(R"({"\x":1})"),
       "the header is not the JSON safetensors needs: an unknown escape in a string (byte 2 of the header)"},
      {"a control character in a name", file_of("{\"a\nb\":1}"),
       "the header is not the JSON safetensors needs: a control character in a string (JSON needs it escaped) (byte 3 of the header)"},
      {"a tensor that is not an object", file_of(R"({"a":1})"),
       "the header is not the JSON safetensors needs: a tensor must be an object {\"dtype\", \"shape\", \"data_offsets\"} (byte 5 of the header)"},
      {"a dtype the format lacks", file_of(with_a(R"("a":{"dtype":"F17","shape":[2],"data_offsets":[0,8]})"), d16),
       "the header is not the JSON safetensors needs: a dtype the format does not have (or one attn does not know the size of) (byte 14 of the header)"},
      {"a dtype attn does not read", file_of(with_a(R"("a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]})"), d16),
       "tensor \"a\" is I32; attn reads F16, BF16, F32 and F64"},
      {"a negative dimension", file_of(with_a(R"("a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), d16),
       "the header is not the JSON safetensors needs: a negative number (byte 29 of the header)"},
      {"a fraction", file_of(with_a(R"("a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"), d16),
       "the header is not the JSON safetensors needs: a number that is not an integer (byte 29 of the header)"},
      {"an exponent", file_of(with_a(R"("a":{"dtype":"F32","shape":[2e0],"data_offsets":[0,8]})"), d16),
       "the header is not the JSON safetensors needs: a number that is not an integer (byte 29 of the header)"},
      {"a leading zero", file_of(with_a(R"("a":{"dtype":"F32","shape":[02],"data_offsets":[0,8]})"), d16),
       "the header is not the JSON safetensors needs: an integer with a leading zero (byte 29 of the header)"},
      {"an integer beyond 2^64", file_of(with_a(R"("a":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,8]})"), d16),
       "the header is not the JSON safetensors needs: an integer beyond 2^64 - 1 (byte 29 of the header)"},
      {"null for a shape", file_of(with_a(R"("a":{"dtype":"F32","shape":null,"data_offsets":[0,8]})"), d16),
       "the header is not the JSON safetensors needs: \"shape\" must be an array of non-negative integers (byte 28 of the header)"},
      {"a field the format lacks", file_of(with_a(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1})"), d16),
       "the header is not the JSON safetensors needs: a tensor field other than \"dtype\", \"shape\" and \"data_offsets\" (byte 53 of the header)"},
      {"a field twice", file_of(with_a(R"("a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]})"), d16),
       "the header is not the JSON safetensors needs: \"dtype\" appears twice in a tensor (byte 20 of the header)"},
      {"a field missing", file_of(with_a(R"("a":{"dtype":"F32","data_offsets":[0,8]})"), d16), "tensor \"a\" lacks \"shape\""},
      {"three offsets", file_of(with_a(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]})"), d16),
       "the header is not the JSON safetensors needs: \"data_offsets\" must be [begin, end] (byte 51 of the header)"},
      {"a name twice", file_of(R"({"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)" + ok_b + "}", d16),
       "tensor \"b\" appears twice in the header"},
      {"__metadata__ twice", file_of(R"({"__metadata__":{},"__metadata__":{}})"),
       "the header is not the JSON safetensors needs: \"__metadata__\" appears twice (byte 19 of the header)"},
      {"a metadata value that is not a string", file_of(R"({"__metadata__":{"n":8}})"),
       "the header is not the JSON safetensors needs: a value of \"__metadata__\" that is not a string (byte 21 of the header)"},
      {"a metadata key twice", file_of(R"({"__metadata__":{"n":"1","n":"2"}})"),
       "the header is not the JSON safetensors needs: a key of \"__metadata__\" appears twice (byte 25 of the header)"},
      {"offsets that overlap", file_of(offsets_header("[0,8]", "[4,12]"), bytes_t(12)),
       "tensor \"b\" (bytes 4 to 12) overlaps tensor \"a\" (bytes 0 to 8)"},
      {"a hole", file_of(offsets_header("[0,8]", "[12,20]"), bytes_t(20)),
       "bytes 8 to 12 of the data belong to no tensor (a hole before tensor \"b\")"},
      {"a hole at the start", file_of(offsets_header("[4,12]", "[12,20]"), bytes_t(20)),
       "bytes 0 to 4 of the data belong to no tensor (a hole before tensor \"a\")"},
      {"offsets past the end", file_of(offsets_header("[0,8]", "[8,16]"), bytes_t(12)),
       "tensor \"b\" has data_offsets [8, 16], past the end of the data (12 bytes)"},
      {"an end before the begin", file_of(offsets_header("[8,0]", "[8,16]"), bytes_t(16)),
       "tensor \"a\" has data_offsets [8, 0]: its end is before its begin"},
      {"a size that is not dtype times shape", file_of(offsets_header("[0,12]", "[12,20]"), bytes_t(20)),
       "tensor \"a\" is F32 of shape [2], 8 bytes, but its data_offsets [0, 12] span 12"},
      {"data the tensors do not cover", file_of(offsets_header("[0,8]", "[8,16]"), bytes_t(17)),
       "the data is 17 bytes but the tensors end at byte 16 (the rest belongs to no tensor)"},
      {"a shape whose count overflows",
       file_of(with_a(R"("a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"), d16),
       "tensor \"a\" of shape [4294967296, 4294967296] has more bytes than std::size_t counts"},
      {"a shape that disagrees", file_of(with_a(R"("a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]})"), d16),
       "tensor \"a\" is [1, 2] in the file but [2] in the buffer"},
      {"a tensor missing", file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32_bytes({1, 2})),
       "the file holds no tensor \"b\""},
      {"a tensor not asked for",
       file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"c":{"dtype":"F32","shape":[],"data_offsets":[8,12]},)" +
                   std::string(R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})"),
               f32_bytes({1, 2, 3, 4, 5})),
       "the file holds tensor \"c\", which was not asked for (safetensors_load_options::allow_extra_tensors reads a file that holds more)"},
      {"F64 into float", file_of(with_a(R"("a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]})"), d16),
       "tensor \"a\" is F64, the buffer is float (safetensors_load_options::allow_rounding rounds each number to the nearest float)"},
  };
  // the extra tensor allowed, a missing one still refused; allowed extras still checked for layout
  c.push_back({"a tensor missing, extras allowed", c[c.size() - 3].file, "the file holds no tensor \"b\"", true});
  c.push_back({"an extra tensor of a dtype attn does not read, overlapping",
               file_of(R"({"q":{"dtype":"I64","shape":[1],"data_offsets":[4,12]},)" +
                           std::string(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)") + ok_b + "}",
                       d16),
               "tensor \"q\" (bytes 4 to 12) overlaps tensor \"a\" (bytes 0 to 8)", true});
  return c;
}

}  // namespace

TEST_CASE("safetensors: every kind of bad file is refused with its message, the buffers untouched", "[safetensors][errors]") {
  scratch_dir dir("bad");
  const fs::path p = dir.path / "bad.safetensors";
  for (const bad_case& c : bad_files()) {
    INFO(c.what);
    std::vector<float> a(2, 7), b(2, 8);
    const std::vector<named_tensor<float>> l{{"a", {2}, a}, {"b", {2}, b}};
    const attn::safetensors_load_options options{.allow_extra_tensors = c.extras};
    REQUIRE_THROWS_MATCHES(attn::load_safetensors(c.file, l, options), attn::file_error,
                           Catch::Matchers::Message("attn::load_safetensors: the bytes given: " + c.message));
    write_file(p, c.file);
    REQUIRE_THROWS_MATCHES(attn::load_safetensors(p, l, options), attn::file_error,
                           Catch::Matchers::Message("attn::load_safetensors: " + p.string() + ": " + c.message));
    REQUIRE(same_bits(a, std::vector<float>(2, 7)));
    REQUIRE(same_bits(b, std::vector<float>(2, 8)));
  }
  // the same files as headers: those that break the layout are refused there too
  REQUIRE_THROWS_MATCHES(attn::read_safetensors_header(file_of(offsets_header("[0,8]", "[4,12]"), bytes_t(12))),
                         attn::file_error,
                         Catch::Matchers::Message("attn::read_safetensors_header: the bytes given: tensor \"b\" (bytes 4 "
                                                  "to 12) overlaps tensor \"a\" (bytes 0 to 8)"));
}

TEST_CASE("safetensors: what the header may hold — escapes, white space, any order, extras when allowed", "[safetensors]") {
  // names by escapes (é as \u00e9, 😀 as a surrogate pair, a quote, a newline), white space
  // between every token and after the object, the tensors listed out of the order of their data
  const std::string header = "{ \"__metadata__\" : { \"k\\/\" : \"v\\t\" } ,\n"
                             " \"w\\u00e9\\ud83d\\ude00\\\"\\n\" : { \"data_offsets\" : [ 8 , 16 ] , \"shape\" : [ 2 ] ,"
                             " \"dtype\" : \"F32\" } , \"first\" : {\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                             "\"empty\":{\"dtype\":\"F64\",\"shape\":[0],\"data_offsets\":[8,8]} } \r\n\t ";
  bytes_t data;
  for (const std::uint32_t b : {0x3F80u, 0xC000u, 0x0000u, 0x8000u}) append_le(data, b, 2);  // 1, −2, 0, −0
  const bytes_t w = f32_bytes({0.25f, -8.0f});
  data.insert(data.end(), w.begin(), w.end());
  const bytes_t file = file_of(header, data);
  std::vector<double> x(2), first(4), empty;
  const std::vector<named_tensor<double>> l{{"w\xC3\xA9\xF0\x9F\x98\x80\"\n", {2}, x}, {"first", {2, 2}, first}, {"empty", {0}, empty}};
  REQUIRE(attn::load_safetensors(file, l) == attn::safetensors_metadata{{"k/", "v\t"}});
  REQUIRE(x == std::vector<double>{0.25, -8});
  REQUIRE(first == std::vector<double>{1, -2, 0, 0});
  REQUIRE(std::signbit(first[3]));
  // only some tensors, the others allowed
  std::vector<float> only(2);
  attn::load_safetensors(file, std::vector<named_tensor<float>>{{"w\xC3\xA9\xF0\x9F\x98\x80\"\n", {2}, only}},
                         {.allow_extra_tensors = true});
  REQUIRE(only == std::vector<float>{0.25f, -8.0f});
  // an empty header and no tensors
  REQUIRE(attn::load_safetensors(file_of("{}"), std::vector<named_tensor<float>>{}).empty());
}

TEST_CASE("safetensors: the caller's list is checked before the file is read", "[safetensors][errors]") {
  const std::vector<float> w{1, 2, 3, 4};
  const bytes_t file = attn::save_safetensors(std::vector<named_tensor<const float>>{{"a", {2}, std::span(w).first(2)}, {"b", {2}, std::span(w).last(2)}});
  std::vector<float> buf(4, 7);
  const std::span<float> s(buf);
  using L = std::vector<named_tensor<float>>;
  REQUIRE_THROWS_MATCHES(attn::load_safetensors(file, L{{"a", {3}, s.first(2)}, {"b", {2}, s.last(2)}}), attn::dimension_error,
                         Catch::Matchers::Message("attn::load_safetensors: the buffer of tensor \"a\" holds 2 numbers but its shape [3] has 3"));
  REQUIRE_THROWS_MATCHES(attn::load_safetensors(file, L{{"a", {2}, s.first(2)}, {"a", {2}, s.last(2)}}), attn::domain_error,
                         Catch::Matchers::Message("attn::load_safetensors: tensor \"a\" is asked for twice"));
  REQUIRE_THROWS_MATCHES(attn::load_safetensors(file, L{{"a", {2}, s.first(2)}, {"b", {2}, s.subspan(1, 2)}}), attn::overlap_error,
                         Catch::Matchers::Message("attn::load_safetensors: the buffer of \"b\" overlaps the buffer of \"a\""));
  // a buffer over the file's own bytes
  bytes_t inside = file;
  std::vector<float> over(inside.size() / sizeof(float));
  std::memcpy(over.data(), inside.data(), over.size() * sizeof(float));
  const std::span<const std::byte> view(reinterpret_cast<const std::byte*>(over.data()), file.size() / 4 * 4);
  REQUIRE_THROWS_AS(attn::load_safetensors(view, L{{"a", {2}, std::span(over).first(2)}, {"b", {2}, s.last(2)}}), attn::overlap_error);
  REQUIRE(same_bits(buf, std::vector<float>(4, 7)));

  // a save: sizes, names twice, "__metadata__", names and metadata that are not UTF-8
  using C = std::vector<named_tensor<const float>>;
  const std::span<const float> cw(w);
  REQUIRE_THROWS_MATCHES(attn::save_safetensors(C{{"a", {2, 3}, cw}}), attn::dimension_error,
                         Catch::Matchers::Message("attn::save_safetensors: the buffer of tensor \"a\" holds 4 numbers but its shape [2, 3] has 6"));
  REQUIRE_THROWS_MATCHES(attn::save_safetensors(C{{"a", {4}, cw}, {"a", {4}, cw}}), attn::domain_error,
                         Catch::Matchers::Message("attn::save_safetensors: tensor \"a\" is given twice"));
  REQUIRE_THROWS_MATCHES(attn::save_safetensors(C{{"__metadata__", {4}, cw}}), attn::domain_error,
                         Catch::Matchers::Message("attn::save_safetensors: a tensor may not be named \"__metadata__\""));
  REQUIRE_THROWS_MATCHES(attn::save_safetensors(C{{"a\xFF", {4}, cw}}), attn::domain_error,
                         Catch::Matchers::Message("attn::save_safetensors: the tensor name \"a\xFF\" is not UTF-8"));
  REQUIRE_THROWS_MATCHES(attn::save_safetensors(C{{"a", {4}, cw}}, {{"k", "\xC0\x80"}}), attn::domain_error,
                         Catch::Matchers::Message("attn::save_safetensors: the metadata value \"\xC0\x80\" is not UTF-8"));
}

TEST_CASE("safetensors: a save that fails leaves the earlier file whole and no temporary file", "[safetensors][errors]") {
  scratch_dir dir("atomic");
  const fs::path p = dir.path / "model.safetensors";
  const std::vector<float> small{1, 2};
  attn::save_safetensors(p, std::vector<named_tensor<const float>>{{"w", {2}, small}});
  const bytes_t before = read_file(p);
  auto only_the_file = [&] { return std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 1; };

  // a list the save refuses: nothing is opened
  REQUIRE_THROWS_AS(attn::save_safetensors(p, std::vector<named_tensor<const float>>{{"w", {3}, small}}), attn::dimension_error);
  REQUIRE(read_file(p) == before);
  REQUIRE(only_the_file());
  // a directory that does not exist
  const fs::path nowhere = dir.path / "no" / "such" / "dir.safetensors";
  REQUIRE_THROWS_AS(attn::save_safetensors(nowhere, std::vector<named_tensor<const float>>{{"w", {2}, small}}), attn::file_error);
  REQUIRE(!fs::exists(dir.path / "no"));
  // a rename that fails: the path is a directory
  const fs::path d = dir.path / "a_directory";
  fs::create_directory(d);
  REQUIRE_THROWS_AS(attn::save_safetensors(d, std::vector<named_tensor<const float>>{{"w", {2}, small}}), attn::file_error);
  REQUIRE(fs::is_directory(d));
  fs::remove(d);
  REQUIRE(only_the_file());
  // reading what is not a file
  std::vector<float> r(2);
  REQUIRE_THROWS_MATCHES(attn::load_safetensors(dir.path, std::vector<named_tensor<float>>{{"w", {2}, r}}), attn::file_error,
                         Catch::Matchers::Message("attn::load_safetensors: " + dir.path.string() + ": is not a regular file"));
  REQUIRE_THROWS_AS(attn::load_safetensors(dir.path / "absent", std::vector<named_tensor<float>>{{"w", {2}, r}}), attn::file_error);

#if ATTN_TEST_HAVE_RLIMIT
  // a write that fails part way (the file size limit: as a full disk would), the earlier file whole
  const std::vector<float> big(1 << 16, 1.0f);
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limited = old;
  limited.rlim_cur = 4096;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &limited) == 0);
  bool threw = false;
  try {
    attn::save_safetensors(p, std::vector<named_tensor<const float>>{{"w", {big.size()}, big}});
  } catch (const attn::file_error& e) {
    threw = std::string(e.what()).find("failed (is the disk full?); the file at the path is as it was") != std::string::npos;
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  REQUIRE(threw);
  REQUIRE(read_file(p) == before);
  REQUIRE(only_the_file());
#endif
}

namespace {

/// What tests/python/safetensors_check.py writes (its write_python_file): the numbers by name.
void check_python_file(const fs::path& p) {
  std::vector<float> f32(6), specials(6), f16(4), bf16(4), scalar(1), empty;
  std::vector<double> f64(3);
  const std::vector<named_tensor<float>> fl{{"f32", {2, 3}, f32},      {"specials", {6}, specials}, {"f16", {2, 2}, f16},
                                            {"bf16", {4}, bf16},       {"scalar", {}, scalar},     {"empty", {0, 3}, empty}};
  const attn::safetensors_metadata meta =
      attn::load_safetensors(p, fl, {.allow_extra_tensors = true});  // "layers.0.wé" (F64) below
  const std::vector<named_tensor<double>> dl{{"layers.0.w\xC3\xA9", {3}, f64}};
  attn::load_safetensors(p, dl, {.allow_extra_tensors = true});
  REQUIRE(meta == attn::safetensors_metadata{{"written_by", "python json+struct"}, {"unicode", "\xC3\xA9\xE2\x9C\x93"}});
  REQUIRE(f32 == pattern_numbers<float>(0, 6));
  REQUIRE(f64 == pattern_numbers<double>(1, 3));
  REQUIRE(f16 == pattern_numbers<float>(2, 4));
  REQUIRE(bf16 == pattern_numbers<float>(3, 4));
  REQUIRE(scalar[0] == 2.5f);
  const float inf = std::numeric_limits<float>::infinity();
  REQUIRE((specials[0] == inf && specials[1] == -inf && specials[2] == 0 && std::signbit(specials[2])));
  REQUIRE(specials[3] == std::numeric_limits<float>::denorm_min());  // struct.pack('<f', 2**-149)
  REQUIRE(specials[4] == std::numeric_limits<float>::max());
  REQUIRE(std::isnan(specials[5]));
}

}  // namespace

TEST_CASE("safetensors: a file Python wrote with json and struct (committed)", "[safetensors]") {
  check_python_file(attn_test::document_path(__FILE__, "tests/python/python_written.safetensors"));
}

// The CTest tests python_safetensors and torch_safetensors run these two with ATTN_SAFETENSORS_DIR
// set (tests/python/safetensors_check.py): the first writes files for Python to read, the second
// reads the files Python (and, where present, torch) wrote there.
TEST_CASE("safetensors: write files for Python (ATTN_SAFETENSORS_DIR)", "[.][python]") {
  const char* dir = std::getenv("ATTN_SAFETENSORS_DIR");
  if (dir == nullptr) FAIL("ATTN_SAFETENSORS_DIR is not set: tests/python/safetensors_check.py runs this");
  const std::vector<float> a = pattern_numbers<float>(0, 6), s{-0.0f, std::numeric_limits<float>::infinity(), 1e-40f};
  const std::vector<double> d = pattern_numbers<double>(1, 24), one{2.5};
  attn::save_safetensors(fs::path(dir) / "attn_float.safetensors",
                         std::vector<named_tensor<const float>>{{"weight", {2, 3}, a}, {"specials", {3}, s}},
                         {{"written_by", "attn"}});
  attn::save_safetensors(fs::path(dir) / "attn_double.safetensors",
                         std::vector<named_tensor<const double>>{{"blocks.0.w\xC3\xA9", {2, 3, 4}, d}, {"scalar", {}, one}});
}

TEST_CASE("safetensors: read the files Python wrote (ATTN_SAFETENSORS_DIR)", "[.][python]") {
  const char* dir = std::getenv("ATTN_SAFETENSORS_DIR");
  if (dir == nullptr) FAIL("ATTN_SAFETENSORS_DIR is not set: tests/python/safetensors_check.py runs this");
  check_python_file(fs::path(dir) / "python_written.safetensors");
  // torch's own rounding to BF16 and F16 (where torch was importable): its widened numbers, as the
  // bits of each float in hexadecimal, are the metadata's "bf16" and "f16"
  const fs::path torch_file = fs::path(dir) / "torch_written.safetensors";
  if (!fs::exists(torch_file)) return;
  const attn::safetensors_header h = attn::read_safetensors_header(torch_file);
  for (const char* name : {"bf16", "f16"}) {
    INFO(name);
    std::vector<float> got(h.tensors.at(0).shape.at(0));
    attn::load_safetensors(torch_file, std::vector<named_tensor<float>>{{name, {got.size()}, got}}, {.allow_extra_tensors = true});
    const std::string& want = h.metadata.at(name);
    REQUIRE(want.size() == 9 * got.size() - 1);
    for (std::size_t k = 0; k < got.size(); ++k)
      REQUIRE(std::bit_cast<std::uint32_t>(got[k]) == std::stoul(want.substr(9 * k, 8), nullptr, 16));
  }
}

TEST_CASE("safetensors: docs/safetensors.md's example, quoted there", "[safetensors][docs]") {
  scratch_dir dir("docs");
  const std::filesystem::path path = dir.path / "model.safetensors";
  // docs/safetensors.md:begin
  std::vector<float> wte(64 * 8, 0.5f), ln_f(8, 1.0f);  // your parameters, wherever they live
  const std::vector<attn::named_tensor<float>> params{{"wte.weight", {64, 8}, wte}, {"ln_f.weight", {8}, ln_f}};
  attn::save_safetensors(path, params, {{"d_model", "8"}});  // F32; a temporary file, then renamed

  std::vector<float> wte2(64 * 8), ln_f2(8);  // another model of the same shapes
  const std::vector<attn::named_tensor<float>> into{{"wte.weight", {64, 8}, wte2}, {"ln_f.weight", {8}, ln_f2}};
  const attn::safetensors_metadata meta = attn::load_safetensors(path, into);  // all checked, then read
  // docs/safetensors.md:end
  REQUIRE(attn_test::quoted_in(__FILE__, "docs/safetensors.md", "// docs/safetensors.md:begin\n",
                               "  // docs/safetensors.md:end"));
  REQUIRE(meta.at("d_model") == "8");
  REQUIRE((wte2 == wte && ln_f2 == ln_f));
}
