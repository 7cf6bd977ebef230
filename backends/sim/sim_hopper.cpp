// The simulator's model of Hopper's mbarriers, TMA copies and wgmma (sim_hopper.hpp says what it models
// and checks).
#include "sim_hopper.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "sim_internal.hpp"
#include "tandem/dtype.hpp"
#include "tandem/errors.hpp"

namespace tandem::sim {

using namespace internal;

namespace {

constexpr std::int64_t kTxLimit = (std::int64_t(1) << 20) - 1;  // PTX: the transaction count's range
constexpr unsigned kIdleRounds = 16;                   // rounds with waits and nothing else before a block is hung
constexpr const char* kWaiting = "mbarrier try_wait";  // Fiber::access of a thread switched out there

// Byte offset of p in b's shared memory, or fail: `what` must be in shared memory.
std::size_t shared_offset(const Block& b, const void* p, std::size_t bytes, const char* what) {
  const auto* c = static_cast<const unsigned char*>(p);
  const unsigned char* base = b.shared.data();
  if (c < base || c + bytes > base + b.shared.size()) {
    fail(b, std::string(what) + " is not in the block's shared memory");
  }
  return static_cast<std::size_t>(c - base);
}

std::string where_text(const Fiber& f, const std::source_location& w) {
  return "thread " + text(f.tid) + " at " + text(w);
}

MBarrierState& state_of(Block& b, const Fiber& f, const void* bar, const std::source_location& w, const char* op) {
  const auto it = b.mbarriers.find(bar);
  if (it == b.mbarriers.end()) {
    const std::size_t offset = shared_offset(b, bar, 8, "an mbarrier");
    fail(b, where_text(f, w) + ": " + op + " on an mbarrier at shared offset " + std::to_string(offset) +
                " that was never initialized (mbarrier_init)");
  }
  return it->second;
}

void add_tx(Block& b, MBarrierState& m, std::int64_t bytes, const std::string& who) {
  m.tx += bytes;
  if (m.tx > kTxLimit || m.tx < -kTxLimit) {
    fail(b, who + ": the mbarrier's transaction count reached " + std::to_string(m.tx) + " bytes, past the +-" +
                std::to_string(kTxLimit) + " a phase can hold");
  }
}

// Completes the phase when its arrivals and bytes are all in.
void settle(Block& b, MBarrierState& m) {
  ++b.mbarrier_events;
  if (m.pending == 0 && m.tx == 0) {
    ++m.phase;
    m.pending = m.arrivals;
  }
}

std::string describe(const Block& b, const void* bar) {
  const auto it = b.mbarriers.find(bar);
  const auto offset = static_cast<std::size_t>(static_cast<const unsigned char*>(bar) - b.shared.data());
  std::string s = "the mbarrier at shared offset " + std::to_string(offset);
  if (it == b.mbarriers.end()) return s;
  const MBarrierState& m = it->second;
  return s + " (phase " + std::to_string(m.phase) + ", parity " + std::to_string(m.phase % 2) + ": " +
         std::to_string(m.pending) + " of " + std::to_string(m.arrivals) + " arrivals and " + std::to_string(m.tx) +
         " transaction bytes to come)";
}

}  // namespace

TensorMap2D make_tensor_map_2d(const void* base, std::size_t elem_bytes, std::uint64_t width, std::uint64_t height,
                               std::uint64_t row_bytes, std::uint32_t box_width, std::uint32_t box_height,
                               gpu::Swizzle swizzle) {
  const std::string at = "tensor map: ";
  if (elem_bytes != 1 && elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8) {
    throw InvalidArgument(at + "elements of " + std::to_string(elem_bytes) + " bytes (1, 2, 4 or 8)");
  }
  if (base == nullptr || reinterpret_cast<std::uintptr_t>(base) % 16 != 0) {
    throw InvalidArgument(at + "the tensor's address must be a non-null multiple of 16 bytes");
  }
  if (width == 0 || height == 0 || width >= (std::uint64_t(1) << 32) || height >= (std::uint64_t(1) << 32)) {
    throw InvalidArgument(at + "dimensions of 1 to 2^32 - 1 elements");
  }
  if (row_bytes % 16 != 0 || row_bytes < width * elem_bytes || row_bytes >= (std::uint64_t(1) << 40)) {
    throw InvalidArgument(at + "a row stride of " + std::to_string(row_bytes) +
                          " bytes: it must be a multiple of 16, below 2^40 and at least a row's " +
                          std::to_string(width * elem_bytes) + " bytes");
  }
  if (box_width == 0 || box_height == 0 || box_width > 256 || box_height > 256) {
    throw InvalidArgument(at + "boxes of 1 to 256 elements a side");
  }
  const std::uint64_t box_row = std::uint64_t(box_width) * elem_bytes;
  if (box_row % 16 != 0) {
    throw InvalidArgument(at + "a box row of " + std::to_string(box_row) + " bytes: it must be a multiple of 16");
  }
  const std::uint64_t span = swizzle == gpu::Swizzle::bytes128  ? 128
                             : swizzle == gpu::Swizzle::bytes64 ? 64
                             : swizzle == gpu::Swizzle::bytes32 ? 32
                                                                : 0;
  if (span != 0 && box_row > span) {
    throw InvalidArgument(at + "a box row of " + std::to_string(box_row) + " bytes under a " + std::to_string(span) +
                          "-byte swizzle: a swizzled box row is at most the swizzle's span");
  }
  return TensorMap2D{static_cast<const unsigned char*>(base),
                     static_cast<std::uint32_t>(elem_bytes),
                     width,
                     height,
                     row_bytes,
                     box_width,
                     box_height,
                     swizzle};
}

void mbarrier_init(void* bar, std::uint32_t arrivals, const std::source_location& where) {
  Running& r = running();
  Block& b = *r.block;
  const std::size_t offset = shared_offset(b, bar, 8, "an mbarrier");
  if (offset % 8 != 0) fail(b, where_text(*r.fiber, where) + ": an mbarrier at a shared offset not a multiple of 8");
  if (arrivals == 0 || arrivals > kTxLimit) {
    fail(b, where_text(*r.fiber, where) + ": an mbarrier expecting " + std::to_string(arrivals) +
                " arrivals (1 to 2^20 - 1)");
  }
  MBarrierState m;
  m.arrivals = m.pending = arrivals;
  m.initializer = r.fiber->rank;
  b.mbarriers[bar] = m;
  ++b.mbarrier_events;
}

void fence_mbarrier_init(const std::source_location&) {
  Running& r = running();
  for (auto& [bar, m] : r.block->mbarriers) m.fenced = m.fenced || m.initializer == r.fiber->rank;
}

void mbarrier_arrive(void* bar, std::uint32_t tx_bytes, const std::source_location& where) {
  Running& r = running();
  Block& b = *r.block;
  MBarrierState& m = state_of(b, *r.fiber, bar, where, tx_bytes > 0 ? "arrive_expect_tx" : "arrive");
  if (adversarial) adversary_fence(Scope::block, where);  // release: what came before shows first
  add_tx(b, m, tx_bytes, where_text(*r.fiber, where));
  if (m.pending == 0) {
    fail(b, where_text(*r.fiber, where) + ": an arrival on " + describe(b, bar) +
                " beyond its count (more arrivals in a phase than it was initialized with)");
  }
  --m.pending;
  settle(b, m);
}

bool mbarrier_try_wait_parity(void* bar, std::uint32_t parity, const std::source_location& where) {
  Running& r = running();
  Block& b = *r.block;
  Fiber& f = *r.fiber;
  if (parity > 1) fail(b, where_text(f, where) + ": try_wait on parity " + std::to_string(parity) + " (0 or 1)");
  const auto done = [&] { return state_of(b, f, bar, where, "try_wait").phase % 2 != parity; };
  if (!done()) {
    // Switched out, as a GPU suspends a waiting thread: the others run, copies land.
    ++b.mbarrier_waits;
    f.mbarrier = bar;
    f.parity = parity;
    f.where = where;
    f.access = kWaiting;
    f.state = State::ready;
    suspend(r);
    f.access = nullptr;
    if (!done()) return false;
  }
  f.mbarrier = nullptr;
  if (adversarial) adversary_fence(Scope::block, where);  // acquire: what the arrivals ordered shows
  return true;
}

void tma_load_2d(void* dst, const TensorMap2D& map, std::int32_t x, std::int32_t y, void* bar,
                 const std::source_location& where) {
  Running& r = running();
  Block& b = *r.block;
  const std::string who = where_text(*r.fiber, where);
  if (map.base == nullptr) fail(b, who + ": a TMA copy through a tensor map that make_tensor_map_2d did not make");
  const std::size_t row = std::size_t(map.box_width) * map.elem_bytes;
  const std::size_t bytes = row * map.box_height;
  // A swizzle moves bytes within their 128-byte line: the last line may be filled past the box.
  const std::size_t offset = shared_offset(b, dst, (bytes + 127) / 128 * 128, "a TMA copy's destination box");
  if (offset % 128 != 0) {
    fail(b, who + ": a TMA copy into shared offset " + std::to_string(offset) + ", not a multiple of 128 bytes");
  }
  if (!state_of(b, *r.fiber, bar, where, "a TMA copy's completion").fenced) {
    fail(b, who + ": a TMA copy completing on " + describe(b, bar) +
                ", whose init its thread has not fenced for the TMA unit (fence_mbarrier_init after mbarrier_init)");
  }
  unsigned char* shared = b.shared.data();
  AsyncCopy copy;
  copy.round = b.rounds;
  copy.where = where;
  // Reads global memory and writes the box when it lands (not now): what it copies is what is there then.
  copy.land = [&b, shared, map, x, y, bar, offset, row, bytes, who] {
    for (std::uint32_t i = 0; i < map.box_height; ++i) {
      const std::int64_t gy = std::int64_t(y) + i;
      for (std::size_t c = 0; c < row; c += map.elem_bytes) {
        const std::int64_t gx = std::int64_t(x) + std::int64_t(c / map.elem_bytes);
        unsigned char* to = shared + gpu::swizzled(static_cast<std::uint32_t>(offset + i * row + c), map.swizzle);
        const bool in = gx >= 0 && gy >= 0 && std::uint64_t(gx) < map.width && std::uint64_t(gy) < map.height;
        if (in) {
          std::memcpy(to, map.base + std::uint64_t(gy) * map.row_bytes + std::uint64_t(gx) * map.elem_bytes,
                      map.elem_bytes);
        } else {
          std::memset(to, 0, map.elem_bytes);
        }
      }
    }
    const auto it = b.mbarriers.find(bar);
    if (it == b.mbarriers.end()) fail(b, who + ": the TMA copy's mbarrier was gone when the copy landed");
    add_tx(b, it->second, -static_cast<std::int64_t>(bytes), who + " (the copy landing)");
    settle(b, it->second);
  };
  b.copies.push_back(std::move(copy));
}

std::uint32_t shared_window_address(const void* p, const std::source_location&) {
  return static_cast<std::uint32_t>(shared_offset(*running().block, p, 1, "an address given to cvta.to.shared"));
}

namespace {

// What a wgmma descriptor says of an operand in shared memory: element (row, k) of its k16 slice
// (row < 64 for A, < N for B), K-major or (transposed) M/N-major.
struct Operand {
  std::uint32_t start, leading, stride;  // bytes
  unsigned swizzle;                      // 0 none, 1 128B, 2 64B, 3 32B
  bool mn_major;
};

Operand decode(const Block& b, const Fiber& f, std::uint64_t desc, bool mn_major, const char* which,
               const std::source_location& w) {
  Operand o{static_cast<std::uint32_t>(desc & 0x3FFF) << 4, static_cast<std::uint32_t>((desc >> 16) & 0x3FFF) << 4,
            static_cast<std::uint32_t>((desc >> 32) & 0x3FFF) << 4, static_cast<unsigned>(desc >> 62), mn_major};
  if (((desc >> 49) & 7) != 0) {
    fail(b, where_text(f, w) + ": wgmma's " + which +
                " descriptor has a matrix base offset (bits 49-51), which the simulator does not model: start "
                "swizzled operands at a multiple of their pattern (1024 bytes for 128B)");
  }
  return o;
}

// The byte address of element (row, k) of the operand, after its swizzle. PTX's canonical layouts:
//  - K-major, unswizzled: 8 x 16-byte core matrices (8 rows of 8 k), `leading` bytes apart along K
//    and `stride` along the rows; swizzled: rows as wide as the pattern (32, 64, 128 bytes) along
//    K, each 8-row group `stride` bytes on.
//  - M/N-major, unswizzled: core matrices of 8 k rows holding 8 elements of the M/N dimension
//    each (16 bytes), `leading` bytes apart along K and `stride` along M/N; swizzled: k rows as
//    wide as the pattern along M/N, each 8-row group of k `stride` bytes on, each pattern-wide
//    run of M/N `leading` bytes on.
std::uint32_t element_at(const Operand& o, std::uint32_t row, std::uint32_t k) {
  static constexpr gpu::Swizzle kinds[] = {gpu::Swizzle::none, gpu::Swizzle::bytes128, gpu::Swizzle::bytes64,
                                           gpu::Swizzle::bytes32};
  static constexpr std::uint32_t widths[] = {16, 128, 64, 32};  // bytes of a row of the pattern
  if (o.mn_major) {
    if (o.swizzle == 0) return o.start + (row / 8) * o.stride + (k / 8) * o.leading + (k % 8) * 16 + (row % 8) * 2;
    const std::uint32_t run = widths[o.swizzle] / 2;  // elements of M/N in a row of the pattern
    return gpu::swizzled(
        o.start + (row / run) * o.leading + (k / 8) * o.stride + (k % 8) * widths[o.swizzle] + (row % run) * 2,
        kinds[o.swizzle]);
  }
  if (o.swizzle == 0) return o.start + (row / 8) * o.stride + (k / 8) * o.leading + (row % 8) * 16 + (k % 8) * 2;
  return gpu::swizzled(o.start + (row / 8) * o.stride + (row % 8) * widths[o.swizzle] + k * 2, kinds[o.swizzle]);
}

float element(const Block& b, const Fiber& f, const Operand& o, std::uint32_t row, std::uint32_t k, bool bf16,
              const Wgmma& op, const char* which) {
  const std::uint32_t at = element_at(o, row, k);
  if (at + 2 > b.shared.size()) {
    fail(b, "thread " + text(f.tid) + ": the wgmma issued at " + text(op.where) + " reads its " + which +
                " operand's element (" + std::to_string(row) + ", " + std::to_string(k) + ") at shared address " +
                std::to_string(at) + ", past the block's shared memory");
  }
  std::uint16_t bits;
  std::memcpy(&bits, b.shared.data() + at, 2);
  return bf16 ? bfloat16::to_float(bits) : half::to_float(bits);
}

// The operands this thread's accumulators take, as shared memory holds them now: PTX lays D
// (64 x N) out over the warpgroup with warp w holding rows 16w..16w + 15, lane l the rows
// 16w + l / 4 (+ 8) and columns 8j + 2 (l % 4) (+ 1). A's two rows (16 values each), then B's
// columns (N / 4 of them, 16 each).
std::vector<float> operands_of(const Block& b, const Fiber& f, const Wgmma& op) {
  const Operand a = decode(b, f, op.desc_a, op.mn_major_a, "A", op.where);
  const Operand bm = decode(b, f, op.desc_b, op.mn_major_b, "B", op.where);
  const unsigned t = f.rank % 128, warp = t / 32, lane = t % 32;
  std::vector<float> v;
  v.reserve(32 + op.n * 4);
  for (unsigned h = 0; h < 2; ++h) {
    for (unsigned k = 0; k < 16; ++k) v.push_back(element(b, f, a, 16 * warp + lane / 4 + 8 * h, k, op.bf16, op, "A"));
  }
  for (unsigned j = 0; j < op.n / 8; ++j) {
    for (unsigned e = 0; e < 2; ++e) {
      for (unsigned k = 0; k < 16; ++k) v.push_back(element(b, f, bm, 8 * j + 2 * (lane % 4) + e, k, op.bf16, op, "B"));
    }
  }
  return v;
}

// Retires op for this thread: its operands must be what they were at its issue (shared memory
// written under an operation in flight is a race on a GPU: a stage refilled too early, or the
// operation issued before its stage had landed), then d[4j + 2h + e] (+)= row h times column (j, e).
void run_wgmma(const Block& b, const Fiber& f, const Wgmma& op) {
  const std::vector<float> now = operands_of(b, f, op);
  if (now.size() != op.operands.size() || !std::equal(now.begin(), now.end(), op.operands.begin(),
                                                      [](float x, float y) { return x == y || (x != x && y != y); })) {
    fail(b, "thread " + text(f.tid) + ": the shared memory the wgmma issued at " + text(op.where) +
                " reads changed while it was in flight (a stage written before wgmma_wait_group retired it, or the "
                "wgmma issued before its operands had landed)");
  }
  if (!op.before.empty()) std::copy(op.before.begin(), op.before.end(), op.d);
  for (unsigned j = 0; j < op.n / 8; ++j) {
    for (unsigned v = 0; v < 4; ++v) {
      const float* row = now.data() + 16 * (v / 2);
      const float* col = now.data() + 32 + 16 * (2 * j + v % 2);
      float sum = 0;
      for (unsigned k = 0; k < 16; ++k) sum += row[k] * col[k];
      float& d = op.d[4 * j + v];
      d = (op.accumulate ? d : 0.0f) + sum;
    }
  }
}

}  // namespace

void wgmma(float* d, unsigned n, std::uint64_t desc_a, std::uint64_t desc_b, bool accumulate, bool bf16,
           bool mn_major_a, bool mn_major_b, const std::source_location& where) {
  Running& r = running();
  Block& b = *r.block;
  Fiber& f = *r.fiber;
  if (b.warp != 32) {
    fail(b, where_text(f, where) +
                ": wgmma needs warps of 32 lanes (a warpgroup is four of them); this simulator's are " +
                std::to_string(b.warp));
  }
  if (n < 8 || n > 256 || n % 8 != 0)
    fail(b, where_text(f, where) + ": wgmma m64n" + std::to_string(n) + "k16 does not exist");
  decode(b, f, desc_a, mn_major_a, "A", where);
  decode(b, f, desc_b, mn_major_b, "B", where);
  Wgmma op{.d = d,
           .n = n,
           .before = {},
           .desc_a = desc_a,
           .desc_b = desc_b,
           .operands = {},
           .accumulate = accumulate,
           .bf16 = bf16,
           .mn_major_a = mn_major_a,
           .mn_major_b = mn_major_b,
           .where = where};
  const auto in_flight = [&](const Wgmma& o) { return o.d == d; };
  bool chained = std::any_of(f.wgmma_open.begin(), f.wgmma_open.end(), in_flight);
  for (const auto& group : f.wgmma_groups) chained = chained || std::any_of(group.begin(), group.end(), in_flight);
  if (!chained) {
    op.before.assign(d, d + n / 2);
    std::fill(d, d + n / 2, std::numeric_limits<float>::quiet_NaN());  // read before the wait: NaN
  }
  op.operands = operands_of(b, f, op);
  ++f.wgmma_issued;
  f.wgmma_open.push_back(std::move(op));
}

void wgmma_commit_group(const std::source_location&) {
  Fiber& f = *running().fiber;
  f.wgmma_groups.push_back(std::move(f.wgmma_open));
  f.wgmma_open.clear();
}

void wgmma_wait_group(unsigned pending, const std::source_location&) {
  Running& r = running();
  Fiber& f = *r.fiber;
  while (f.wgmma_groups.size() > pending) {
    for (const Wgmma& op : f.wgmma_groups.front()) run_wgmma(*r.block, f, op);
    f.wgmma_groups.erase(f.wgmma_groups.begin());
  }
}

namespace internal {

void hopper_round(Block& b) {
  ++b.rounds;
  // Each copy issued in an earlier round lands now or later (even odds), in a random order.
  for (std::size_t i = b.copies.size(); i > 1; --i) std::swap(b.copies[i - 1], b.copies[splitmix(b.rng) % i]);
  std::vector<AsyncCopy> staying;
  for (AsyncCopy& c : b.copies) {
    if (c.round < b.rounds && splitmix(b.rng) % 2 == 0) {
      c.land();
    } else {
      staying.push_back(std::move(c));
    }
  }
  b.copies = std::move(staying);
  // The hang watch: the last round had threads wait on mbarriers and nothing else happened.
  const std::uint64_t now = b.events + b.exchanges + b.mbarrier_events;
  // Only threads on mbarriers may be running: one switched out at a flag access (the adversary)
  // may wait for another block, which this block's rounds do not see.
  const bool only_mbarriers = std::all_of(
      b.fibers.begin(), b.fibers.end(), [](const Fiber& f) { return f.state != State::ready || f.access == kWaiting; });
  if (b.mbarrier_waits > 0 && now == b.seen && b.copies.empty() && only_mbarriers) {
    if (++b.idle_rounds >= kIdleRounds) {
      std::string waits;
      for (const Fiber& f : b.fibers) {
        if (f.state == State::ready && f.access == kWaiting) {
          waits += "\n    thread " + text(f.tid) + " at " + text(f.where) + " waits for the phase of parity " +
                   std::to_string(f.parity) + " of " + describe(b, f.mbarrier);
        }
      }
      fail(b, "hung: threads wait on mbarriers that no thread or copy in flight can complete:" + waits +
                  "\n  its threads:" + where_threads_are(b));
    }
  } else {
    b.idle_rounds = 0;
  }
  b.seen = now;
  b.mbarrier_waits = 0;
}

void hopper_block_ended(const Block& b) {
  // wgmma is warpgroup-wide (.sync.aligned): every thread of a warpgroup issues each one.
  for (std::size_t g = 0; g * 128 < b.fibers.size(); ++g) {
    const std::size_t end = std::min(b.fibers.size(), g * 128 + 128);
    for (std::size_t i = g * 128; i < end; ++i) {
      if (b.fibers[i].wgmma_issued != b.fibers[g * 128].wgmma_issued) {
        fail(b, "thread " + text(b.fibers[i].tid) + " issued " + std::to_string(b.fibers[i].wgmma_issued) +
                    " wgmma operations and thread " + text(b.fibers[g * 128].tid) + " of its warpgroup " +
                    std::to_string(b.fibers[g * 128].wgmma_issued) +
                    ": every thread of a warpgroup must issue each one (wgmma is .sync.aligned)");
      }
    }
  }
  for (const Fiber& f : b.fibers) {
    const Wgmma* first = f.wgmma_open.empty() ? nullptr : &f.wgmma_open.front();
    for (auto g = f.wgmma_groups.rbegin(); g != f.wgmma_groups.rend(); ++g) first = g->empty() ? first : &g->front();
    if (first != nullptr) {
      fail(b, "thread " + text(f.tid) + " ended with wgmma operations in flight (the first issued at " +
                  text(first->where) + "): commit them and wait (wgmma_wait_group<0>) before the end");
    }
  }
  if (b.copies.empty()) return;
  fail(b, "its threads ended with " + std::to_string(b.copies.size()) +
              " TMA copies in flight into its shared memory (the first issued at " + text(b.copies.front().where) +
              "): wait on their mbarriers before the block ends");
}

}  // namespace internal

}  // namespace tandem::sim
