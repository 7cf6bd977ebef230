// N-dimensional views (tandem/tensor.hpp) on the backend under test: slices, selections and
// permutations along every axis read the elements NumPy's indexing would, contiguous() copies each
// kind of view on the device, the ops take views as buffers and matrices, and bad views are refused.
#include <doctest/doctest.h>

#include <cstdio>
#include <numeric>
#include <vector>

#include "support.hpp"
#include "tandem/tandem.hpp"
#ifdef TANDEM_TEST_HAVE_DLPACK
#include "tandem/dlpack.hpp"
#endif

namespace {

using namespace tandem;
using test::backend_or_skip;

// A (2, 3, 4) tensor holding 0 .. 23: element (i, j, k) is 12 i + 4 j + k.
Tensor iota_tensor(Backend& be) {
  std::vector<float> v(24);
  std::iota(v.begin(), v.end(), 0.0f);
  return tensor(Buffer::from(be, v), {2, 3, 4});
}

// The values the tensor with this shape should hold when element (i, j, k) is f(i, j, k).
template <class F>
std::vector<float> expect(std::int64_t n0, std::int64_t n1, std::int64_t n2, F f) {
  std::vector<float> out;
  for (std::int64_t i = 0; i < n0; ++i)
    for (std::int64_t j = 0; j < n1; ++j)
      for (std::int64_t k = 0; k < n2; ++k) out.push_back(static_cast<float>(f(i, j, k)));
  return out;
}

}  // namespace

TEST_CASE("tensor views: slice along every axis reads NumPy's elements") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Tensor t = iota_tensor(*be);
  CHECK(t.is_contiguous());
  const Tensor a0 = t.slice(0, 1, 2);  // t[1:2]
  CHECK(a0.shape == std::vector<std::int64_t>{1, 3, 4});
  CHECK(a0.is_contiguous());
  CHECK(a0.to_vector<float>() == expect(1, 3, 4, [](auto i, auto j, auto k) { return 12 * (i + 1) + 4 * j + k; }));
  const Tensor a1 = t.slice(1, 1, 3);  // t[:, 1:3]: blocks of whole rows
  CHECK_FALSE(a1.is_contiguous());
  CHECK(a1.to_vector<float>() == expect(2, 2, 4, [](auto i, auto j, auto k) { return 12 * i + 4 * (j + 1) + k; }));
  const Tensor a2 = t.slice(-1, 1, 3);  // t[..., 1:3]: rows with a leading dimension
  CHECK(a2.to_vector<float>() == expect(2, 3, 2, [](auto i, auto j, auto k) { return 12 * i + 4 * j + k + 1; }));
  const Tensor stepped = t.slice(2, 0, 4, 3);  // t[..., ::3]: a strided last axis
  CHECK(stepped.shape == std::vector<std::int64_t>{2, 3, 2});
  CHECK(stepped.to_vector<float>() == expect(2, 3, 2, [](auto i, auto j, auto k) { return 12 * i + 4 * j + 3 * k; }));
  const Tensor clamped = t.slice(1, -2, 99);  // t[:, -2:99]
  CHECK(clamped.shape == std::vector<std::int64_t>{2, 2, 4});
  CHECK(clamped.to_vector<float>() == a1.to_vector<float>());
  const Tensor none = t.slice(1, 2, 1);
  CHECK(none.size() == 0);
  CHECK(none.contiguous().buffer.size() == 0);
}

TEST_CASE("tensor views: select, permute and reshape") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Tensor t = iota_tensor(*be);
  const Tensor row = t.select(1, 2);  // t[:, 2]: (2, 4)
  CHECK(row.shape == std::vector<std::int64_t>{2, 4});
  CHECK(row.to_vector<float>() == std::vector<float>{8, 9, 10, 11, 20, 21, 22, 23});
  const Tensor column = t.select(-1, 1);  // t[..., 1]: (2, 3), every element 4 apart
  CHECK(column.to_vector<float>() == std::vector<float>{1, 5, 9, 13, 17, 21});
  CHECK(t.select(0, -1).select(0, 0).to_vector<float>() == std::vector<float>{12, 13, 14, 15});
  const Tensor swapped = t.permute({0, 2, 1});  // the last two axes swapped: transposed blocks
  CHECK(swapped.shape == std::vector<std::int64_t>{2, 4, 3});
  CHECK(swapped.to_vector<float>() == expect(2, 4, 3, [](auto i, auto j, auto k) { return 12 * i + 4 * k + j; }));
  const Tensor rolled = t.permute({2, 0, 1});  // (4, 2, 3)
  CHECK(rolled.to_vector<float>() == expect(4, 2, 3, [](auto i, auto j, auto k) { return 12 * j + 4 * k + i; }));
  const Tensor flat = t.reshape({4, -1});
  CHECK(flat.shape == std::vector<std::int64_t>{4, 6});
  CHECK(flat.buffer.data() == t.buffer.data());
  CHECK_THROWS_AS(swapped.reshape({24}), InvalidArgument);
  CHECK(swapped.contiguous().reshape({24}).size() == 24);
  CHECK_THROWS_AS(t.reshape({5, -1}), ShapeMismatch);
  CHECK_THROWS_AS(t.reshape({-1, -1}), InvalidArgument);
}

TEST_CASE("tensor views: repeated and overlapping rows copy as NumPy's as_strided would") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Buffer b = Buffer::from(*be, std::vector<float>{1, 2, 3, 4, 5, 6});
  const Tensor broadcast{b.slice(0, 3), {2, 3}, {0, 1}};  // one row twice
  CHECK(broadcast.to_vector<float>() == std::vector<float>{1, 2, 3, 1, 2, 3});
  const Tensor windows{b, {3, 4}, {1, 1}};  // sliding windows: rows overlap
  CHECK(windows.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 2, 3, 4, 5, 3, 4, 5, 6});
  const Tensor repeated{b.slice(4, 1), {3}, {0}};
  CHECK(repeated.to_vector<float>() == std::vector<float>{5, 5, 5});
}

TEST_CASE("tensor views: 0-d, empty and oversized tensors, huge steps") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Tensor t = iota_tensor(*be);
  const Tensor scalar = t.select(0, 1).select(0, 2).select(0, 3);  // t[1, 2, 3]
  CHECK(scalar.rank() == 0);
  CHECK(scalar.size() == 1);
  CHECK(scalar.to_vector<float>() == std::vector<float>{23});
  // A slice of nothing, then a step: no elements, so contiguous, and reshapes as NumPy's would.
  const Tensor none = t.slice(1, 2, 1).slice(2, 0, 4, 2);
  CHECK(none.is_contiguous());
  CHECK(none.as_buffer().size() == 0);
  CHECK(none.reshape({0}).size() == 0);
  // A tensor over the front of a larger buffer: its copy and its elements are the view's only.
  const Tensor front{t.buffer, {2, 3}};
  CHECK(front.contiguous().buffer.size() == 6);
  CHECK(front.to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 5});
  // Steps past the axis, and steps whose stride would overflow: one element, as NumPy gives.
  CHECK(t.slice(2, 1, 4, INT64_MAX).to_vector<float>() == expect(2, 3, 1, [](auto i, auto j, auto) {
          return 12 * i + 4 * j + 1;
        }));
  CHECK(t.slice(0, 0, 2, std::int64_t(1) << 62).shape == std::vector<std::int64_t>{1, 3, 4});
  CHECK(t.slice(0, 0, 2, std::int64_t(1) << 62).to_vector<float>() == t.select(0, 0).to_vector<float>());
  // Strides of another rank than the shape are not a view: refused, never read past.
  const Tensor bad{t.buffer, {2, 3}, {3}};
  CHECK_FALSE(bad.is_contiguous());
  CHECK_THROWS_AS(bad.contiguous(), InvalidArgument);
  // A broadcast last axis (stride 0) and a broadcast leading one.
  const Tensor wide{t.buffer.slice(5, 1), {2, 3}, {0, 0}};
  CHECK(wide.to_vector<float>() == std::vector<float>(6, 5.0f));
}

TEST_CASE("tensor views: the ops take views as buffers and matrices") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Tensor t = iota_tensor(*be);
  // t[1] + t[0], elementwise on the contiguous halves.
  const Buffer sum = add(t.select(0, 1).as_buffer(), t.select(0, 0).as_buffer());
  CHECK(sum.to_vector<float>() == expect(1, 3, 4, [](auto, auto j, auto k) { return 12 + 2 * (4 * j + k); }));
  // t[0][:, 1:3] as a (3, 2) matrix with ld 4, times a (2, 1) matrix of ones.
  const Matrix m = t.select(0, 0).slice(1, 1, 3).as_matrix();
  CHECK((m.rows == 3 && m.cols == 2 && m.ld == 4));
  const Matrix ones = matrix(Buffer::from(*be, std::vector<float>{1, 1}), 2, 1);
  CHECK(matmul(m, ones).buffer.to_vector<float>() == std::vector<float>{3, 11, 19});
  const Matrix col = t.select(0, 1).slice(1, 1, 4, 3).as_matrix();  // t[1][:, 1:4:3]: one column, any stride
  CHECK((col.rows == 3 && col.cols == 1 && col.ld == 4));
  CHECK(col.buffer.slice(0, 1).to_vector<float>() == std::vector<float>{13});
  CHECK_THROWS_AS(t.as_matrix(), InvalidArgument);
  CHECK_THROWS_AS(t.slice(1, 0, 2).as_buffer(), InvalidArgument);
  CHECK_THROWS_AS(t.select(0, 0).permute({1, 0}).as_matrix(), InvalidArgument);
}

TEST_CASE("tensor views: bad axes, indices, steps and extents are refused") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Tensor t = iota_tensor(*be);
  CHECK_THROWS_AS(t.slice(3, 0, 1), InvalidArgument);
  CHECK_THROWS_AS(t.slice(-4, 0, 1), InvalidArgument);
  CHECK_THROWS_AS(t.slice(0, 0, 1, 0), InvalidArgument);
  CHECK_THROWS_AS(t.select(1, 3), InvalidArgument);
  CHECK_THROWS_AS(t.select(1, -4), InvalidArgument);
  CHECK_THROWS_AS(t.permute({0, 1}), InvalidArgument);
  CHECK_THROWS_AS(t.permute({0, 1, 1}), InvalidArgument);
  CHECK_THROWS_AS(tensor(t.buffer, {5, 5}), ShapeMismatch);
  const Tensor past{t.buffer, {2, 13}, {12, 1}};  // its last element is [36]
  CHECK_THROWS_AS(past.check(), ShapeMismatch);
  CHECK_THROWS_AS(past.contiguous(), ShapeMismatch);
  CHECK_THROWS_AS((Tensor{t.buffer, {2, 3}, {-1, 1}}.check()), InvalidArgument);
  CHECK_THROWS_AS((Tensor{t.buffer, {2, 3}, {1}}.check()), InvalidArgument);
}

#ifdef TANDEM_TEST_HAVE_DLPACK
TEST_CASE("tensor views: a strided view goes to DLPack with its strides") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Tensor view = iota_tensor(*be).slice(1, 1, 3);
  DLManagedTensor* m = nullptr;
  try {
    m = to_dlpack(view);
  } catch (const Unsupported& e) {
    std::printf("SKIPPED: %s\n", e.what());
    return;
  }
  REQUIRE(m->dl_tensor.strides != nullptr);
  CHECK(m->dl_tensor.data == view.buffer.data());
  CHECK(std::vector<std::int64_t>(m->dl_tensor.strides, m->dl_tensor.strides + 3) == std::vector<std::int64_t>{12, 4, 1});
  CHECK(std::vector<std::int64_t>(m->dl_tensor.shape, m->dl_tensor.shape + 3) == std::vector<std::int64_t>{2, 2, 4});
  m->deleter(m);
  // What check() refuses is not exported either: strides of another rank, a negative stride.
  const Buffer b = view.buffer;
  CHECK_THROWS_AS(to_dlpack(Tensor{b, {2, 3}, {3, 1, 99}}), InvalidArgument);
  CHECK_THROWS_AS(to_dlpack(Tensor{b, {1, 3}, {-5, 1}}), InvalidArgument);
}
#endif
