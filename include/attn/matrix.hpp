#pragma once
/// \file attn/matrix.hpp
/// Row-major matrices: `MatrixView<T, R, C>` borrows a caller's buffer (pointer, rows,
/// columns, row stride); `Matrix<T, R, C>` owns its numbers (inline when R and C are fixed).
/// Row j of a notes matrix is the note h_j.

#include "attn/detail/config.hpp"  // first: says so if this is not C++20

#include <array>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "attn/allocator.hpp"
#include "attn/error.hpp"
#include "attn/extent.hpp"
#include "attn/vector.hpp"

namespace attn {

namespace detail {
/// The most numbers of type T one array can hold (its bytes must fit std::ptrdiff_t).
template <class T>
inline constexpr std::size_t max_numbers =
    static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) / sizeof(T);

[[noreturn]] inline void throw_too_many_numbers(const char* where, std::size_t rows,
                                                std::size_t cols) {
  raise<std::length_error>(std::string(where) + ": " + std::to_string(rows) + "x" +
                           std::to_string(cols) + " numbers are more than one array can hold");
}

/// dimension_error "<where>: <what> first to first + count (exclusive) are not within the
/// <total> <what>" (first + count past SIZE_MAX: "beyond SIZE_MAX"): subrows' and subcols'.
[[noreturn]] inline void throw_outside(const char* where, const char* what, std::size_t first,
                                       std::size_t count, std::size_t total) {
  raise<dimension_error>(std::string(where) + ": " + what + " " + std::to_string(first) + " to " +
                         (count > std::numeric_limits<std::size_t>::max() - first
                              ? std::string("beyond SIZE_MAX")
                              : std::to_string(first + count)) +
                         " (exclusive) are not within the " + std::to_string(total) + " " + what);
}

/// rows·cols, or std::length_error (as std::vector's own beyond its max_size) when that is more
/// than `most` numbers.
constexpr std::size_t checked_numbers(const char* where, std::size_t rows, std::size_t cols,
                                      std::size_t most) {
  if (cols != 0 && rows > most / cols) throw_too_many_numbers(where, rows, cols);
  return rows * cols;
}

/// A dense matrix of another library that says where its numbers lie — `data()`, `rows()`,
/// `cols()`, `outerStride()`, `innerStride()` and its storage order `IsRowMajor` (Eigen's
/// Matrix, Map, Block and Ref; attn detects the members and includes nothing). One that is a
/// vector at compile time (`IsVectorAtCompileTime`) is a vector_like instead.
template <class M>
concept strided_dense_matrix =
    requires(const M& m) {
      requires std::is_pointer_v<decltype(m.data())>;
      requires real<std::remove_cv_t<std::remove_pointer_t<decltype(m.data())>>>;
      { m.rows() } -> std::convertible_to<std::ptrdiff_t>;
      { m.cols() } -> std::convertible_to<std::ptrdiff_t>;
      { m.outerStride() } -> std::convertible_to<std::ptrdiff_t>;
      { m.innerStride() } -> std::convertible_to<std::ptrdiff_t>;
      M::IsRowMajor;
      M::InnerStrideAtCompileTime;
      M::IsVectorAtCompileTime;
    } && !static_cast<bool>(M::IsVectorAtCompileTime);

/// The element type a strided_dense_matrix gives through `data()` (const when it is read-only).
template <class M>
using dense_element_t = std::remove_pointer_t<decltype(std::declval<M&>().data())>;

/// Whether a strided_dense_matrix's rows lie contiguous, each at data() + i·outerStride() (a
/// MatrixView of it needs no copy), as far as its type says.
template <class M>
inline constexpr bool dense_rows_contiguous =
    static_cast<bool>(std::remove_cvref_t<M>::IsRowMajor) &&
    static_cast<int>(std::remove_cvref_t<M>::InnerStrideAtCompileTime) == 1;
}  // namespace detail

/// A borrowed row-major R×C matrix: element (i, j) is `data[i * row_stride + j]`.
/// `T` may be const. Fixed R or C are checked against the run-time sizes on construction.
template <class T, std::size_t R = dynamic, std::size_t C = dynamic>
class MatrixView {
  static_assert(real<std::remove_const_t<T>>,
                "attn::MatrixView holds float, double or long double");
  T* data_ = nullptr;
  std::size_t rows_ = R == dynamic ? 0 : R;
  std::size_t cols_ = C == dynamic ? 0 : C;
  std::size_t stride_ = C == dynamic ? 0 : C;

  template <class, std::size_t, std::size_t>
  friend class Matrix;
  struct packed_by_construction {};
  /// Matrix's own packed buffer, whose shape holds by construction: not checked again (on a
  /// small fixed attend the checks would be most of the call).
  constexpr MatrixView(T* data, std::size_t rows, std::size_t cols, packed_by_construction) noexcept
      : data_(data), rows_(rows), cols_(cols), stride_(cols) {}

  constexpr void validate() const {
    if constexpr (R != dynamic)
      detail::check_equal("attn::MatrixView", "rows", rows_, "fixed rows", R);
    if constexpr (C != dynamic)
      detail::check_equal("attn::MatrixView", "columns", cols_, "fixed columns", C);
    if (stride_ < cols_)
      detail::raise<dimension_error>("attn::MatrixView: row stride " + std::to_string(stride_) +
                                     " is smaller than the row length " + std::to_string(cols_));
    if (data_ == nullptr && rows_ != 0 && cols_ != 0)
      detail::raise<dimension_error>("attn::MatrixView: null data for a " + std::to_string(rows_) +
                                     "x" + std::to_string(cols_) + " matrix");
    // the last row ends (rows − 1)·stride + cols numbers in: that must not wrap std::size_t,
    // nor pass the most numbers one array can hold (a null view is packed: it spans nothing)
    if (data_ != nullptr && rows_ != 0 &&
        (rows_ - 1 > (detail::max_numbers<value_type> - cols_) / (stride_ == 0 ? 1 : stride_)))
      detail::raise<dimension_error>("attn::MatrixView: rows " + std::to_string(rows_) +
                                     ", row stride " + std::to_string(stride_) + " and columns " +
                                     std::to_string(cols_) +
                                     " span more numbers than one array can hold");
  }

public:
  using value_type = std::remove_const_t<T>;
  using element_type = T;
  /// Rows fixed at compile time, or `dynamic`.
  static constexpr std::size_t rows_extent = R;
  /// Columns fixed at compile time, or `dynamic`.
  static constexpr std::size_t cols_extent = C;

  /// An empty view (fixed extents: a view of nothing; call sites must not read it).
  constexpr MatrixView() noexcept = default;

  /// Views `rows × cols` numbers at `data`, rows `row_stride` apart (default: packed).
  /// Throws dimension_error if a fixed extent disagrees, `row_stride < cols`, or `data`
  /// is null for a non-empty matrix (a null view of 0 rows or 0 columns is packed).
  constexpr MatrixView(T* data, std::size_t rows, std::size_t cols, std::size_t row_stride)
      : data_(data), rows_(rows), cols_(cols), stride_(row_stride) {
    validate();
    // A null view has 0 rows or 0 columns; its rows must not step a null pointer (UB) by a stride.
    if (data_ == nullptr) stride_ = cols_;
  }
  /// Views a packed `rows × cols` buffer.
  constexpr MatrixView(T* data, std::size_t rows, std::size_t cols)
      : MatrixView(data, rows, cols, cols) {}
  /// Views a packed buffer whose extents are both fixed.
  constexpr explicit MatrixView(T* data) requires(R != dynamic && C != dynamic)
      : MatrixView(data, R, C, C) {}

  /// A view with fewer fixed extents, or of const elements, from a compatible view.
  template <class U, std::size_t R2, std::size_t C2>
    requires(std::is_convertible_v<U (*)[], T (*)[]> && (R == dynamic || R == R2) &&
             (C == dynamic || C == C2) && !(std::is_same_v<U, T> && R == R2 && C == C2))
  constexpr MatrixView(const MatrixView<U, R2, C2>& other) noexcept  // NOLINT: implicit widening
      : data_(other.data()), rows_(other.rows()), cols_(other.cols()), stride_(other.row_stride()) {
  }

  /// Borrows a row-major strided_dense_matrix (Eigen's `Matrix<T, Dynamic, Dynamic, RowMajor>`,
  /// a Map or Block of one), rows `outerStride()` apart: no copy. A column-major one (Eigen's
  /// default) has no rows to borrow and does not compile: read as rows it would be its transpose.
  template <class M>
    requires(detail::strided_dense_matrix<std::remove_cvref_t<M>> &&
             std::is_convertible_v<detail::dense_element_t<std::remove_reference_t<M>> (*)[],
                                   T (*)[]>)
  constexpr MatrixView(M&& m)  // NOLINT: implicit, as a span from a container
      : MatrixView(m.data(), static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols()),
                   static_cast<std::size_t>(m.outerStride())) {
    static_assert(detail::dense_rows_contiguous<M>,
                  "attn::MatrixView: this matrix is column-major (Eigen's default) or its "
                  "columns are not adjacent, so it has no rows to borrow (read as rows it would "
                  "be its transpose). Use a row-major matrix (Eigen::Matrix<T, Eigen::Dynamic, "
                  "Eigen::Dynamic, Eigen::RowMajor>) for an output; pass an input to attn as it "
                  "is (it is read correctly), or give a weight as a StridedMatrixView.");
  }

  [[nodiscard]] constexpr std::size_t rows() const noexcept {
    if constexpr (R == dynamic)
      return rows_;
    else
      return R;
  }
  [[nodiscard]] constexpr std::size_t cols() const noexcept {
    if constexpr (C == dynamic)
      return cols_;
    else
      return C;
  }
  /// Distance between the starts of consecutive rows, in elements.
  [[nodiscard]] constexpr std::size_t row_stride() const noexcept { return stride_; }
  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  /// Row i as a span of C numbers.
  [[nodiscard]] constexpr std::span<T, C> row(std::size_t i) const noexcept {
    return std::span<T, C>(data_ + i * stride_, cols());
  }
  [[nodiscard]] constexpr T& operator()(std::size_t i, std::size_t j) const noexcept {
    return data_[i * stride_ + j];
  }
  /// Rows [first, first + count) as a view with the same columns and row stride, borrowing
  /// the same numbers (as std::span::subspan; Eigen's middleRows): a chunk of notes, for
  /// example, to read on a thread of its own with `attend_partial`. Throws dimension_error,
  /// naming the rows, when they do not all lie within this view's.
  [[nodiscard]] constexpr MatrixView<T, dynamic, C> subrows(std::size_t first,
                                                            std::size_t count) const {
    if (first > rows() || count > rows() - first)
      detail::throw_outside("attn::MatrixView::subrows", "rows", first, count, rows());
    // no rows: the view starts at data() (first · stride may point past the buffer's end,
    // whose last row needs only cols() numbers)
    return MatrixView<T, dynamic, C>(count == 0 ? data_ : data_ + first * stride_, count, cols(),
                                     stride_);
  }

  /// Columns [first, first + count) as a view of the same numbers, with this view's row stride
  /// (Eigen's middleCols): head i of Q, K or V is `subcols(i·d_k, d_k)` (docs/heads.md). Throws
  /// dimension_error, naming the columns, when they do not all lie within this view's.
  [[nodiscard]] constexpr MatrixView<T, R, dynamic> subcols(std::size_t first,
                                                            std::size_t count) const {
    if (first > cols() || count > cols() - first)
      detail::throw_outside("attn::MatrixView::subcols", "columns", first, count, cols());
    return MatrixView<T, R, dynamic>(rows() == 0 ? data_ : data_ + first, rows(), count, stride_);
  }
};

template <class T, std::size_t R, std::size_t C>
class Matrix;

/// A borrowed R×C matrix of any layout: element (i, j) is `data[i * row_stride + j * col_stride]`
/// — a row-major one (column stride 1: from a MatrixView), a column-major one (row stride 1,
/// column stride its leading dimension: `column_major`), or the transpose of a row-major one
/// (`transposed`: PyTorch's out × in weight as attn's in × out). As notes, keys, values or
/// queries it is an input only, read through a row-major copy made when the call starts
/// (docs/types-and-views.md, "Other layouts"), so those fast paths stay row-major; as a weight of
/// multi_head_parameters, or its gradient, it is read or written where it lies, rows or columns
/// (docs/heads.md). `T` may be const.
template <class T, std::size_t R = dynamic, std::size_t C = dynamic>
class StridedMatrixView {
  static_assert(real<std::remove_const_t<T>>,
                "attn::StridedMatrixView holds float, double or long double");
  T* data_ = nullptr;
  std::size_t rows_ = R == dynamic ? 0 : R;
  std::size_t cols_ = C == dynamic ? 0 : C;
  std::size_t row_stride_ = 0;
  std::size_t col_stride_ = 0;

public:
  using value_type = std::remove_const_t<T>;
  using element_type = T;
  static constexpr std::size_t rows_extent = R;
  static constexpr std::size_t cols_extent = C;

  /// An empty view.
  constexpr StridedMatrixView() noexcept = default;
  /// Views row-major numbers as MatrixView(data, rows, cols[, row_stride]) does (column stride
  /// 1), with its checks.
  constexpr StridedMatrixView(T* data, std::size_t rows, std::size_t cols, std::size_t row_stride)
      : StridedMatrixView(MatrixView<T, R, C>(data, rows, cols, row_stride)) {}
  constexpr StridedMatrixView(T* data, std::size_t rows, std::size_t cols)
      : StridedMatrixView(MatrixView<T, R, C>(data, rows, cols)) {}
  /// Views `rows × cols` numbers at `data`, element (i, j) at data[i·row_stride + j·col_stride].
  /// Throws dimension_error if a fixed extent disagrees or `data` is null for a non-empty matrix.
  constexpr StridedMatrixView(T* data, std::size_t rows, std::size_t cols, std::size_t row_stride,
                              std::size_t col_stride)
      : data_(data), rows_(rows), cols_(cols), row_stride_(row_stride), col_stride_(col_stride) {
    if constexpr (R != dynamic)
      detail::check_equal("attn::StridedMatrixView", "rows", rows_, "fixed rows", R);
    if constexpr (C != dynamic)
      detail::check_equal("attn::StridedMatrixView", "columns", cols_, "fixed columns", C);
    if (data_ == nullptr && rows_ != 0 && cols_ != 0)
      detail::raise<dimension_error>("attn::StridedMatrixView: null data for a " +
                                     std::to_string(rows_) + "x" + std::to_string(cols_) +
                                     " matrix");
  }
  /// A view of const elements, or of fewer fixed extents, from a compatible one.
  template <class U, std::size_t R2, std::size_t C2>
    requires(std::is_convertible_v<U (*)[], T (*)[]> && (R == dynamic || R == R2) &&
             (C == dynamic || C == C2) && !(std::is_same_v<U, T> && R == R2 && C == C2))
  constexpr StridedMatrixView(const StridedMatrixView<U, R2, C2>& other) noexcept  // NOLINT
      : data_(other.data()), rows_(other.rows()), cols_(other.cols()),
        row_stride_(other.row_stride()), col_stride_(other.col_stride()) {}
  /// A row-major view's numbers as they are (column stride 1): no copy.
  template <class U, std::size_t R2, std::size_t C2>
    requires(std::is_convertible_v<U (*)[], T (*)[]> && (R == dynamic || R == R2) &&
             (C == dynamic || C == C2))
  constexpr StridedMatrixView(const MatrixView<U, R2, C2>& m) noexcept  // NOLINT: implicit
      : data_(m.data()), rows_(m.rows()), cols_(m.cols()), row_stride_(m.row_stride()),
        col_stride_(1) {}
  /// An owned Matrix's numbers (row-major), as MatrixView's conversion from it.
  template <class U, std::size_t R2, std::size_t C2>
    requires(std::is_convertible_v<U (*)[], T (*)[]> && (R == dynamic || R == R2) &&
             (C == dynamic || C == C2))
  constexpr StridedMatrixView(Matrix<U, R2, C2>& m) noexcept  // NOLINT: implicit
      : StridedMatrixView(m.view()) {}
  template <class U, std::size_t R2, std::size_t C2>
    requires(std::is_convertible_v<const U (*)[], T (*)[]> && (R == dynamic || R == R2) &&
             (C == dynamic || C == C2))
  constexpr StridedMatrixView(const Matrix<U, R2, C2>& m) noexcept  // NOLINT: implicit
      : StridedMatrixView(m.view()) {}
  /// A strided_dense_matrix of either storage order (Eigen's Matrix, Map, Block), as it lies: a
  /// column-major one with row stride innerStride() and column stride outerStride(). No copy.
  template <class M>
    requires(R == dynamic && C == dynamic && detail::strided_dense_matrix<std::remove_cvref_t<M>> &&
             std::is_convertible_v<detail::dense_element_t<std::remove_reference_t<M>> (*)[],
                                   T (*)[]>)
  constexpr StridedMatrixView(M&& m)  // NOLINT: implicit, as a span from a container
      : StridedMatrixView(
            m.data(), static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols()),
            static_cast<std::size_t>(std::remove_cvref_t<M>::IsRowMajor ? m.outerStride()
                                                                        : m.innerStride()),
            static_cast<std::size_t>(std::remove_cvref_t<M>::IsRowMajor ? m.innerStride()
                                                                        : m.outerStride())) {}

  [[nodiscard]] constexpr std::size_t rows() const noexcept { return rows_; }
  [[nodiscard]] constexpr std::size_t cols() const noexcept { return cols_; }
  /// Distance between elements (i, j) and (i + 1, j), in elements.
  [[nodiscard]] constexpr std::size_t row_stride() const noexcept { return row_stride_; }
  /// Distance between elements (i, j) and (i, j + 1), in elements.
  [[nodiscard]] constexpr std::size_t col_stride() const noexcept { return col_stride_; }
  [[nodiscard]] constexpr T* data() const noexcept { return data_; }
  [[nodiscard]] constexpr T& operator()(std::size_t i, std::size_t j) const noexcept {
    return data_[i * row_stride_ + j * col_stride_];
  }
};

/// Views a column-major `rows × cols` matrix (element (i, j) at data[i + j·leading_dim]: Eigen's
/// and BLAS's default layout) — for notes, row j of an n × d column-major matrix is note j.
/// Throws dimension_error when leading_dim < rows (columns would overlap).
template <std::size_t R = dynamic, std::size_t C = dynamic, class T>
[[nodiscard]] constexpr StridedMatrixView<T, R, C>
column_major(T* data, std::size_t rows, std::size_t cols, std::size_t leading_dim) {
  if (leading_dim < rows)
    detail::raise<dimension_error>("attn::column_major: leading dimension " +
                                   std::to_string(leading_dim) +
                                   " is smaller than the column length " + std::to_string(rows));
  return StridedMatrixView<T, R, C>(data, rows, cols, 1, leading_dim);
}
/// Views a packed column-major `rows × cols` matrix (leading dimension `rows`).
template <std::size_t R = dynamic, std::size_t C = dynamic, class T>
[[nodiscard]] constexpr StridedMatrixView<T, R, C> column_major(T* data, std::size_t rows,
                                                                std::size_t cols) {
  return column_major<R, C>(data, rows, cols, rows);
}

/// The transpose of a row-major view, without a copy: element (i, j) is m(j, i).
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr StridedMatrixView<T, C, R> transposed(const MatrixView<T, R, C>& m) {
  return StridedMatrixView<T, C, R>(m.data(), m.cols(), m.rows(), 1, m.row_stride());
}
/// The transpose of a strided view, without a copy (its strides swapped): element (i, j) is
/// m(j, i) — `transposed(column_major(p, d_out, d_in))` is a column-major PyTorch weight as
/// attn's d_in × d_out.
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr StridedMatrixView<T, C, R> transposed(const StridedMatrixView<T, R, C>& m) {
  return StridedMatrixView<T, C, R>(m.data(), m.cols(), m.rows(), m.col_stride(), m.row_stride());
}

/// An owned row-major R×C matrix: `std::array` storage when both extents are fixed
/// (no allocation), otherwise a `std::vector` aligned to `storage_alignment` (64 bytes: rows of
/// 16 floats or 8 doubles, or a multiple, each start on a cache line). Converts to `MatrixView`.
template <class T, std::size_t R = dynamic, std::size_t C = dynamic>
class Matrix {
  static_assert(real<T>, "attn::Matrix holds float, double or long double");
  static constexpr bool fixed = R != dynamic && C != dynamic;
  static_assert(!fixed || C == 0 || (R <= detail::max_numbers<T> / C &&
                                     detail::fits_stack(R * C, sizeof(T))),
                "attn::Matrix: fixed sizes this large do not fit on the stack "
                "(ATTN_STACK_ALLOCATION_LIMIT, 128 KiB by default): use attn::dynamic");
  using storage_type = std::conditional_t<fixed, std::array<T, fixed ? R * C : 1>,
                                          std::vector<T, aligned_allocator<T>>>;
  storage_type data_{};
  std::size_t rows_ = R == dynamic ? 0 : R;
  std::size_t cols_ = C == dynamic ? 0 : C;

public:
  using value_type = T;
  static constexpr std::size_t rows_extent = R;
  static constexpr std::size_t cols_extent = C;

  /// Fixed: R×C zeros. Otherwise: an empty matrix.
  constexpr Matrix() = default;

  /// `rows × cols` copies of `value`; a fixed extent that disagrees throws dimension_error, and
  /// a rows·cols beyond what one array can hold throws std::length_error (as std::vector does
  /// for a size beyond its max_size).
  constexpr Matrix(std::size_t rows, std::size_t cols, T value = T(0)) requires(!fixed)
      : rows_(rows), cols_(cols) {
    if constexpr (R != dynamic) detail::check_equal("attn::Matrix", "rows", rows, "fixed rows", R);
    if constexpr (C != dynamic)
      detail::check_equal("attn::Matrix", "columns", cols, "fixed columns", C);
    data_.assign(detail::checked_numbers("attn::Matrix", rows, cols, detail::max_numbers<T>),
                 value);
  }

  /// Row by row: `Matrix<double, 3, 3>{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}`. Rows of unequal
  /// length, or a shape that disagrees with a fixed extent, throw dimension_error.
  constexpr Matrix(std::initializer_list<std::initializer_list<T>> rows) {
    const std::size_t r = rows.size();
    const std::size_t c = r == 0 ? 0 : rows.begin()->size();
    if constexpr (R != dynamic) detail::check_equal("attn::Matrix", "rows", r, "fixed rows", R);
    if constexpr (C != dynamic)
      detail::check_equal("attn::Matrix", "columns", c, "fixed columns", C);
    for (const auto& row : rows)
      detail::check_equal("attn::Matrix", "row length", row.size(), "first row length", c);
    rows_ = r;
    cols_ = c;
    if constexpr (!fixed) data_.resize(r * c);
    std::size_t k = 0;
    for (const auto& row : rows)
      for (const T& x : row) data_[k++] = x;
  }

  /// Copies any view of compatible extents.
  template <class U, std::size_t R2, std::size_t C2>
    requires compatible_extents<R, R2> && compatible_extents<C, C2>
  constexpr explicit Matrix(const MatrixView<U, R2, C2>& v) {
    if constexpr (R != dynamic)
      detail::check_equal("attn::Matrix", "rows", v.rows(), "fixed rows", R);
    if constexpr (C != dynamic)
      detail::check_equal("attn::Matrix", "columns", v.cols(), "fixed columns", C);
    if (v.data() == nullptr && v.rows() != 0 && v.cols() != 0)  // a default view of fixed extents
      detail::raise<dimension_error>("attn::Matrix: null data for a " + std::to_string(v.rows()) +
                                     "x" + std::to_string(v.cols()) + " matrix");
    if constexpr (!fixed)
      data_.resize(detail::checked_numbers("attn::Matrix", v.rows(), v.cols(), detail::max_numbers<T>));
    rows_ = v.rows();
    cols_ = v.cols();
    for (std::size_t i = 0; i < rows_; ++i)
      for (std::size_t j = 0; j < cols_; ++j) data_[i * cols_ + j] = static_cast<T>(v(i, j));
  }

  /// Copies a strided view of compatible extents, row-major.
  template <class U, std::size_t R2, std::size_t C2>
    requires compatible_extents<R, R2> && compatible_extents<C, C2>
  constexpr explicit Matrix(const StridedMatrixView<U, R2, C2>& v) {
    if constexpr (R != dynamic)
      detail::check_equal("attn::Matrix", "rows", v.rows(), "fixed rows", R);
    if constexpr (C != dynamic)
      detail::check_equal("attn::Matrix", "columns", v.cols(), "fixed columns", C);
    rows_ = v.rows();
    cols_ = v.cols();
    if constexpr (!fixed) data_.resize(rows_ * cols_);
    for (std::size_t i = 0; i < rows_; ++i)
      for (std::size_t j = 0; j < cols_; ++j) data_[i * cols_ + j] = static_cast<T>(v(i, j));
  }

  [[nodiscard]] constexpr std::size_t rows() const noexcept {
    if constexpr (R == dynamic)
      return rows_;
    else
      return R;
  }
  [[nodiscard]] constexpr std::size_t cols() const noexcept {
    if constexpr (C == dynamic)
      return cols_;
    else
      return C;
  }
  [[nodiscard]] constexpr std::size_t size() const noexcept { return rows() * cols(); }
  [[nodiscard]] constexpr T* data() noexcept { return data_.data(); }
  [[nodiscard]] constexpr const T* data() const noexcept { return data_.data(); }
  [[nodiscard]] constexpr T& operator()(std::size_t i, std::size_t j) noexcept {
    return data_[i * cols() + j];
  }
  [[nodiscard]] constexpr const T& operator()(std::size_t i, std::size_t j) const noexcept {
    return data_[i * cols() + j];
  }
  /// Row i as a span of C numbers.
  [[nodiscard]] constexpr std::span<T, C> row(std::size_t i) noexcept {
    return std::span<T, C>(data() + i * cols(), cols());
  }
  [[nodiscard]] constexpr std::span<const T, C> row(std::size_t i) const noexcept {
    return std::span<const T, C>(data() + i * cols(), cols());
  }

  /// Rows [first, first + count) as a view (MatrixView::subrows; dimension_error outside).
  [[nodiscard]] constexpr MatrixView<T, dynamic, C> subrows(std::size_t first, std::size_t count) {
    return view().subrows(first, count);
  }
  /// Columns [first, first + count) as a view (MatrixView::subcols; dimension_error outside).
  [[nodiscard]] constexpr MatrixView<T, R, dynamic> subcols(std::size_t first, std::size_t count) {
    return view().subcols(first, count);
  }
  [[nodiscard]] constexpr MatrixView<const T, R, dynamic> subcols(std::size_t first,
                                                                  std::size_t count) const {
    return view().subcols(first, count);
  }
  [[nodiscard]] constexpr MatrixView<const T, dynamic, C> subrows(std::size_t first,
                                                                  std::size_t count) const {
    return view().subrows(first, count);
  }
  /// Borrows the matrix (packed rows).
  [[nodiscard]] constexpr MatrixView<T, R, C> view() noexcept {
    return MatrixView<T, R, C>(data(), rows(), cols(),
                               typename MatrixView<T, R, C>::packed_by_construction{});
  }
  [[nodiscard]] constexpr MatrixView<const T, R, C> view() const noexcept {
    return MatrixView<const T, R, C>(data(), rows(), cols(),
                                     typename MatrixView<const T, R, C>::packed_by_construction{});
  }
  constexpr operator MatrixView<T, R, C>() noexcept { return view(); }
  constexpr operator MatrixView<const T, R, C>() const noexcept { return view(); }

  /// Element-wise equality (shapes must match too).
  [[nodiscard]] friend constexpr bool operator==(const Matrix& a, const Matrix& b) noexcept {
    if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!(a.data_[i] == b.data_[i])) return false;
    return true;
  }
};

namespace detail {
/// The numbers of a matrix view.
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr region<std::remove_const_t<T>> region_of(MatrixView<T, R, C> m) noexcept {
  return {m.data(), m.rows(), m.cols(), m.row_stride()};
}

/// Whether a strided view's rows lie as rows (column stride 1, or at most one column): the form
/// the products read; otherwise its columns do (row stride 1, or one row) or neither does.
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr bool rows_contiguous(const StridedMatrixView<T, R, C>& m) noexcept {
  return m.col_stride() == 1 || m.cols() <= 1;
}
/// Whether a strided view's columns lie as rows (a column-major matrix, the transpose of a
/// row-major one: PyTorch's out × in weight seen as attn's in × out) and its rows do not.
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr bool columns_contiguous(const StridedMatrixView<T, R, C>& m) noexcept {
  return !rows_contiguous(m) && (m.row_stride() == 1 || m.rows() <= 1);
}

/// The numbers of a strided view: its rows, or its columns as rows (columns_contiguous), or for
/// any other layout every number from its first to its last, as one row (a superset).
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr region<std::remove_const_t<T>>
region_of(const StridedMatrixView<T, R, C>& m) noexcept {
  if (m.rows() == 0 || m.cols() == 0) return {m.data(), 0, 0, 0};
  if (rows_contiguous(m)) return {m.data(), m.rows(), m.cols(), m.row_stride()};
  if (columns_contiguous(m)) return {m.data(), m.cols(), m.rows(), m.col_stride()};
  const std::size_t span = (m.rows() - 1) * m.row_stride() + (m.cols() - 1) * m.col_stride() + 1;
  return {m.data(), 1, span, span};
}

/// A zero r × c Matrix (fixed extents: inline, no allocation).
template <class T, std::size_t R, std::size_t C>
[[nodiscard]] constexpr Matrix<T, R, C> zero_matrix(std::size_t r, std::size_t c) {
  if constexpr (R == dynamic || C == dynamic)
    return Matrix<T, R, C>(r, c);
  else
    return Matrix<T, R, C>{};
}

template <class M>
struct matrix_traits {
  static constexpr bool is_matrix = false;
};
template <class T, std::size_t R, std::size_t C>
struct matrix_traits<MatrixView<T, R, C>> {
  static constexpr bool is_matrix = true;
  static constexpr bool is_view = true;  ///< borrows its numbers
  using scalar = std::remove_const_t<T>;
  static constexpr bool writable = !std::is_const_v<T>;
  static constexpr std::size_t rows = R, cols = C;
};
template <class T, std::size_t R, std::size_t C>
struct matrix_traits<StridedMatrixView<T, R, C>> {
  static constexpr bool is_matrix = true;
  static constexpr bool is_view = true;
  using scalar = std::remove_const_t<T>;
  static constexpr bool writable = false;  // an input only
  static constexpr std::size_t rows = R, cols = C;
};
/// A strided_dense_matrix (Eigen's): dynamic extents; written through when its data() is not
/// const (a row-major one only: as_mutable_view refuses the others at compile time).
template <strided_dense_matrix M>
struct matrix_traits<M> {
  static constexpr bool is_matrix = true;
  static constexpr bool is_view = false;
  using scalar = std::remove_const_t<dense_element_t<M>>;
  static constexpr bool writable = !std::is_const_v<dense_element_t<M>>;
  static constexpr std::size_t rows = dynamic, cols = dynamic;
};
template <class T, std::size_t R, std::size_t C>
struct matrix_traits<Matrix<T, R, C>> {
  static constexpr bool is_matrix = true;
  static constexpr bool is_view = false;
  using scalar = T;
  static constexpr bool writable = true;
  static constexpr std::size_t rows = R, cols = C;
};

/// A strided view's numbers copied row-major, what as_view gives for it: reads as a MatrixView
/// (rows, cols, row, operator(), data) and converts to one, which borrows this copy (so it must
/// outlive the view: a named variable, or a temporary within one full expression).
template <class T, std::size_t R, std::size_t C>
class row_major_copy {
  Matrix<T, R, C> m_;

public:
  template <class U>
  constexpr explicit row_major_copy(const StridedMatrixView<U, R, C>& v) : m_(v) {}
  [[nodiscard]] constexpr MatrixView<const T, R, C> view() const noexcept { return m_.view(); }
  [[nodiscard]] constexpr std::size_t rows() const noexcept { return m_.rows(); }
  [[nodiscard]] constexpr std::size_t cols() const noexcept { return m_.cols(); }
  [[nodiscard]] constexpr std::size_t row_stride() const noexcept { return m_.cols(); }
  [[nodiscard]] constexpr const T* data() const noexcept { return m_.data(); }
  [[nodiscard]] constexpr std::span<const T, C> row(std::size_t i) const noexcept {
    return m_.row(i);
  }
  [[nodiscard]] constexpr const T& operator()(std::size_t i, std::size_t j) const noexcept {
    return m_(i, j);
  }
  /// The copy as a view of fewer fixed extents.
  template <std::size_t R2, std::size_t C2>
    requires((R2 == dynamic || R2 == R) && (C2 == dynamic || C2 == C))
  constexpr operator MatrixView<const T, R2, C2>() const noexcept {  // NOLINT: implicit
    return MatrixView<const T, R2, C2>(m_.view());
  }
};

/// Whether as_view reads M through a row-major copy: a StridedMatrixView, or a
/// strided_dense_matrix whose rows are not contiguous (column-major).
template <class M>
inline constexpr bool is_strided = false;
template <class T, std::size_t R, std::size_t C>
inline constexpr bool is_strided<StridedMatrixView<T, R, C>> = true;
template <strided_dense_matrix M>
inline constexpr bool is_strided<M> = !dense_rows_contiguous<M>;

/// Any matrix_like as a StridedMatrixView of its numbers where they lie (no copy): a weight in
/// whatever layout it has.
template <class M>
[[nodiscard]] constexpr auto strided_of(const M& m) {
  using U = const typename matrix_traits<M>::scalar;
  constexpr std::size_t R = matrix_traits<M>::rows, C = matrix_traits<M>::cols;
  if constexpr (strided_dense_matrix<M> || is_strided<M>)
    return StridedMatrixView<U, R, C>(m);
  else
    return StridedMatrixView<U, R, C>(MatrixView<U, R, C>(m));
}

/// Resizes m to r × c unless it has that shape (a Matrix of the same shape is reused: a cache
/// sized by its first call allocates nothing after it).
template <class T>
constexpr void ensure_shape(Matrix<T>& m, std::size_t r, std::size_t c) {
  if (m.rows() != r || m.cols() != c) m = Matrix<T>(r, c);
}

}  // namespace detail

/// `Matrix`, `MatrixView`, `StridedMatrixView` or a strided_dense_matrix (Eigen's Matrix, Map,
/// Block of either storage order): what every attn algorithm takes as a matrix (notes, W,
/// queries; a StridedMatrixView and a column-major one only as an input).
template <class M>
concept matrix_like = detail::matrix_traits<std::remove_cvref_t<M>>::is_matrix;

/// The scalar type of a matrix_like.
template <matrix_like M>
using matrix_scalar_of = typename detail::matrix_traits<std::remove_cvref_t<M>>::scalar;
/// Rows fixed at compile time, or `dynamic`.
template <matrix_like M>
inline constexpr std::size_t rows_of = detail::matrix_traits<std::remove_cvref_t<M>>::rows;
/// Columns fixed at compile time, or `dynamic`.
template <matrix_like M>
inline constexpr std::size_t cols_of = detail::matrix_traits<std::remove_cvref_t<M>>::cols;

/// A matrix_like whose elements may be written through it: a non-const `Matrix&`, or a
/// `MatrixView` of non-const elements, const or not (a view's constness is its own, as
/// std::span's: a `const MatrixView<T>` still writes T).
template <class M>
concept mutable_matrix_like = matrix_like<M> &&
    detail::matrix_traits<std::remove_cvref_t<M>>::writable &&
    (detail::matrix_traits<std::remove_cvref_t<M>>::is_view ||
     !std::is_const_v<std::remove_reference_t<M>>);

/// Borrows a matrix_like read-only, keeping its fixed extents. A StridedMatrixView, or a
/// column-major strided_dense_matrix, gives its numbers copied row-major instead
/// (detail::row_major_copy, which reads as a MatrixView): the same matrix, never its transpose.
template <matrix_like M>
[[nodiscard]] constexpr auto as_view(const M& m) noexcept(
    !detail::is_strided<M> && !detail::strided_dense_matrix<M>) {
  using T = matrix_scalar_of<M>;
  if constexpr (detail::is_strided<M>)
    return detail::row_major_copy<T, rows_of<M>, cols_of<M>>(detail::strided_of(m));
  else
    return MatrixView<const T, rows_of<M>, cols_of<M>>(m);
}
/// Borrows a mutable_matrix_like for writing, keeping its fixed extents. A column-major
/// strided_dense_matrix does not compile (MatrixView's static_assert: use a row-major one).
template <mutable_matrix_like M>
[[nodiscard]] constexpr auto as_mutable_view(M&& m) noexcept(!detail::strided_dense_matrix<
                                                             std::remove_cvref_t<M>>) {
  using T = matrix_scalar_of<M>;
  return MatrixView<T, rows_of<M>, cols_of<M>>(m);
}

}  // namespace attn
