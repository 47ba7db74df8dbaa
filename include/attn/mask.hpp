#pragma once
/// \file attn/mask.hpp
/// Masks: which notes a query may attend to (true or nonzero = may attend). `mask_view` is one
/// row of them (n entries), borrowed from any contiguous range of bool, char, signed char or
/// unsigned char (std::uint8_t) without a copy; a std::vector<bool>, which holds bits, is copied
/// once. `mask_matrix_view` is T rows of n, one per query. With `causal`, query t of T sees keys
/// 0 … t + n − T (decoding with a cache of n − T earlier keys).

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <concepts>
#include <cstddef>
#include <limits>
#include <ranges>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attn/detail/heap_array.hpp"
#include "attn/error.hpp"

namespace attn {

namespace detail {
template <class E>
concept mask_element = std::same_as<E, bool> || std::same_as<E, char> ||
    std::same_as<E, signed char> || std::same_as<E, unsigned char>;

template <class R>
concept string_like = requires { typename std::remove_cvref_t<R>::traits_type; };
}  // namespace detail

/// A contiguous, sized range of bool, char, signed char or unsigned char (not a string: its
/// characters '0' and '1' are both nonzero): what a mask may be borrowed from.
template <class R>
concept mask_range = std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    detail::mask_element<std::remove_cv_t<std::ranges::range_value_t<R>>> &&
    !detail::string_like<R>;

/// One row of a mask: entry j keeps note j when it is true (nonzero). Empty: keep every note.
/// Borrows a mask_range (which must outlive it, as for std::span); copies a std::vector<bool>.
class mask_view {
  enum class element : unsigned char { bytes, bools, chars, signed_chars };
  union pointer {  // the borrowed entries, typed so that constant evaluation may read them
    const unsigned char* bytes;
    const bool* bools;
    const char* chars;
    const signed char* signed_chars;
  };
  pointer data_{nullptr};
  std::size_t size_ = 0;
  element kind_ = element::bytes;
  detail::heap_array<detail::mask_byte> owned_{};  // a std::vector<bool>'s entries, one byte each

  /// Points the view at its own copy of the entries, if it holds one.
  constexpr void point_at_owned() noexcept {
    if (owned_.empty()) return;
    data_.bytes = owned_.data();
    kind_ = element::bytes;
  }
  /// Takes o's own copy of the entries, if it holds one, and points at it; o is then an empty
  /// view (no mask), not one that dangles. A borrowing o is left as it was.
  constexpr void take_owned(mask_view& o) noexcept {
    owned_ = std::move(o.owned_);
    if (owned_.empty()) return;
    point_at_owned();
    o.data_.bytes = nullptr;
    o.size_ = 0;
    o.kind_ = element::bytes;
  }

public:
  constexpr mask_view() noexcept = default;

  /// Borrows r: `.mask = keep` with keep a std::array<bool, n>, a std::vector<std::uint8_t>, a
  /// std::span<const char>, a C array…
  template <mask_range R>
  constexpr mask_view(const R& r) noexcept  // NOLINT: implicit, as std::span's
      : mask_view(std::ranges::data(r), std::ranges::size(r)) {}

  /// Copies the bits of a std::vector<bool> (it has no bytes to borrow).
  constexpr mask_view(const std::vector<bool>& bits)  // NOLINT: implicit on purpose
      : size_(bits.size()), owned_(bits.size()) {
    for (std::size_t j = 0; j < size_; ++j) owned_[j] = bits[j] ? 1 : 0;
    point_at_owned();
  }

  /// Borrows n entries at p (row t of a mask_matrix_view).
  template <detail::mask_element E>
  constexpr mask_view(const E* p, std::size_t n) noexcept : size_(n) {
    if constexpr (std::same_as<E, bool>) {
      data_.bools = p;
      kind_ = element::bools;
    } else if constexpr (std::same_as<E, char>) {
      data_.chars = p;
      kind_ = element::chars;
    } else if constexpr (std::same_as<E, signed char>) {
      data_.signed_chars = p;
      kind_ = element::signed_chars;
    } else {
      data_.bytes = p;
    }
  }

  constexpr mask_view(const mask_view& o)
      : data_(o.data_), size_(o.size_), kind_(o.kind_), owned_(o.owned_) {
    point_at_owned();
  }
  constexpr mask_view(mask_view&& o) noexcept : data_(o.data_), size_(o.size_), kind_(o.kind_) {
    take_owned(o);
  }
  constexpr mask_view& operator=(const mask_view& o) {
    if (this != &o) *this = mask_view(o);
    return *this;
  }
  constexpr mask_view& operator=(mask_view&& o) noexcept {
    if (this == &o) return *this;
    data_ = o.data_;
    size_ = o.size_;
    kind_ = o.kind_;
    take_owned(o);
    return *this;
  }

  /// The number of entries (0: no mask).
  [[nodiscard]] constexpr std::size_t size() const noexcept { return size_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return size_ == 0; }

  /// Whether note j is kept.
  [[nodiscard]] constexpr bool operator[](std::size_t j) const noexcept {
    switch (kind_) {
    case element::bools:
      return data_.bools[j];
    case element::chars:
      return data_.chars[j] != 0;
    case element::signed_chars:
      return data_.signed_chars[j] != 0;
    case element::bytes:
      break;
    }
    return data_.bytes[j] != 0;
  }

  /// Entries [first, first + count) as a view of their own (unchecked: within size()). A mask
  /// copied from a std::vector<bool> must outlive the subview.
  [[nodiscard]] constexpr mask_view subview(std::size_t first, std::size_t count) const noexcept {
    switch (kind_) {
    case element::bools:
      return mask_view(data_.bools + first, count);
    case element::chars:
      return mask_view(data_.chars + first, count);
    case element::signed_chars:
      return mask_view(data_.signed_chars + first, count);
    case element::bytes:
      break;
    }
    return mask_view(data_.bytes + first, count);
  }

  /// The entries as bytes, nonzero keeps (what the kernels read; not in constant expressions:
  /// detail::mask_bytes gives them there). Null when empty.
  [[nodiscard]] const detail::mask_byte* bytes() const noexcept {
    if (size_ == 0) return nullptr;
    switch (kind_) {  // the object representation of each, read as bytes
    case element::bools:
      return reinterpret_cast<const detail::mask_byte*>(data_.bools);
    case element::chars:
      return reinterpret_cast<const detail::mask_byte*>(data_.chars);
    case element::signed_chars:
      return reinterpret_cast<const detail::mask_byte*>(data_.signed_chars);
    case element::bytes:
      break;
    }
    return data_.bytes;
  }
};

/// T rows of n mask entries, row t for query t, rows `row_stride` entries apart (default n):
/// borrowed from the caller's bool, char, signed char or unsigned char entries. Empty: no mask.
class mask_matrix_view {
  mask_view first_{};  // the entries from row 0 on, as one borrowed run
  std::size_t rows_ = 0, cols_ = 0, stride_ = 0;

public:
  constexpr mask_matrix_view() noexcept = default;
  /// Borrows rows × cols entries at p, rows row_stride apart (≥ cols). Throws dimension_error
  /// when row_stride < cols, or when the rows span more entries than one array can hold
  /// ((rows − 1)·row_stride + cols beyond PTRDIFF_MAX bytes, which every such count that wraps
  /// std::size_t is).
  template <detail::mask_element E>
  constexpr mask_matrix_view(const E* p, std::size_t rows, std::size_t cols, std::size_t row_stride)
      : first_(p, spanned(rows, cols, row_stride, max_entries<E>)), rows_(rows), cols_(cols),
        stride_(row_stride) {
    if (row_stride < cols) throw_mask_stride(row_stride, cols);
  }
  /// Borrows rows × cols packed entries at p.
  template <detail::mask_element E>
  constexpr mask_matrix_view(const E* p, std::size_t rows, std::size_t cols)
      : mask_matrix_view(p, rows, cols, cols) {}
  /// Borrows r as rows × cols packed entries; throws dimension_error unless r has rows·cols.
  template <mask_range R>
  constexpr mask_matrix_view(const R& r, std::size_t rows, std::size_t cols)
      : mask_matrix_view(std::ranges::data(r), rows, cols, cols) {
    if (std::ranges::size(r) != rows * cols) throw_mask_size(std::ranges::size(r), rows, cols);
  }

  [[nodiscard]] constexpr std::size_t rows() const noexcept { return rows_; }
  [[nodiscard]] constexpr std::size_t cols() const noexcept { return cols_; }
  [[nodiscard]] constexpr std::size_t row_stride() const noexcept { return stride_; }
  [[nodiscard]] constexpr bool empty() const noexcept { return rows_ == 0; }
  /// Rows [first, first + count) (unchecked: within rows()).
  [[nodiscard]] constexpr mask_matrix_view subrows(std::size_t first, std::size_t count) const {
    mask_matrix_view m;
    m.first_ = first_.subview(first * stride_, count == 0 ? 0 : (count - 1) * stride_ + cols_);
    m.rows_ = count;
    m.cols_ = cols_;
    m.stride_ = stride_;
    return m;
  }
  /// Whether query t may attend to key j.
  [[nodiscard]] constexpr bool operator()(std::size_t t, std::size_t j) const noexcept {
    return first_[t * stride_ + j];
  }
  /// Row t's entries as bytes, nonzero keeps (not in constant expressions).
  [[nodiscard]] const detail::mask_byte* row_bytes(std::size_t t) const noexcept {
    return first_.bytes() + t * stride_;
  }

private:
  /// The most entries of type E one array can hold (its bytes must fit std::ptrdiff_t).
  template <class E>
  static constexpr std::size_t max_entries =
      static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) / sizeof(E);
  /// (rows − 1)·stride + cols, the entries from the first to the end of the last row (0 without
  /// rows), or dimension_error when that is more than `most` (MatrixView's check, for masks).
  static constexpr std::size_t spanned(std::size_t rows, std::size_t cols, std::size_t stride,
                                       std::size_t most) {
    if (rows == 0) return 0;
    if (cols > most || rows - 1 > (most - cols) / (stride == 0 ? 1 : stride))
      throw_mask_span(rows, cols, stride);
    return (rows - 1) * stride + cols;
  }
  [[noreturn]] static void throw_mask_span(std::size_t rows, std::size_t cols, std::size_t stride);
  [[noreturn]] static void throw_mask_stride(std::size_t stride, std::size_t cols);
  [[noreturn]] static void throw_mask_size(std::size_t size, std::size_t rows, std::size_t cols);
};

namespace detail {

/// A mask's bytes for the kernels: borrowed at run time; in constant evaluation (where no
/// pointer may be reinterpreted) a copy this object owns. Null for an empty mask.
class mask_bytes {
  heap_array<mask_byte> copy_{};
  const mask_byte* data_ = nullptr;

public:
  constexpr explicit mask_bytes(const mask_view& m) {
    if (m.empty()) return;
    if (std::is_constant_evaluated()) {
      copy_ = heap_array<mask_byte>(m.size());
      for (std::size_t j = 0; j < m.size(); ++j) copy_[j] = m[j] ? 1 : 0;
      data_ = copy_.data();
    } else {
      data_ = m.bytes();
    }
  }
  mask_bytes(const mask_bytes&) = delete;
  mask_bytes& operator=(const mask_bytes&) = delete;
  [[nodiscard]] constexpr const mask_byte* data() const noexcept { return data_; }
};

/// Where a mask's entries lie, as bytes (for the overlap checks; empty in constant evaluation,
/// where no pointer of another type can point into a buffer of numbers).
[[nodiscard]] constexpr region<mask_byte> region_of(const mask_view& m) noexcept {
  if (std::is_constant_evaluated() || m.empty()) return {};
  return {m.bytes(), 1, m.size(), m.size()};
}
/// Where a row mask's entries lie, as bytes (likewise).
[[nodiscard]] constexpr region<mask_byte> region_of(const mask_matrix_view& m) noexcept {
  if (std::is_constant_evaluated() || m.empty() || m.cols() == 0) return {};
  return {m.row_bytes(0), m.rows(), m.cols(), m.row_stride()};
}

}  // namespace detail
inline void mask_matrix_view::throw_mask_span(std::size_t rows, std::size_t cols,
                                              std::size_t stride) {
  attn::detail::raise<dimension_error>("attn::mask_matrix_view: rows " + std::to_string(rows) +
                                       ", row stride " + std::to_string(stride) + " and columns " +
                                       std::to_string(cols) +
                                       " span more entries than one array can hold");
}
inline void mask_matrix_view::throw_mask_stride(std::size_t stride, std::size_t cols) {
  attn::detail::raise<dimension_error>("attn::mask_matrix_view: row stride " +
                                       std::to_string(stride) + " is smaller than the row length " +
                                       std::to_string(cols));
}
inline void mask_matrix_view::throw_mask_size(std::size_t size, std::size_t rows,
                                              std::size_t cols) {
  detail::throw_dimension_error("attn::mask_matrix_view", "size of the entries", size,
                                "rows x columns", rows * cols);
}

}  // namespace attn
