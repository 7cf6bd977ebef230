// Bad input: every op rejects it with a typed error and a message that says what to do; nothing
// crashes and the library stays usable.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tandem/mlp.hpp"
#include "tandem/regression.hpp"
#include "tandem/tandem.hpp"

using namespace tandem;

namespace {
template <class E, class F>
std::string raises(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("wrong exception type: ", e.what());
  }
  FAIL("no exception");
  return "";
}

const char* cpu_backend() {
#ifdef TANDEM_TEST_HAVE_OPENMP
  return "openmp";
#else
  return "reference";
#endif
}
}  // namespace

TEST_CASE("shape mismatch") {
  Backend& be = get_backend(cpu_backend());
  Buffer x(be, DType::f32, 10), y(be, DType::f32, 11), out(be, DType::f32, 10);
  CHECK(raises<ShapeMismatch>([&] { add(x, y, out); }).find("y has 11 elements, expected 10") != std::string::npos);
  Buffer a(be, DType::f32, 6), b(be, DType::f32, 6), c(be, DType::f32, 4);
  Matrix cm = matrix(c, 2, 2);
  CHECK(raises<ShapeMismatch>([&] { matmul(matrix(a, 2, 3), matrix(b, 2, 3), cm); }).find("op(a) is (2, 3)") !=
        std::string::npos);
  Matrix t = matrix(c, 2, 2);
  CHECK_THROWS_AS(transpose(matrix(a, 2, 3), t), ShapeMismatch);
  CHECK_THROWS_AS(matrix(a, 3, 3), ShapeMismatch);  // needs 9 elements
  Buffer bias(be, DType::f32, 2);
  Matrix am = matrix(a, 2, 3);
  CHECK_THROWS_AS(add_row_vector(am, bias, am), ShapeMismatch);
}

TEST_CASE("dtype mismatch") {
  Backend& be = get_backend(cpu_backend());
  Buffer x(be, DType::f32, 4), y(be, DType::f64, 4), out(be, DType::f32, 4);
  CHECK(raises<DTypeMismatch>([&] { add(x, y, out); }).find("y has dtype f64, expected f32") != std::string::npos);
  Buffer i(be, DType::i32, 4), io(be, DType::i32, 4);
  CHECK(raises<DTypeMismatch>([&] { relu(i, io); }).find("takes f32, f64") != std::string::npos);
  Buffer h(be, DType::f16, 4), c16(be, DType::f16, 4);
  Matrix cm = matrix(c16, 2, 2);
  CHECK(raises<DTypeMismatch>([&] { matmul(matrix(h, 2, 2), matrix(h, 2, 2), cm); }).find("must be f32") !=
        std::string::npos);
  Buffer r(be, DType::f32, 1);
  CHECK_THROWS_AS(reduce(ReduceOp::argmax, x, r), DTypeMismatch);  // argmax writes an i32 index
  CHECK_THROWS_AS(norm2(i), DTypeMismatch);
}

TEST_CASE("a buffer of another backend") {
  Backend& cpu = get_backend(cpu_backend());
  auto other = create_backend("reference");
  Buffer x(cpu, DType::f32, 4), y(*other, DType::f32, 4), out(cpu, DType::f32, 4);
  const std::string msg = raises<DeviceMismatch>([&] { add(x, y, out); });
  CHECK(msg.find("lives on backend 'reference'") != std::string::npos);
  CHECK(msg.find("copy it over") != std::string::npos);
  Buffer r(*other, DType::f32, 1);
  CHECK_THROWS_AS(reduce(ReduceOp::sum, x, r), DeviceMismatch);
}

TEST_CASE("empty or null where not allowed") {
  Backend& be = get_backend(cpu_backend());
  Buffer none, out(be, DType::f32, 4), x(be, DType::f32, 4);
  CHECK(raises<InvalidArgument>([&] { add(none, x, out); }).find("empty Buffer handle") != std::string::npos);
  CHECK_THROWS_AS(add(x, none, out), InvalidArgument);
  Buffer empty(be, DType::f32, 0), r(be, DType::f32, 1), ri(be, DType::i32, 1);
  CHECK(sum(empty) == 0);  // the empty sum is defined
  CHECK(raises<InvalidArgument>([&] { reduce(ReduceOp::max, empty, r); }).find("undefined") != std::string::npos);
  CHECK_THROWS_AS(reduce(ReduceOp::argmax, empty, ri), InvalidArgument);
  CHECK_THROWS_AS(mse(empty, empty, r), InvalidArgument);
  CHECK_THROWS_AS(x.upload_bytes(nullptr, 16), InvalidArgument);
  Buffer logits(be, DType::f32, 0), labels(be, DType::i32, 3), losses(be, DType::f32, 3);
  Matrix lm{logits, 3, 0, 1}, pm{logits, 3, 0, 1};
  CHECK_THROWS_AS(softmax_cross_entropy(lm, labels, pm, losses), InvalidArgument);
}

TEST_CASE("leading dimension smaller than the row length") {
  Backend& be = get_backend(cpu_backend());
  Buffer a(be, DType::f32, 12);
  CHECK(raises<InvalidArgument>([&] {
          matrix(a, 3, 4, 3);
        }).find("leading dimension 3, smaller than its row length 4") != std::string::npos);
  Matrix bad{a, 3, 4, 2};  // built by hand: the op still checks
  Buffer c(be, DType::f32, 16);
  Matrix cm = matrix(c, 4, 4);
  CHECK_THROWS_AS(transpose(bad, cm), InvalidArgument);
}

TEST_CASE("unknown tier or backend, and a tier the backend lacks") {
  CHECK(raises<InvalidArgument>([] { parse_matmul_tier("fastest"); }).find("naive, tiled") != std::string::npos);
  CHECK_THROWS_AS(parse_dtype("f8"), InvalidArgument);
  CHECK_THROWS_AS(get_backend("gpu"), BackendUnavailable);
  Backend& ref = get_backend("reference");
  Buffer a(ref, DType::f32, 4), c(ref, DType::f32, 4);
  Matrix cm = matrix(c, 2, 2);
  MatmulOptions o;
  o.tier = MatmulTier::register_blocked;
  const std::string msg = raises<Unsupported>([&] { matmul(matrix(a, 2, 2), matrix(a, 2, 2), cm, o); });
  CHECK(msg.find("no tier 'register_blocked'") != std::string::npos);
  CHECK(msg.find("it has: naive, auto") != std::string::npos);
#ifdef TANDEM_TEST_HAVE_OPENMP
  Backend& omp = get_backend("openmp");
  Buffer h(omp, DType::f16, 4), hc(omp, DType::f32, 4);
  Matrix hm = matrix(hc, 2, 2);
  o.tier = MatmulTier::tensor_core;
  CHECK(raises<Unsupported>([&] { matmul(matrix(h, 2, 2), matrix(h, 2, 2), hm, o); }).find("register_blocked") !=
        std::string::npos);
  o.tier = MatmulTier::vendor;  // OpenBLAS has no f16 GEMM
  CHECK_THROWS_AS(matmul(matrix(h, 2, 2), matrix(h, 2, 2), hm, o), Unsupported);
#endif
}

TEST_CASE("aliasing the matmul output, non-finite alpha, bad reduce ops") {
  Backend& be = get_backend(cpu_backend());
  Buffer a(be, DType::f32, 4);
  Matrix am = matrix(a, 2, 2);
  CHECK(raises<InvalidArgument>([&] { matmul(am, am, am); }).find("overlaps") != std::string::npos);
  Buffer c(be, DType::f32, 4);
  Matrix cm = matrix(c, 2, 2);
  MatmulOptions o;
  o.alpha = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(matmul(am, am, cm, o), InvalidArgument);
  Buffer out(be, DType::f32, 2);
  CHECK_THROWS_AS(reduce_rows(ReduceOp::argmax, am, out), InvalidArgument);
}

TEST_CASE("outputs may be their input in place, but not overlap it partly") {
  Backend& be = get_backend(cpu_backend());
  Buffer x = Buffer::from(be, std::vector<float>{1, 2, 3, 4, 5});
  relu(x, x);  // in place: fine
  Buffer shifted = x.slice(1, 4), head = x.slice(0, 4);
  CHECK(raises<InvalidArgument>([&] { add(head, head, shifted); }).find("overlaps") != std::string::npos);
  CHECK_THROWS_AS(axpy(1.0, head, shifted), InvalidArgument);
  Buffer logits = Buffer::from(be, std::vector<float>{1, 2, 3, 4}),
         labels = Buffer::from(be, std::vector<std::int32_t>{0, 1}), losses(be, DType::f32, 2);
  Matrix lm = matrix(logits, 2, 2);
  CHECK_THROWS_AS(softmax_cross_entropy(lm, labels, lm, losses), InvalidArgument);  // probs over logits
  Buffer i32(be, DType::i32, 3);
  CHECK_THROWS_AS(fill(i32, std::nan("")), InvalidArgument);
  CHECK_THROWS_AS(fill(i32, 1e10), InvalidArgument);
}

TEST_CASE("after bad input the backend still works") {
  Backend& be = get_backend(cpu_backend());
  Buffer x = Buffer::from(be, std::vector<float>{1, 2, 3}), y(be, DType::f32, 3);
  CHECK_THROWS(add(x, Buffer(be, DType::f32, 2), y));
  add(x, x, y);
  CHECK(y.to_vector<float>() == std::vector<float>{2, 4, 6});
}

TEST_CASE("an op value outside its enum is an InvalidArgument, never a silent default op") {
  CHECK_THROWS_AS(name_of(static_cast<UnaryOp>(1000)), InvalidArgument);
  CHECK_THROWS_AS(name_of(static_cast<BinaryOp>(-1)), InvalidArgument);
  CHECK_THROWS_AS(name_of(static_cast<ReduceOp>(99)), InvalidArgument);
  Backend& be = get_backend("reference");
  Buffer x = Buffer::from(be, std::vector<float>{1, 2}), out(be, DType::f32, 2);
  CHECK_THROWS_AS(unary(static_cast<UnaryOp>(1000), x, out), InvalidArgument);
  CHECK_FALSE(is_activation(UnaryOp::exp));
  CHECK(is_activation(UnaryOp::silu));
  CHECK(grad_op(UnaryOp::silu) == BinaryOp::silu_grad);
}

TEST_CASE("views whose extent overflows 64 bits are refused, and ops on them never touch memory") {
  Backend& be = get_backend(cpu_backend());
  Buffer one(be, DType::f32, 1);
  const std::int64_t big = std::int64_t(1) << 32, huge = std::int64_t(1) << 62;
  // Both once wrapped around to a small extent and passed.
  CHECK(raises<InvalidArgument>([&] { matrix(one, big + 1, 1, big); }).find("does not fit in 64 bits") !=
        std::string::npos);
  CHECK(raises<InvalidArgument>([&] { matrix(one, huge, 4); }).find("does not fit in 64 bits") != std::string::npos);
  // Built by hand, the ops check again: matmul's k = 0 scaling path and reduce_cols once crashed.
  Matrix wide{one, huge, 4, 4};
  Buffer empty_k(be, DType::f32, 1);
  Matrix a{empty_k, huge, 0, 1}, b{empty_k, 0, 4, 4};
  CHECK_THROWS_AS(matmul(a, b, wide), InvalidArgument);
  Buffer sums(be, DType::f32, 4);
  CHECK_THROWS_AS(reduce_cols(ReduceOp::sum, wide, sums), InvalidArgument);
}

TEST_CASE("Mlp::step without a backward since the last step is refused: the weights stay as they were") {
  Backend& be = get_backend(cpu_backend());
  ml::Mlp model(be, ml::layers_from_widths({3, 4, 2}));
  const std::vector<float> before = model.parameters()[0].to_vector<float>();
  CHECK(raises<InvalidArgument>([&] { model.step(); }).find("call backward()") != std::string::npos);
  CHECK(model.parameters()[0].to_vector<float>() == before);
  const Matrix x = matrix(Buffer::from(be, std::vector<float>{1, 2, 3, 4, 5, 6}), 2, 3);
  const Buffer labels = Buffer::from(be, std::vector<std::int32_t>{0, 1});
  const Matrix targets = matrix(Buffer::from(be, std::vector<float>{1, 0, 0, 1}), 2, 2);
  model.forward(x);
  model.backward(labels, targets);
  model.step();
  CHECK(model.parameters()[0].to_vector<float>() != before);
  CHECK_THROWS_AS(model.step(), InvalidArgument);  // the same gradients twice
}

TEST_CASE("regression on values whose squares overflow or underflow says so, naming the column") {
  Backend& be = get_backend("reference");
  data::Dataset d;
  d.rows = 4;
  d.cols = 2;
  d.features = {1, 1e200, 2, 3e200, 3, 2e200, 4, 5e200};
  d.targets = {1, 2, 3, 4};
  d.source = "big.csv";
  CHECK(raises<InvalidArgument>([&] { ml::fit_linear_regression(be, d); }).find("feature 1 reaches |x| = 5e+200") !=
        std::string::npos);
  d.features = {1, 1e-200, 2, 3e-200, 3, 2e-200, 4, 5e-200};
  CHECK(raises<InvalidArgument>([&] { ml::fit_linear_regression(be, d); }).find("underflows in f64") !=
        std::string::npos);
  d.features = {1, 1, 2, 3, 3, 2, 4, 5};
  d.targets = {1, 2, 3, 1e19};
  ml::RegressionOptions in_f32;
  in_f32.dtype = DType::f32;
  CHECK(raises<InvalidArgument>([&] { ml::fit_linear_regression(be, d, in_f32); }).find("the target reaches") !=
        std::string::npos);
}

TEST_CASE("an MLP layer too large for memory is OutOfMemory from the backend, not std::bad_alloc") {
  Backend& be = get_backend("reference");
  // 64 x 2^31 weights: 512 GiB in f32, more than this machine has.
  CHECK_THROWS_AS(ml::Mlp(be, ml::layers_from_widths({64, std::size_t(1) << 31, 10})), OutOfMemory);
  ml::Mlp fine(be, ml::layers_from_widths({64, 16, 10}));  // and the backend still works
  CHECK(fine.parameter_count() == 64 * 16 + 16 + 16 * 10 + 10);
}

TEST_CASE("features near the largest double: standardised without overflow, refused raw in f32, never a NaN loss") {
  Backend& be = get_backend(cpu_backend());
  data::Dataset d;
  d.source = "huge.csv";
  d.cols = 2;
  for (int r = 0; r < 40; ++r) {
    const double sign = r % 2 == 0 ? 1 : -1;
    d.features.insert(d.features.end(), {sign * (1 + 0.01 * r) * 1.2e308, 0.5 * r});
    d.targets.push_back(r % 2);
  }
  d.rows = 40;
  // The sums of the first column overflow a double; the fit must not.
  const data::Standardizer st = data::Standardizer::fit(d);
  CHECK(std::isfinite(st.mean[0]));
  CHECK(std::isfinite(st.scale[0]));
  CHECK(st.scale[0] > 1e308);
  data::Dataset scaled = d;
  st.apply(scaled);
  for (double v : scaled.features) CHECK(std::fabs(v) < 3);
  // Ordinary columns get the bits the plain formula gives (the scaling is by a power of two).
  double mean = 0, var = 0;
  for (int r = 0; r < 40; ++r) mean += 0.5 * r;
  mean /= 40;
  for (int r = 0; r < 40; ++r) var += (0.5 * r - mean) * (0.5 * r - mean);
  CHECK(st.mean[1] == mean);
  CHECK(st.scale[1] == std::sqrt(var / 40));

  ml::Mlp model(be, ml::layers_from_widths({2, 8, 2}));
  ml::TrainOptions o;
  o.epochs = 2;
  o.batch_size = 8;
  // Raw, the first column is Inf in f32: a DataError naming the value and place, not a NaN loss
  // blamed on the learning rate.
  const std::string why = raises<DataError>([&] { ml::train(model, d, nullptr, o); });
  CHECK(why.find("huge.csv holds a feature of 1.2e+308 (sample 1, column 1)") != std::string::npos);
  CHECK(why.find("beyond the 3.4e+38 that f32 holds") != std::string::npos);
  // Standardised, it trains to finite losses.
  for (const ml::EpochReport& rep : ml::train(model, scaled, nullptr, o)) CHECK(std::isfinite(rep.train_loss));
}

TEST_CASE("a label outside the model's classes is refused by Mlp::backward, not a NaN loss") {
  Backend& be = get_backend(cpu_backend());
  ml::Mlp model(be, ml::layers_from_widths({3, 4, 2}));
  const Matrix x = matrix(Buffer::from(be, std::vector<float>{1, 2, 3, 4, 5, 6}), 2, 3);
  const Matrix targets = matrix(Buffer::from(be, std::vector<float>{1, 0, 0, 1}), 2, 2);
  model.forward(x);
  const Buffer bad = Buffer::from(be, std::vector<std::int32_t>{0, 2});
  CHECK(raises<InvalidArgument>([&] { model.backward(bad, targets); }).find("label 2 in row 1") != std::string::npos);
  const Buffer good = Buffer::from(be, std::vector<std::int32_t>{0, 1});
  CHECK(std::isfinite(model.backward(good, targets).to_vector<float>()[0]));
}
