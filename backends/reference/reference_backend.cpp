// reference: the specification. Serial, plain loops, every value computed in double (integers
// wrap as documented) and rounded once to the output type. Optimise nothing here: other
// backends are judged against it.
#include <cmath>
#include <limits>
#include <vector>

#include "../../core/factories.hpp"
#include "../host/cpu_info.hpp"
#include "../host/host_backend.hpp"
#include "tandem/detail/apply_op.hpp"
#include "tandem/detail/scalar_math.hpp"

namespace tandem {
namespace {

using host::dispatch_any;
using host::dispatch_float;
using host::dispatch_numeric;
using host::dispatch_real;
using host::from;
using host::to;

using math::apply;

class ReferenceBackend : public host::HostBackend {
 public:
  std::string name() const override { return "reference"; }
  DeviceProperties properties() const override { return host::cpu_properties(1); }

  void binary(Queue q, BinaryOp op, DType t, std::size_t n, const void* x, const void* y, void* out) override {
    check_queue(q);
    dispatch_float(t, [&]<class T>() {
      for (std::size_t i = 0; i < n; ++i) {
        static_cast<T*>(out)[i] = T(apply<double>(op, static_cast<const T*>(x)[i], static_cast<const T*>(y)[i]));
      }
    });
  }

  void unary(Queue q, UnaryOp op, DType t, std::size_t n, const void* x, void* out) override {
    check_queue(q);
    dispatch_float(t, [&]<class T>() {
      for (std::size_t i = 0; i < n; ++i) static_cast<T*>(out)[i] = T(apply<double>(op, static_cast<const T*>(x)[i]));
    });
  }

  void axpy(Queue q, DType t, std::size_t n, double alpha, const void* x, void* y) override {
    check_queue(q);
    dispatch_float(t, [&]<class T>() {
      for (std::size_t i = 0; i < n; ++i) {
        T& yi = static_cast<T*>(y)[i];
        yi = T(alpha * double(static_cast<const T*>(x)[i]) + double(yi));
      }
    });
  }

  void scale(Queue q, DType t, std::size_t n, double alpha, const void* x, void* out) override {
    check_queue(q);
    dispatch_float(t, [&]<class T>() {
      for (std::size_t i = 0; i < n; ++i) static_cast<T*>(out)[i] = T(alpha * double(static_cast<const T*>(x)[i]));
    });
  }

  void fill(Queue q, DType t, std::size_t n, double value, void* out) override {
    check_queue(q);
    dispatch_any(t, [&]<class T>() {
      for (std::size_t i = 0; i < n; ++i) static_cast<T*>(out)[i] = from<T>(value);
    });
  }

  void add_row_vector(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                      const void* bias, void* out, std::int64_t ldo) override {
    check_queue(q);
    dispatch_float(t, [&]<class T>() {
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          static_cast<T*>(out)[r * ldo + c] =
              T(double(static_cast<const T*>(x)[r * ldx + c]) + double(static_cast<const T*>(bias)[c]));
        }
      }
    });
  }

  void bias_activation(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                       const void* bias, UnaryOp act, void* z, std::int64_t ldz, void* out, std::int64_t ldo) override {
    check_queue(q);
    dispatch_float(t, [&]<class T>() {
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) {
          // z rounds to T before act, as the composite and every other backend do.
          const T v = T(double(static_cast<const T*>(x)[r * ldx + c]) + double(static_cast<const T*>(bias)[c]));
          if (z != nullptr) static_cast<T*>(z)[r * ldz + c] = v;
          static_cast<T*>(out)[r * ldo + c] = T(apply<double>(act, double(v)));
        }
      }
    });
  }

  void matrix_add(Queue q, DType t, std::int64_t rows, std::int64_t cols, double alpha, const void* a,
                  std::int64_t lda, double beta, const void* b, std::int64_t ldb, void* c, std::int64_t ldc) override {
    check_queue(q);
    dispatch_float(t, [&]<class T>() {
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j = 0; j < cols; ++j) {
          static_cast<T*>(c)[r * ldc + j] = T(alpha * double(static_cast<const T*>(a)[r * lda + j]) +
                                              beta * double(static_cast<const T*>(b)[r * ldb + j]));
        }
      }
    });
  }

  void transpose(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* a, std::int64_t lda, void* out,
                 std::int64_t ldo) override {
    check_queue(q);
    dispatch_any(t, [&]<class T>() {
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t c = 0; c < cols; ++c) static_cast<T*>(out)[c * ldo + r] = static_cast<const T*>(a)[r * lda + c];
      }
    });
  }

  void gather_rows(Queue q, DType t, std::int64_t rows, std::int64_t cols, const std::int32_t* index,
                   std::int64_t x_rows, const void* x, std::int64_t ldx, void* out, std::int64_t ldo) override {
    check_queue(q);
    dispatch_any(t, [&]<class T>() {
      const T missing = from<T>(std::is_same_v<T, std::int32_t> ? -1.0 : std::nan(""));
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t src = index[r];
        for (std::int64_t c = 0; c < cols; ++c) {
          static_cast<T*>(out)[r * ldo + c] =
              src >= 0 && src < x_rows ? static_cast<const T*>(x)[src * ldx + c] : missing;
        }
      }
    });
  }

  void convert(Queue q, DType from_type, DType to_type, std::size_t n, const void* x, void* out) override {
    check_queue(q);
    dispatch_real(from_type, [&]<class S>() {
      dispatch_real(to_type, [&]<class D>() {
        for (std::size_t i = 0; i < n; ++i) static_cast<D*>(out)[i] = math::convert_value<D>(static_cast<const S*>(x)[i]);
      });
    });
  }

  void adam_step(Queue q, DType t, std::size_t n, const AdamParams& p, void* w, const void* g, void* m,
                 void* v) override {
    check_queue(q);
    const double c1 = 1 - std::pow(p.beta1, double(p.t)), c2 = 1 - std::pow(p.beta2, double(p.t));
    dispatch_float(t, [&]<class T>() {
      for (std::size_t i = 0; i < n; ++i) {
        const double gi = static_cast<const T*>(g)[i];
        const double mi = p.beta1 * double(static_cast<T*>(m)[i]) + (1 - p.beta1) * gi;
        const double vi = p.beta2 * double(static_cast<T*>(v)[i]) + (1 - p.beta2) * gi * gi;
        const double wi = static_cast<T*>(w)[i];
        static_cast<T*>(m)[i] = T(mi);
        static_cast<T*>(v)[i] = T(vi);
        static_cast<T*>(w)[i] = T(wi - p.learning_rate * p.weight_decay * wi -
                                  p.learning_rate * (mi / c1) / (std::sqrt(vi / c2) + p.epsilon));
      }
    });
  }

  std::vector<MatmulTier> matmul_tiers(DType) const override { return {MatmulTier::naive}; }
  MatmulTier choose_matmul_tier(const GemmArgs&) const override { return MatmulTier::naive; }

  // C (m, n) = alpha * op(A) (m, k) * op(B) (k, n) + beta * C; products summed in double.
  void matmul(Queue q, const GemmArgs& g) override {
    check_queue(q);
    dispatch_any(g.ab_type, [&]<class TA>() {
      dispatch_float(g.c_type, [&]<class TC>() {
        const auto* a = static_cast<const TA*>(g.a);
        const auto* b = static_cast<const TA*>(g.b);
        auto* c = static_cast<TC*>(g.c);
        for (std::int64_t i = 0; i < g.m; ++i) {
          for (std::int64_t j = 0; j < g.n; ++j) {
            double acc = 0;
            for (std::int64_t p = 0; p < g.k; ++p) {
              const double aip = to<double>(g.trans_a == Transpose::no ? a[i * g.lda + p] : a[p * g.lda + i]);
              const double bpj = to<double>(g.trans_b == Transpose::no ? b[p * g.ldb + j] : b[j * g.ldb + p]);
              acc += aip * bpj;
            }
            TC& cij = c[i * g.ldc + j];
            cij = TC(g.beta == 0 ? g.alpha * acc : g.alpha * acc + g.beta * double(cij));
          }
        }
      });
    });
  }

  void reduce(Queue q, ReduceOp op, DType t, std::size_t n, const void* x, void* result, ReduceVariant) override {
    check_queue(q);
    dispatch_numeric(t, [&]<class T>() {
      const T* v = static_cast<const T*>(x);
      // Each op as its row of the op table says: argmax by its rule; the others accumulate
      // element(x) with combine from the identity, in double (i32 in int32, wrapping), then finish.
      visit(op, [&]<class Row>(Row) {
        if constexpr (Row::index_result) {
          std::size_t best = 0;
          for (std::size_t i = 1; i < n; ++i) {
            if (math::argmax_prefers(v[best], best, v[i], i)) best = i;
          }
          *static_cast<std::int32_t*>(result) = static_cast<std::int32_t>(best);
        } else {
          using Acc = std::conditional_t<std::is_same_v<T, std::int32_t>, std::int32_t, double>;
          Acc acc = Row::template identity<Acc>();
          for (std::size_t i = 0; i < n; ++i) acc = Row::combine(acc, Row::element(Acc(v[i])));
          *static_cast<T*>(result) = T(Row::finish(acc));
        }
      });
    });
  }

  void dot(Queue q, DType t, std::size_t n, const void* x, const void* y, void* result) override {
    check_queue(q);
    dispatch_float(t, [&]<class T>() {
      double acc = 0;
      for (std::size_t i = 0; i < n; ++i) acc += double(static_cast<const T*>(x)[i]) * double(static_cast<const T*>(y)[i]);
      *static_cast<T*>(result) = T(acc);
    });
  }

  void reduce_rows(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x,
                   std::int64_t ldx, void* out) override {
    reduce_axis(q, op, t, rows, cols, x, ldx, 1, out);
  }
  void reduce_cols(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x,
                   std::int64_t ldx, void* out) override {
    // A column of x is a row of x^T: same loop with the strides swapped.
    reduce_axis(q, op, t, cols, rows, x, 1, ldx, out);
  }

  void scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out, ScanVariant) override {
    check_queue(q);
    dispatch_numeric(t, [&]<class T>() {
      const T* v = static_cast<const T*>(x);
      T* o = static_cast<T*>(out);
      if constexpr (std::is_same_v<T, std::int32_t>) {
        int acc = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const int xi = v[i];  // read before writing: out may alias x
          if (kind == ScanKind::exclusive) o[i] = acc;
          acc = math::wrap_add(acc, xi);
          if (kind == ScanKind::inclusive) o[i] = acc;
        }
      } else {
        double acc = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const double xi = v[i];
          if (kind == ScanKind::exclusive) o[i] = T(acc);
          acc += xi;
          if (kind == ScanKind::inclusive) o[i] = T(acc);
        }
      }
    });
  }

  void softmax_cross_entropy(Queue q, DType t, std::int64_t rows, std::int64_t cols, const void* logits,
                             std::int64_t ld_logits, const std::int32_t* labels, void* probs, std::int64_t ld_probs,
                             void* losses) override {
    check_queue(q);
    dispatch_float(t, [&]<class T>() {
      for (std::int64_t r = 0; r < rows; ++r) {
        const T* x = static_cast<const T*>(logits) + r * ld_logits;
        T* p = static_cast<T*>(probs) + r * ld_probs;
        double m = x[0];
        for (std::int64_t c = 1; c < cols; ++c) m = math::nan_max(m, double(x[c]));
        double s = 0;
        for (std::int64_t c = 0; c < cols; ++c) s += std::exp(double(x[c]) - m);
        const double log_s = std::log(s);
        for (std::int64_t c = 0; c < cols; ++c) p[c] = T(std::exp(double(x[c]) - m) / s);
        const std::int32_t label = labels[r];
        static_cast<T*>(losses)[r] = (label >= 0 && label < cols) ? T(log_s - (double(x[label]) - m))
                                                                 : std::numeric_limits<T>::quiet_NaN();
      }
    });
  }

  void mse(Queue q, DType t, std::size_t n, const void* a, const void* b, void* result) override {
    check_queue(q);
    dispatch_float(t, [&]<class T>() {
      double acc = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double d = double(static_cast<const T*>(a)[i]) - double(static_cast<const T*>(b)[i]);
        acc += d * d;
      }
      *static_cast<T*>(result) = T(acc / double(n));
    });
  }

 private:
  // out[r] = op over x[r * row_stride + c * col_stride] for c in [0, cols).
  void reduce_axis(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x,
                   std::int64_t row_stride, std::int64_t col_stride, void* out) {
    check_queue(q);
    dispatch_numeric(t, [&]<class T>() {
      const T* v = static_cast<const T*>(x);
      for (std::int64_t r = 0; r < rows; ++r) {
        const T* row = v + r * row_stride;
        if (op == ReduceOp::max) {
          T best = row[0];
          for (std::int64_t c = 1; c < cols; ++c) best = math::nan_max(best, row[c * col_stride]);
          static_cast<T*>(out)[r] = best;
        } else if constexpr (std::is_same_v<T, std::int32_t>) {
          int acc = 0;
          for (std::int64_t c = 0; c < cols; ++c) acc = math::wrap_add(acc, row[c * col_stride]);
          static_cast<T*>(out)[r] = acc;
        } else {
          double acc = 0;
          for (std::int64_t c = 0; c < cols; ++c) acc += double(row[c * col_stride]);
          static_cast<T*>(out)[r] = T(acc);
        }
      }
    });
  }
};

}  // namespace

namespace detail {
int reference_device_count(std::string&) { return 1; }
std::shared_ptr<Backend> make_reference_backend(int) { return make_backend<ReferenceBackend>(); }
}  // namespace detail

}  // namespace tandem
