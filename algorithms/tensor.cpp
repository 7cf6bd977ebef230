// N-dimensional views (tandem/tensor.hpp): the view arithmetic, and contiguous() as device copies
// through the matrix ops, one launch per 2-D piece of the view.
#include "tandem/tensor.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "tandem/detail/checked.hpp"
#include "tandem/errors.hpp"

namespace tandem {

namespace {

using Dims = std::vector<std::int64_t>;

std::string text(const Dims& d) {
  std::string s = "(";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + (d.size() == 1 ? ",)" : ")");
}

// Saturating at INT64_MAX: a shape too large for its strides holds no element (a zero extent) or
// is refused by check() for its size.
Dims compact_strides(const Dims& shape) {
  Dims s(shape.size());
  std::int64_t step = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    s[i] = step;
    if (!detail::mul_fits(step, std::max<std::int64_t>(shape[i], 1), step)) step = INT64_MAX;
  }
  return s;
}

// Elements from the first to the last the view reaches (0 when it holds none); false on overflow.
bool span_of(const Dims& shape, const Dims& strides, std::int64_t& span) {
  span = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0) {
      span = 0;
      return true;
    }
  }
  for (std::size_t i = 0; i < shape.size(); ++i) {
    std::int64_t reach = 0;
    if (!detail::mul_fits(shape[i] - 1, strides[i], reach) || !detail::add_fits(span, reach, span)) return false;
  }
  return true;
}

std::size_t axis_of(int axis, std::size_t rank, const char* what) {
  const std::int64_t r = static_cast<std::int64_t>(rank);
  const std::int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r) {
    throw InvalidArgument(std::string(what) + ": axis " + std::to_string(axis) + " is outside a tensor of rank " +
                          std::to_string(rank));
  }
  return static_cast<std::size_t>(a);
}

// A view of t with new shape and strides starting `offset` elements into t's buffer.
Tensor view_of(const Tensor& t, std::int64_t offset, Dims shape, Dims strides) {
  std::int64_t span = 0;
  if (!span_of(shape, strides, span)) throw ShapeMismatch("Tensor: the view's extent does not fit in 64 bits");
  const std::size_t off = span == 0 ? std::min<std::size_t>(static_cast<std::size_t>(offset), t.buffer.size())
                                    : static_cast<std::size_t>(offset);
  return Tensor{t.buffer.slice(off, static_cast<std::size_t>(span)), std::move(shape), std::move(strides)};
}

// The view with extent-1 axes dropped and neighbouring axes merged where one stride steps over the
// other: the fewest axes that walk the same elements in the same order.
void simplify(const Tensor& t, Dims& shape, Dims& strides) {
  const Dims s = t.effective_strides();
  for (std::size_t i = 0; i < t.rank(); ++i) {
    if (t.shape[i] == 1) continue;
    if (!shape.empty() && strides.back() == s[i] * t.shape[i]) {
      shape.back() *= t.shape[i];
      strides.back() = s[i];
    } else {
      shape.push_back(t.shape[i]);
      strides.push_back(s[i]);
    }
  }
}

// One 2-D piece of a view: a (rows, cols) block at element `offset` whose rows are `ld` apart
// (ld 0: one row repeated), or when transposed the transpose of a (cols, rows) block.
struct Piece {
  std::int64_t offset, rows, cols, ld;
  bool transposed;
};

// Calls f(piece) for each 2-D piece of a simplified view (one axis or more), in row-major order.
template <class F>
void for_each_piece(const Dims& shape, const Dims& strides, F f) {
  const std::size_t k = shape.size();
  Piece p{0, 1, shape[k - 1], shape[k - 1], false};
  std::size_t outer = k - 1;  // axes walked outside the piece
  if (strides[k - 1] == 1) {
    // Rows of unit stride; a block of them unless they overlap (0 < stride < cols).
    if (k >= 2 && (strides[k - 2] == 0 || strides[k - 2] >= shape[k - 1])) {
      p.rows = shape[k - 2], p.ld = strides[k - 2], outer = k - 2;
    }
  } else if (k >= 2 && strides[k - 2] == 1 && strides[k - 1] >= shape[k - 2]) {
    p = {0, shape[k - 2], shape[k - 1], strides[k - 1], true};  // the last two axes swapped
    outer = k - 2;
  } else {
    p = {0, shape[k - 1], 1, strides[k - 1], false};  // a strided last axis: one column per piece
  }
  Dims index(outer, 0);
  for (;;) {
    p.offset = 0;
    for (std::size_t i = 0; i < outer; ++i) p.offset += index[i] * strides[i];
    f(p);
    std::size_t i = outer;
    while (i > 0 && ++index[i - 1] == shape[i - 1]) index[--i] = 0;
    if (i == 0) return;
  }
}

}  // namespace

std::int64_t Tensor::size() const {
  std::int64_t n = 0;
  if (!detail::element_count(shape, n)) throw InvalidArgument("Tensor: shape " + text(shape) + " is not a shape");
  return n;
}

std::vector<std::int64_t> Tensor::effective_strides() const { return strides.empty() ? compact_strides(shape) : strides; }

bool Tensor::is_contiguous() const {
  if (strides.empty()) return true;
  if (strides.size() != shape.size()) return false;  // not a view at all: check() says why
  std::int64_t n = 0;
  if (detail::element_count(shape, n) && n == 0) return true;  // no element to be out of order
  const Dims c = compact_strides(shape);
  for (std::size_t i = 0; i < rank(); ++i) {
    if (shape[i] > 1 && strides[i] != c[i]) return false;
  }
  return true;
}

void Tensor::check(const char* what) const {
  const std::string w(what);
  for (std::int64_t d : shape) {
    if (d < 0) throw InvalidArgument(w + ": negative extent in shape " + text(shape));
  }
  if (!strides.empty() && strides.size() != shape.size()) {
    throw InvalidArgument(w + ": strides " + text(strides) + " for a shape of rank " + std::to_string(rank()));
  }
  for (std::int64_t s : strides) {
    if (s < 0) throw InvalidArgument(w + ": negative stride in " + text(strides));
  }
  std::int64_t span = 0;
  if (!detail::element_count(shape, span) || !span_of(shape, effective_strides(), span)) {
    throw ShapeMismatch(w + ": the extent of shape " + text(shape) + " does not fit in 64 bits");
  }
  if (static_cast<std::uint64_t>(span) > buffer.size()) {
    throw ShapeMismatch(w + ": shape " + text(shape) + " with strides " + text(effective_strides()) + " reaches " +
                        std::to_string(span) + " elements; the buffer holds " + std::to_string(buffer.size()));
  }
}

Tensor Tensor::slice(int axis, std::int64_t begin, std::int64_t end, std::int64_t step) const {
  check("Tensor::slice");
  const std::size_t a = axis_of(axis, rank(), "Tensor::slice");
  if (step < 1) throw InvalidArgument("Tensor::slice: step " + std::to_string(step) + " must be 1 or more");
  const std::int64_t n = shape[a];
  auto clamp = [n](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + n : i, 0, n); };
  const std::int64_t b = clamp(begin), e = std::max(b, clamp(end));
  Dims sh = shape, st = effective_strides();
  sh[a] = e == b ? 0 : 1 + (e - b - 1) / step;  // without overflow for any step
  const std::int64_t offset = sh[a] == 0 ? 0 : b * st[a];
  // One index left: its stride is never used (and step times it may not fit).
  if (sh[a] > 1 && !detail::mul_fits(st[a], step, st[a])) {
    throw ShapeMismatch("Tensor::slice: step " + std::to_string(step) + " times stride " + std::to_string(st[a]) +
                        " does not fit in 64 bits");
  }
  return view_of(*this, offset, std::move(sh), std::move(st));
}

Tensor Tensor::select(int axis, std::int64_t index) const {
  check("Tensor::select");
  const std::size_t a = axis_of(axis, rank(), "Tensor::select");
  const std::int64_t i = index < 0 ? index + shape[a] : index;
  if (i < 0 || i >= shape[a]) {
    throw InvalidArgument("Tensor::select: index " + std::to_string(index) + " is outside axis " +
                          std::to_string(axis) + " of extent " + std::to_string(shape[a]));
  }
  Dims sh = shape, st = effective_strides();
  const std::int64_t offset = i * st[a];
  sh.erase(sh.begin() + static_cast<std::ptrdiff_t>(a));
  st.erase(st.begin() + static_cast<std::ptrdiff_t>(a));
  return view_of(*this, offset, std::move(sh), std::move(st));
}

Tensor Tensor::permute(const std::vector<int>& axes) const {
  check("Tensor::permute");
  std::vector<bool> seen(rank(), false);
  if (axes.size() != rank()) {
    throw InvalidArgument("Tensor::permute: " + std::to_string(axes.size()) + " axes for a tensor of rank " +
                          std::to_string(rank()));
  }
  const Dims st = effective_strides();
  Dims new_shape, new_strides;
  for (int axis : axes) {
    const std::size_t a = axis_of(axis, rank(), "Tensor::permute");
    if (seen[a]) throw InvalidArgument("Tensor::permute: axis " + std::to_string(axis) + " appears twice");
    seen[a] = true;
    new_shape.push_back(shape[a]);
    new_strides.push_back(st[a]);
  }
  return Tensor{buffer, std::move(new_shape), std::move(new_strides)};
}

Tensor Tensor::reshape(std::vector<std::int64_t> new_shape) const {
  check("Tensor::reshape");
  if (!is_contiguous()) {
    throw InvalidArgument("Tensor::reshape: the tensor is a strided view; reshape t.contiguous() instead");
  }
  const auto inferred = std::count(new_shape.begin(), new_shape.end(), -1);
  if (inferred > 1) throw InvalidArgument("Tensor::reshape: more than one extent is -1 in " + text(new_shape));
  std::int64_t known = 1;
  for (std::int64_t d : new_shape) {
    if (d < -1) throw InvalidArgument("Tensor::reshape: negative extent in " + text(new_shape));
    if (d != -1 && !detail::mul_fits(known, d, known)) throw ShapeMismatch("Tensor::reshape: the shape overflows");
  }
  const std::int64_t n = size();
  if (inferred == 1 && known != 0 && n % known == 0) *std::find(new_shape.begin(), new_shape.end(), -1) = n / known;
  std::int64_t total = 0;
  if (std::count(new_shape.begin(), new_shape.end(), -1) != 0 || !detail::element_count(new_shape, total) ||
      total != n) {
    throw ShapeMismatch("Tensor::reshape: shape " + text(shape) + " (" + std::to_string(n) +
                        " elements) cannot become " + text(new_shape));
  }
  return Tensor{buffer.slice(0, static_cast<std::size_t>(n)), std::move(new_shape), {}};
}

Buffer Tensor::as_buffer() const {
  check("Tensor::as_buffer");
  if (!is_contiguous()) {
    throw InvalidArgument("Tensor::as_buffer: the tensor of shape " + text(shape) + " and strides " +
                          text(strides) + " is a strided view; use t.contiguous().as_buffer() (a copy)");
  }
  return buffer.slice(0, static_cast<std::size_t>(size()));
}

Matrix Tensor::as_matrix() const {
  check("Tensor::as_matrix");
  if (rank() != 2) {
    throw InvalidArgument("Tensor::as_matrix: a tensor of rank " + std::to_string(rank()) + " (shape " + text(shape) +
                          ") is not a matrix; reshape it to 2 axes first");
  }
  const Dims st = effective_strides();
  const std::int64_t rows = shape[0], cols = shape[1];
  const std::int64_t ld = rows <= 1 ? cols : st[0];
  if ((cols > 1 && st[1] != 1) || (rows > 1 && ld < cols)) {
    throw InvalidArgument("Tensor::as_matrix: strides " + text(st) +
                          " are not a row-major matrix's (rows of unit stride, not overlapping); use t.contiguous()");
  }
  if (cols == 1 && rows > 1) return matrix(buffer, rows, 1, st[0]);
  return matrix(buffer, rows, cols, ld);
}

Tensor Tensor::contiguous(Queue q) const {
  check("Tensor::contiguous");
  if (is_contiguous()) return Tensor{as_buffer(), shape, {}};  // the view's elements, not the whole buffer
  Backend& be = buffer.backend();
  Tensor out = empty_tensor(be, buffer.dtype(), shape);
  if (out.buffer.size() == 0) return out;
  Dims sh, st;
  simplify(*this, sh, st);  // not contiguous, so at least one axis is left
  // The row indices gather_rows reads: 0, 1, 2, ... for a block, all 0 for a repeated row.
  // gather_rows takes i32 row indices: a piece of more rows goes in runs of kMostRows.
  constexpr std::int64_t kMostRows = std::int64_t(1) << 30;
  std::int64_t most_rows = 0;
  for_each_piece(sh, st, [&](const Piece& p) {
    most_rows = std::max(most_rows, p.transposed ? 0 : std::min(p.rows, kMostRows));
  });
  Buffer counting, zeros;
  if (most_rows > 0) {
    std::vector<std::int32_t> rows(static_cast<std::size_t>(most_rows));
    std::iota(rows.begin(), rows.end(), 0);
    counting = Buffer::from(be, rows);
    std::fill(rows.begin(), rows.end(), 0);
    zeros = Buffer::from(be, rows);
  }
  std::size_t at = 0;  // next element of out
  for_each_piece(sh, st, [&](const Piece& p) {
    const std::size_t n = static_cast<std::size_t>(p.rows * p.cols);
    const Matrix dst = matrix(out.buffer.slice(at, n), p.rows, p.cols);
    at += n;
    if (p.transposed) {
      const std::size_t reach = static_cast<std::size_t>((p.cols - 1) * p.ld + p.rows);
      transpose(matrix(buffer.slice(static_cast<std::size_t>(p.offset), reach), p.cols, p.rows, p.ld), dst, q);
      return;
    }
    const bool repeated = p.ld == 0 && p.rows > 1;
    for (std::int64_t r0 = 0; r0 < p.rows; r0 += kMostRows) {
      const std::int64_t rows = std::min(kMostRows, p.rows - r0);
      const std::int64_t src_rows = repeated ? 1 : rows;
      const std::size_t reach = static_cast<std::size_t>((src_rows - 1) * p.ld + p.cols);
      const Matrix src = matrix(buffer.slice(static_cast<std::size_t>(p.offset + r0 * p.ld), reach), src_rows, p.cols,
                                src_rows == 1 ? p.cols : p.ld);
      const Matrix part = rows == p.rows ? dst : matrix(dst.buffer.slice(static_cast<std::size_t>(r0 * p.cols),
                                                                         static_cast<std::size_t>(rows * p.cols)),
                                                        rows, p.cols);
      gather_rows(src, (repeated ? zeros : counting).slice(0, static_cast<std::size_t>(rows)), part, q);
    }
  });
  // The row indices are freed on return: the gathers on q must be done with them first.
  if (most_rows > 0) be.synchronize(q);
  return out;
}

Tensor tensor(Buffer buffer, std::vector<std::int64_t> shape) {
  Tensor t{std::move(buffer), std::move(shape), {}};
  t.check("tensor");
  if (static_cast<std::uint64_t>(t.size()) != t.buffer.size()) {
    throw ShapeMismatch("tensor: shape " + text(t.shape) + " holds " + std::to_string(t.size()) +
                        " elements, the buffer " + std::to_string(t.buffer.size()));
  }
  return t;
}

Tensor empty_tensor(Backend& backend, DType dtype, std::vector<std::int64_t> shape) {
  Tensor t{Buffer(), std::move(shape), {}};
  const std::int64_t n = t.size();  // checks the shape
  t.buffer = Buffer(backend, dtype, static_cast<std::size_t>(n));
  return t;
}

}  // namespace tandem
