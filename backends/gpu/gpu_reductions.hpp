// GpuBackend's reductions and scans (see gpu_backend.hpp, which includes this file at its end):
// each ReduceOp and variant to the reducer and the kernels of kernels/reduce.hpp and
// kernels/scan.hpp, with the scratch memory they need.
#pragma once

namespace tandem::gpu {

template <class Runtime>
void GpuBackend<Runtime>::reduce(Queue q, ReduceOp op, DType t, std::size_t n, const void* x, void* result,
                                 ReduceVariant variant) {
  detail::dispatch_numeric(t, [&]<class T>() {
    using namespace kernels;
    const T* xs = as<T>(x);
    switch (op) {
      case ReduceOp::sum:
        return run_reduce<SumOp<T>>(q, variant, Plain<T>{xs}, n, as<T>(result), Finish::value);
      case ReduceOp::min:
        return run_reduce<MinOp<T>>(q, variant, Plain<T>{xs}, n, as<T>(result), Finish::value);
      case ReduceOp::max:
        return run_reduce<MaxOp<T>>(q, variant, Plain<T>{xs}, n, as<T>(result), Finish::value);
      case ReduceOp::argmax:
        return run_reduce<ArgMaxOp<T>>(q, variant, Indexed<T>{xs}, n, static_cast<std::int32_t*>(result),
                                       Finish::value);
      case ReduceOp::norm2:
        if constexpr (std::is_floating_point_v<T>) {
          return run_reduce<SumOp<T>>(q, variant, Squares<T>{xs}, n, as<T>(result), Finish::sqrt);
        } else {
          throw DTypeMismatch("norm2: i32 is not offered; use f32 or f64");
        }
    }
  });
}

template <class Runtime>
void GpuBackend<Runtime>::reduce_rows(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols,
                                      const void* x, std::int64_t ldx, void* out) {
  detail::dispatch_numeric(t, [&]<class T>() {
    const unsigned grid = blocks(static_cast<std::size_t>(rows));
    if (op == ReduceOp::max) {
      launch(q, "reduce_rows", Dim3{grid, 1, 1}, block_1d(), 0, kernels::reduce_rows_kernel<kernels::MaxOp<T>>, rows,
             cols, as<T>(x), ldx, as<T>(out));
    } else {
      launch(q, "reduce_rows", Dim3{grid, 1, 1}, block_1d(), 0, kernels::reduce_rows_kernel<kernels::SumOp<T>>, rows,
             cols, as<T>(x), ldx, as<T>(out));
    }
  });
}

template <class Runtime>
void GpuBackend<Runtime>::reduce_cols(Queue q, ReduceOp op, DType t, std::int64_t rows, std::int64_t cols,
                                      const void* x, std::int64_t ldx, void* out) {
  detail::dispatch_numeric(t, [&]<class T>() {
    const unsigned grid =
        blocks(static_cast<std::size_t>((cols + kernels::kColumnsPerBlock - 1) / kernels::kColumnsPerBlock));
    const Dim3 block{kernels::kColumnsPerBlock, kernels::kRowGroups, 1};
    if (op == ReduceOp::max) {
      launch(q, "reduce_cols", Dim3{grid, 1, 1}, block, 0, kernels::reduce_cols_kernel<kernels::MaxOp<T>>, rows, cols,
             as<T>(x), ldx, as<T>(out));
    } else {
      launch(q, "reduce_cols", Dim3{grid, 1, 1}, block, 0, kernels::reduce_cols_kernel<kernels::SumOp<T>>, rows, cols,
             as<T>(x), ldx, as<T>(out));
    }
  });
}

template <class Runtime>
void GpuBackend<Runtime>::scan(Queue q, ScanKind kind, DType t, std::size_t n, const void* x, void* out,
                               ScanVariant variant) {
  if (n == 0) return;
  detail::dispatch_numeric(t, [&]<class T>() {
    const bool inclusive = kind == ScanKind::inclusive;
    const std::size_t tiles = (n + kernels::kScanTile - 1) / kernels::kScanTile;
    const Dim3 block{kernels::kScanThreads, 1, 1};
    if (variant == ScanVariant::single_block) {
      return launch(q, "scan_single_block", Dim3{}, block, 0, kernels::scan_single_block_kernel<T>, as<T>(x),
                    as<T>(out), n, inclusive);
    }
    if (tiles > (std::size_t(1) << 24) &&
        variant == ScanVariant::decoupled_lookback) {  // HIP: grid x block < 2^32 threads
      throw Unsupported("scan: the decoupled_lookback variant takes up to 2^35 elements; use variant three_pass");
    }
    // No variant named: three passes, unless the look-back's kernel files are those of a GPU run
    // whose check passed (cmake/TandemGpuSources.cmake): then the single pass below 2^20 elements.
    // A kernel that waits on other blocks is trusted only once hardware has run it (one that
    // passed the simulator hung on a GPU). Past 2^20 elements its tiles' waits cost more than
    // three passes' extra reads.
    const bool three_pass =
        variant == ScanVariant::three_pass ||
        (variant == ScanVariant::automatic && (!gpu_kernel_provenance().lookback_verified || n >= kScanThreePassFrom));
    if (three_pass) {
      Scratch sums(*this, q, tiles * sizeof(T));
      T* s = static_cast<T*>(sums.ptr);
      launch(q, "scan_tile_sums", Dim3{blocks(tiles), 1, 1}, block, 0, kernels::scan_tile_sums_kernel<T>, as<T>(x), n,
             s, tiles);
      launch(q, "scan_tile_prefixes", Dim3{}, block, 0, kernels::scan_single_block_kernel<T>, static_cast<const T*>(s),
             s, tiles, false);
      return launch(q, "scan_tiles", Dim3{blocks(tiles), 1, 1}, block, 0, kernels::scan_tiles_kernel<T>, as<T>(x),
                    as<T>(out), n, inclusive, static_cast<const T*>(s), tiles);
    }
    // decoupled look-back: the tile counter, then the slots (kernels::LookbackSlots), all zeroed:
    // [counter][16-byte aligned: a 64-bit word per tile] for 4-byte T,
    // [counter][status x tiles][16-byte aligned: aggregates x tiles][prefixes x tiles] otherwise
    using Slots = kernels::LookbackSlots<T>;
    const std::size_t slots_at = 16;
    const std::size_t flags_bytes =
        Slots::packed ? slots_at + tiles * sizeof(std::uint64_t) : slots_at + tiles * sizeof(unsigned);
    const std::size_t values_at = (flags_bytes + 15) / 16 * 16;
    Scratch scratch(*this, q, Slots::packed ? flags_bytes : values_at + 2 * tiles * sizeof(T));
    auto* base = static_cast<unsigned char*>(scratch.ptr);
    rt_.memset(stream(q), base, 0, flags_bytes);
    auto* counter = reinterpret_cast<unsigned*>(base);
    Slots slots{};
    if constexpr (Slots::packed) {
      slots.words = reinterpret_cast<std::uint64_t*>(base + slots_at);
    } else {
      slots.status = reinterpret_cast<unsigned*>(base + slots_at);
      slots.aggregates = reinterpret_cast<T*>(base + values_at);
      slots.prefixes = slots.aggregates + tiles;
    }
    launch(q, "scan_lookback", Dim3{static_cast<unsigned>(tiles), 1, 1}, block, 0, kernels::scan_lookback_kernel<T>,
           as<T>(x), as<T>(out), n, inclusive, slots, counter);
  });
}

template <class Runtime>
template <class R, class S, class Out>
void GpuBackend<Runtime>::run_reduce(Queue q, ReduceVariant variant, S src, std::size_t n, Out* result,
                                     kernels::Finish finish) {
  using Acc = typename R::Acc;
  const unsigned grid = blocks((n + 4 * kernels::kBlock - 1) / (4 * kernels::kBlock));
  if (variant == ReduceVariant::automatic || variant == ReduceVariant::single_pass) {
    Scratch scratch(*this, q, 16 + grid * sizeof(Acc));
    auto* ticket = static_cast<unsigned*>(scratch.ptr);
    rt_.memset(stream(q), ticket, 0, sizeof(unsigned));
    auto* partials = reinterpret_cast<Acc*>(static_cast<unsigned char*>(scratch.ptr) + 16);
    launch(q, "reduce_single_pass", Dim3{grid, 1, 1}, block_1d(), 0, kernels::reduce_single_pass_kernel<R, S, Out>, src,
           n, partials, ticket, result, finish);
    return;
  }
  const auto how = variant == ReduceVariant::shared_tree ? kernels::BlockReduce::shared_tree : kernels::BlockReduce::warp_shuffle;
  Scratch scratch(*this, q, grid * sizeof(Acc));
  auto* partials = static_cast<Acc*>(scratch.ptr);
  launch(q, "reduce_partials", Dim3{grid, 1, 1}, block_1d(), 0, kernels::reduce_partials_kernel<R, S>, src, n, partials,
         how);
  launch(q, "reduce_final", Dim3{}, block_1d(), 0, kernels::reduce_final_kernel<R, Out>,
         static_cast<const Acc*>(partials), grid, result, finish, n, how);
}

}  // namespace tandem::gpu
