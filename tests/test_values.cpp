// The value-returning forms of the ops, outputs given as temporaries, Buffer::to, allclose and
// verify::compare on the backend under test (registered per backend with the matrix): each form
// computes what the out-parameter form computes, on the operands' backend.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "support.hpp"
#include "tandem/tandem.hpp"
#include "tandem/verify.hpp"

namespace {

using namespace tandem;
using test::backend_or_skip;

std::vector<float> values(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(float(i) + 1);
  return v;
}

}  // namespace

TEST_CASE("value forms: each returns what its out-parameter form writes") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Buffer x = Buffer::from(*be, values(1001, 2)), y = Buffer::from(*be, values(1001, -3));
  Buffer want(*be, DType::f32, 1001);
  add(x, y, want);
  const Buffer got = add(x, y);
  CHECK(&got.backend() == be);
  CHECK(got.to_vector<float>() == want.to_vector<float>());
  relu(x, want);
  CHECK(relu(x).to_vector<float>() == want.to_vector<float>());
  inclusive_scan(x, want);
  CHECK(inclusive_scan(x).to_vector<float>() == want.to_vector<float>());
  const Buffer h = convert(x, DType::bf16);
  CHECK(h.dtype() == DType::bf16);
  CHECK(h.size() == 1001);

  const Matrix a = matrix(Buffer::from(*be, values(6 * 4, 1)), 6, 4), b = matrix(Buffer::from(*be, values(4 * 5, 1)), 4, 5);
  Matrix c = matrix(Buffer(*be, DType::f32, 30), 6, 5);
  matmul(a, b, c);
  const Matrix v = matmul(a, b);
  CHECK((v.rows == 6 && v.cols == 5 && v.ld == 5));
  CHECK(v.buffer.to_vector<float>() == c.buffer.to_vector<float>());
  const Matrix at = transpose(a);
  CHECK((at.rows == 4 && at.cols == 6));
  const Matrix back = matmul(at, b, {.trans_a = Transpose::yes});  // (at)^T b = a b
  CHECK(back.buffer.to_vector<float>() == c.buffer.to_vector<float>());
  const Buffer sums = reduce_rows(ReduceOp::sum, a);
  CHECK(sums.size() == 6);
  const Matrix picked = gather_rows(a, Buffer::from(*be, std::vector<std::int32_t>{5, 0}));
  CHECK((picked.rows == 2 && picked.cols == 4));
  CHECK(picked.buffer.slice(0, 4).to_vector<float>() == a.buffer.slice(20, 4).to_vector<float>());
}

TEST_CASE("value forms: matmul has no c to accumulate into, and shapes are still checked") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Matrix a = matrix(Buffer::from(*be, values(6, 1)), 2, 3);
  CHECK_THROWS_AS(matmul(a, a, {.beta = 1}), InvalidArgument);
  CHECK_THROWS_AS(matmul(a, a), ShapeMismatch);  // (2, 3) x (2, 3)
  CHECK_THROWS_AS(add(a.buffer, Buffer::from(*be, values(5, 1))), ShapeMismatch);
  CHECK_THROWS_AS(add(Buffer{}, a.buffer), InvalidArgument);
}

TEST_CASE("outputs given as temporaries are written through") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Matrix a = matrix(Buffer::from(*be, std::vector<float>{1, 2, 3, 4}), 2, 2);
  Buffer c(*be, DType::f32, 4);
  matmul(a, a, matrix(c, 2, 2));  // a view made for the call
  CHECK(c.to_vector<float>() == std::vector<float>{7, 10, 15, 22});
  Buffer two(*be, DType::f32, 8);
  two.fill(0);
  add(a.buffer, a.buffer, two.slice(4, 4));
  CHECK(two.to_vector<float>() == std::vector<float>{0, 0, 0, 0, 2, 4, 6, 8});
}

TEST_CASE("Buffer::to: the same handle on its own backend, a copy on another") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const std::vector<float> v = values(3000, 5);
  const Buffer x = Buffer::from(*be, v);
  const Buffer same = x.to(*be);
  CHECK(same.data() == x.data());
  Backend& ref = get_backend("reference");
  const Buffer there = x.to(ref);
  CHECK(&there.backend() == &ref);
  CHECK(there.to_vector<float>() == v);
  const Buffer home = there.to(*be);
  CHECK(&home.backend() == be);
  CHECK(home.to_vector<float>() == v);
  CHECK(x.slice(1000, 7).to(ref).to_vector<float>() == std::vector<float>(v.begin() + 1000, v.begin() + 1007));
}

TEST_CASE("allclose and verify::compare across backends and dtypes") {
  Backend* be = backend_or_skip();
  if (!be) return;
  Backend& ref = get_backend("reference");
  const std::vector<float> v = values(500, 1);
  const Buffer x = Buffer::from(*be, v);
  std::vector<double> near(v.begin(), v.end()), far = near;
  near[17] += 1e-6 * std::fabs(near[17]);
  far[17] += 1e-3;
  CHECK(allclose(x, Buffer::from(ref, near)));
  CHECK_FALSE(allclose(x, Buffer::from(ref, far)));
  CHECK(allclose(x, Buffer::from(ref, far), 0, 2e-3));
  const verify::Comparison c = verify::compare(x, Buffer::from(ref, far), 1e-5);
  CHECK(c.failures == 1);
  CHECK(c.first_failures.at(0).index == 17);
  CHECK_THROWS_AS(allclose(x, x.slice(0, 499)), ShapeMismatch);
  CHECK_THROWS_AS(allclose(x, x, -1), InvalidArgument);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const Buffer odd = Buffer::from(ref, std::vector<double>{nan, inf, 1});
  CHECK_FALSE(allclose(odd, odd));
  CHECK(allclose(odd, odd, 1e-5, 1e-8, true));
  CHECK_FALSE(allclose(odd, Buffer::from(ref, std::vector<double>{nan, -inf, 1}), 1e-5, 1e-8, true));
}

TEST_CASE("verify::check and compare with an op's own bound catch an error of a few units in the last place") {
  Backend* be = backend_or_skip();
  if (!be) return;
  Backend& ref = get_backend("reference");
  const std::vector<float> v = values(300, 2), w = values(300, -0.5f);
  const Buffer x = Buffer::from(*be, v), y = Buffer::from(*be, w);
  // The backend's own results pass the bounds `tandem check` holds it to.
  CHECK(verify::check(UnaryOp::exp, x, exp(x)).ok());
  CHECK(verify::check(BinaryOp::mul, x, y, mul(x, y)).ok());
  CHECK(verify::check(BinaryOp::tanh_grad, x, y, binary(BinaryOp::tanh_grad, x, y)).ok());
  // One element off by 8 units in the last place fails there, and only there.
  auto nudged = [&](const Buffer& b, std::size_t at) {
    std::vector<float> h = b.to_vector<float>();
    h[at] = std::nextafter(h[at], INFINITY);
    for (int i = 0; i < 7; ++i) h[at] = std::nextafter(h[at], INFINITY);
    return Buffer::from(*be, h);
  };
  const verify::Comparison bad = verify::check(UnaryOp::exp, x, nudged(exp(x), 41));
  CHECK(bad.failures == 1);
  CHECK(bad.first_failures.at(0).index == 41);
  CHECK(verify::check(BinaryOp::mul, x, y, nudged(mul(x, y), 7)).failures == 1);
  // compare: against a float64 result, with the op's bound in the actual's precision.
  const std::vector<double> v64(v.begin(), v.end()), w64(w.begin(), w.end());
  const Buffer exact = add(Buffer::from(ref, v64), Buffer::from(ref, w64));
  CHECK(verify::compare(add(x, y), exact, BinaryOp::add).ok());
  CHECK(verify::compare(nudged(add(x, y), 3), exact, BinaryOp::add).failures == 1);
  const Buffer sq = unary(UnaryOp::sqrt, unary(UnaryOp::abs, Buffer::from(ref, v64)));
  CHECK(verify::compare(unary(UnaryOp::sqrt, unary(UnaryOp::abs, x)), sq, UnaryOp::sqrt).ok());
  CHECK_THROWS_AS(verify::compare(x, x, BinaryOp::relu_grad), InvalidArgument);
  // Results stored in f16 and bf16 are held to their own precision: a correctly rounded one passes,
  // one off by a few of its units fails.
  for (const DType t : {DType::f16, DType::bf16}) {
    const Buffer e = exp(Buffer::from(ref, v64));
    const Buffer rounded = convert(e, t), wrong = convert(scale(1.05, e), t);
    CHECK_MESSAGE(verify::compare(rounded, e, UnaryOp::exp).ok(), name_of(t));
    CHECK_MESSAGE(verify::compare(wrong, e, UnaryOp::exp).failures > 250, name_of(t));
    CHECK_MESSAGE(verify::check(UnaryOp::exp, Buffer::from(ref, v64), rounded).ok(), name_of(t));
  }
  CHECK_THROWS_AS(verify::check(UnaryOp::exp, x, x.slice(0, 5)), ShapeMismatch);
}

TEST_CASE("verify::check_matmul: the backend's product passes, a nudged one fails, beta is refused") {
  Backend* be = backend_or_skip();
  if (!be) return;
  const Matrix a = matrix(Buffer::from(*be, values(9 * 40, 1)), 9, 40);
  const Matrix b = matrix(Buffer::from(*be, values(40 * 7, -1)), 40, 7);
  const Matrix c = matmul(a, b, {.alpha = 0.5});
  CHECK(verify::check_matmul(a, b, c, {.alpha = 0.5}).ok());
  // Wrong alpha: every element off by a factor of 2.
  CHECK(verify::check_matmul(a, b, c).failures == 63);
  std::vector<float> h = c.buffer.to_vector<float>();
  h[20] += 1e-3f * std::fabs(h[20]) + 1e-3f;
  CHECK(verify::check_matmul(a, b, matrix(Buffer::from(*be, h), 9, 7), {.alpha = 0.5}).failures == 1);
  const Matrix at = transpose(a);
  CHECK(verify::check_matmul(at, b, matmul(at, b, {.trans_a = Transpose::yes}), {.trans_a = Transpose::yes}).ok());
  CHECK_THROWS_AS(verify::check_matmul(a, b, c, {.beta = 1}), InvalidArgument);
  CHECK_THROWS_AS(verify::check_matmul(a, b, matrix(c.buffer.slice(0, 56), 8, 7)), ShapeMismatch);
}
