// The openmp backend's elementwise, reduction, scan and softmax kernels, compiled once per ISA
// (kernels_<isa>.cpp over kernels.inl: generic x86-64, AVX2 + FMA, AVX-512) and chosen at run
// time like the matmul micro-kernel: the widest this CPU runs that TANDEM_CPU_ISA allows. The
// OpenMPBackend methods check their queue and call through this table; arguments were checked
// by the algorithms layer. `stream_from`: the bytes an op moves (its distinct inputs and output
// together) from which stores go in interleaved runs, streamed where store_tuning() says so
// (OpenMPBackend::stream_from_bytes); the scan streams from there unconditionally (its caller
// passes SIZE_MAX where stores are plain).
#pragma once

#include <cstdint>
#include <vector>

#include "openmp_backend.hpp"

namespace tandem::openmp {

struct CpuKernels {
  const char* isa;  // "avx512", "avx2", "generic"
  void (*binary)(BinaryOp op, DType t, std::size_t n, const void* x, const void* y, void* out, std::size_t stream_from);
  void (*unary)(UnaryOp op, DType t, std::size_t n, const void* x, void* out, std::size_t stream_from);
  void (*axpy)(DType t, std::size_t n, double alpha, const void* x, void* y, std::size_t stream_from);
  void (*scale)(DType t, std::size_t n, double alpha, const void* x, void* out, std::size_t stream_from);
  void (*fill)(DType t, std::size_t n, double value, void* out, std::size_t stream_from);
  void (*add_row_vector)(DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                         const void* bias, void* out, std::int64_t ldo);
  void (*bias_activation)(DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                          const void* bias, UnaryOp act, void* z, std::int64_t ldz, void* out, std::int64_t ldo);
  void (*matrix_add)(DType t, std::int64_t rows, std::int64_t cols, double alpha, const void* a, std::int64_t lda,
                     double beta, const void* b, std::int64_t ldb, void* c, std::int64_t ldc);
  void (*transpose)(DType t, std::int64_t rows, std::int64_t cols, const void* a, std::int64_t lda, void* out,
                    std::int64_t ldo);
  void (*gather_rows)(DType t, std::int64_t rows, std::int64_t cols, const std::int32_t* index, std::int64_t x_rows,
                      const void* x, std::int64_t ldx, void* out, std::int64_t ldo);
  void (*convert)(DType from, DType to, std::size_t n, const void* x, void* out);
  void (*adam_step)(DType t, std::size_t n, const AdamParams& p, void* w, const void* g, void* m, void* v);
  // The sums read ahead as `prefetch` says (prefetch.hpp); min, max and argmax do not prefetch.
  void (*reduce)(ReduceOp op, DType t, std::size_t n, const void* x, void* result, ReadPrefetch prefetch);
  void (*dot)(DType t, std::size_t n, const void* x, const void* y, void* result, ReadPrefetch prefetch);
  void (*mse)(DType t, std::size_t n, const void* a, const void* b, void* result, ReadPrefetch prefetch);
  void (*reduce_rows)(ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                      void* out);
  void (*reduce_cols)(ReduceOp op, DType t, std::int64_t rows, std::int64_t cols, const void* x, std::int64_t ldx,
                      void* out);
  void (*softmax_cross_entropy)(DType t, std::int64_t rows, std::int64_t cols, const void* logits,
                                std::int64_t ld_logits, const std::int32_t* labels, void* probs, std::int64_t ld_probs,
                                void* losses);
  void (*scan)(ScanKind kind, DType t, std::size_t n, const void* x, void* out, std::size_t stream_from,
               ReadPrefetch prefetch);
  // The store calibration's loops (tuning.cpp), in this ISA's code.
  std::vector<StoreVariant> (*measure_store_variants)(const CalibrationArrays& arrays, int reps);
};

CpuKernels cpu_kernels_avx512();
CpuKernels cpu_kernels_avx2();
CpuKernels cpu_kernels_generic();

// The widest this CPU runs and TANDEM_CPU_ISA allows.
const CpuKernels& cpu_kernels();

}  // namespace tandem::openmp
