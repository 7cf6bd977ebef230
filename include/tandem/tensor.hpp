// N-dimensional views: a buffer with a shape and strides, sliced, indexed and permuted along any
// axis without copying, and handed to the ops as the Buffer or Matrix they take.
//
// Element (i0, ..., in-1) of a tensor is buffer[i0 * s0 + ... + in-1 * sn-1], s = strides() in
// elements. The buffer starts at the view's first element, so a view never reaches memory before
// it, and Buffer's own bounds hold for every element (check()). An empty shape is a 0-d scalar of
// one element; empty strides mean the compact row-major strides of the shape.
#pragma once

#include <cstdint>
#include <vector>

#include "tandem/buffer.hpp"
#include "tandem/ops.hpp"

namespace tandem {

struct Tensor {
  Buffer buffer;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides = {};  // elements, each >= 0; empty: compact row-major

  std::size_t rank() const { return shape.size(); }
  // The number of elements: the product of the shape (1 for a 0-d scalar).
  std::int64_t size() const;
  // The strides in force: `strides`, or the compact row-major strides of `shape` when empty.
  std::vector<std::int64_t> effective_strides() const;
  // Whether the elements lie in row-major order with no gaps (buffer[0 .. size())); true for a
  // tensor of no elements, false for strides of another rank than the shape.
  bool is_contiguous() const;
  // Throws when the fields do not describe a view inside the buffer: a negative extent or stride
  // or strides of another rank (InvalidArgument), an element past the buffer's end (ShapeMismatch).
  void check(const char* what = "Tensor") const;

  // Indices [begin, end) step `step` along `axis` (negative axes count from the last); begin and
  // end are clamped to the axis as in NumPy's a[begin:end:step]; step >= 1. A view.
  Tensor slice(int axis, std::int64_t begin, std::int64_t end, std::int64_t step = 1) const;
  // Index `index` of `axis` (negative indices count from the end), the axis removed: a view of
  // rank - 1. InvalidArgument outside the axis.
  Tensor select(int axis, std::int64_t index) const;
  // The axes in a new order (axes is a permutation of 0 .. rank - 1): a view.
  Tensor permute(const std::vector<int>& axes) const;
  // The same elements in another shape of the same size (one extent may be -1: inferred). A view
  // of a contiguous tensor; InvalidArgument naming contiguous() otherwise.
  Tensor reshape(std::vector<std::int64_t> new_shape) const;

  // The elements as the 1-D buffer the elementwise ops take: contiguous tensors only
  // (InvalidArgument naming contiguous() otherwise).
  Buffer as_buffer() const;
  // A 2-D tensor as the Matrix the matrix ops take: rows of unit stride (a single column may have
  // any stride), InvalidArgument naming contiguous() or reshape() otherwise.
  Matrix as_matrix() const;
  // A compact row-major copy on the same backend, or (when contiguous) a tensor over just the
  // view's elements of the same buffer. Waits for queue q when it copied through gather_rows.
  // Copies on the device through gather_rows and transpose: one launch per 2-D piece of the view
  // (its last two axes after merging the axes that walk memory in order; a strided last axis
  // gives pieces of one column each).
  Tensor contiguous(Queue q = {}) const;
  // The elements in row-major order, on the host.
  template <class T>
  std::vector<T> to_vector() const {
    return contiguous().buffer.template to_vector<T>();
  }
};

// A compact row-major tensor over a buffer of exactly the shape's size (ShapeMismatch otherwise).
Tensor tensor(Buffer buffer, std::vector<std::int64_t> shape);
// A new compact tensor of the shape on backend; contents undefined.
Tensor empty_tensor(Backend& backend, DType dtype, std::vector<std::int64_t> shape);

}  // namespace tandem
