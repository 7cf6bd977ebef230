// The adversary's litmus tests: small kernels that lean on an order, a visibility or a residency
// that a GPU does not promise must fail under it for some seed, and their correct versions must
// pass under every seed tried. Each bad kernel here once shipped, or nearly, in some form.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../backends/gpu/kernels/scan_lookback.hpp"
#include "tandem/gpu/kernel_api.hpp"
#include "tandem/tandem.hpp"

namespace {

using namespace tandem;
namespace g = tandem::gpu;

constexpr std::uint64_t kSeeds = 48;  // seeds tried per kernel: each bad one below fails within a few

Backend& sim_backend() { return get_backend("sim"); }

// How a litmus kernel orders its accesses.
enum class Order : int {
  none,          // relaxed (volatile) accesses only
  fences,        // a device fence after the writer's data and before the reader's data
  writer_fence,  // the writer fences, the reader does not
  block_fence,   // block-scope fences, which do not order for another block
  release,       // store_release of the flag, load_acquire of it
};

// Message passing: block 0 writes data then a flag; block 1 waits for the flag, then reads data.
// The data goes through flag accesses (plain 0), or as kernels write their results: a plain C++
// store, read with a flag load (plain 1) or a plain load (plain 2). A plain store waits in its
// thread's store buffer whatever the reader does, so there the writer's device fence (or a
// release store of the flag) is what makes the data visible first.
TANDEM_KERNEL void message_passing(unsigned* data, unsigned* flag, unsigned* seen, int order, int plain) {
  const auto o = static_cast<Order>(order);
  if (g::thread_rank() != 0) return;
  if (g::block_idx().x == 0) {
    if (plain != 0) {
      *data = 42u;
    } else {
      g::store_volatile(data, 42u);
    }
    if (o == Order::fences || o == Order::writer_fence) g::thread_fence();
    if (o == Order::block_fence) g::thread_fence_block();
    if (o == Order::release) {
      g::store_release(flag, 1u);
    } else {
      g::store_volatile(flag, 1u);
    }
  } else {
    while ((o == Order::release ? g::load_acquire(flag) : g::load_volatile(flag)) == 0u) {
    }
    if (o == Order::fences) g::thread_fence();
    if (o == Order::block_fence) g::thread_fence_block();
    *seen = plain == 2 ? *data : g::load_volatile(data);
  }
}

// Runs a two-value kernel under `kSeeds` seeds; counts the seeds whose result `bad` flags.
template <class Launch, class Bad>
int count_bad(Launch&& launch, Bad&& bad) {
  int n = 0;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    Buffer a(sim_backend(), DType::i32, 4), b(sim_backend(), DType::i32, 4);
    fill(a, 0.0);
    fill(b, 0.0);
    launch(seed, static_cast<unsigned*>(a.data()), static_cast<unsigned*>(b.data()));
    const auto x = a.to_vector<std::int32_t>(), y = b.to_vector<std::int32_t>();
    n += bad(x, y) ? 1 : 0;
  }
  return n;
}

int stale_messages(Order order) {
  return count_bad(
      [&](std::uint64_t seed, unsigned* a, unsigned* b) {
        // a[0] data, a[1] flag, b[0] what the reader saw
        sim::launch_adversarial(sim_backend(), {seed, 2}, {"message_passing", {2, 1, 1}, {32, 1, 1}}, message_passing, a, a + 1,
                                b, static_cast<int>(order), 0);
      },
      [](const auto&, const auto& seen) { return seen[0] != 42; });
}

int stale_plain_messages(Order order, bool plain_read) {
  return count_bad(
      [&](std::uint64_t seed, unsigned* a, unsigned* b) {
        sim::launch_adversarial(sim_backend(), {seed, 2}, {"message_passing", {2, 1, 1}, {32, 1, 1}}, message_passing,
                                a, a + 1, b, static_cast<int>(order), plain_read ? 2 : 1);
      },
      [](const auto&, const auto& seen) { return seen[0] != 42; });
}

// The single-pass reduction's ending (reduce.hpp): every block stores its partial with a plain
// store and takes a ticket; the last one sums the partials. Without the writer's fence between
// the partial and the ticket, the last block may read a partial from before its store.
TANDEM_KERNEL void last_block_sum(unsigned* partials, unsigned* ticket, unsigned* sum, int fenced, int plain_read) {
  TANDEM_SHARED(bool, last);
  if (g::thread_rank() == 0) {
    partials[g::block_idx().x] = g::block_idx().x + 1;
    if (fenced != 0) g::thread_fence();
    last = g::atomic_add(ticket, 1u) == g::grid_dim().x - 1;
  }
  g::sync_threads();
  if (!last || g::thread_rank() != 0) return;
  g::thread_fence();
  unsigned total = 0;
  for (unsigned i = 0; i < g::grid_dim().x; ++i) total += plain_read != 0 ? partials[i] : g::load_volatile(partials + i);
  *sum = total;
}

int wrong_sums(bool fenced, bool plain_read) {
  constexpr unsigned kBlocks = 6;
  int n = 0;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    Buffer partials(sim_backend(), DType::i32, kBlocks), ticket(sim_backend(), DType::i32, 1), sum(sim_backend(), DType::i32, 1);
    fill(partials, 0.0);
    fill(ticket, 0.0);
    fill(sum, 0.0);
    sim::launch_adversarial(sim_backend(), {seed, 3}, {"last_block_sum", {kBlocks, 1, 1}, {32, 1, 1}}, last_block_sum,
                            static_cast<unsigned*>(partials.data()), static_cast<unsigned*>(ticket.data()),
                            static_cast<unsigned*>(sum.data()), fenced ? 1 : 0, plain_read ? 1 : 0);
    n += sum.to_vector<std::int32_t>()[0] != std::int32_t(kBlocks * (kBlocks + 1) / 2) ? 1 : 0;
  }
  return n;
}

// Orders a GPU does promise within a block, with plain stores: each block has its own 4 slots.
// Thread 0 stores slot 0, a barrier, then slot 1 (in the same 8 bytes as slot 0); thread 1 reads
// slot 0 after the barrier. Thread 0 then stores slot 2 and lane 1 reads it after a sync_warp.
// Slot 3 is stored plainly, shown by a barrier, then rewritten with a flag store that is made
// visible while another block runs; a flag load of it after the next barrier sees one of the two
// stores, never the bytes from before them. Every seed must give 7, 7, 9, and 5 or 6.
TANDEM_KERNEL void block_orders(unsigned* slots, unsigned* seen) {
  unsigned* mine = slots + 4 * g::block_idx().x;
  unsigned* out = seen + 4 * g::block_idx().x;
  const unsigned t = g::thread_rank();
  if (t == 0) {
    mine[0] = 7u;
    mine[3] = 5u;
  }
  g::sync_threads();
  if (t == 0) {
    mine[1] = 8u;
    g::store_volatile(mine + 3, 6u);
  }
  if (t == 1) out[0] = mine[0];
  if (t == 0) mine[2] = 9u;
  g::sync_warp();
  if (t == 1) out[2] = mine[2];
  g::sync_threads();
  if (t == 1) {
    out[1] = mine[0];
    out[3] = g::load_volatile(mine + 3);
  }
}

int misordered_blocks() {
  constexpr unsigned kBlocks = 4;
  int n = 0;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    Buffer slots(sim_backend(), DType::i32, 4 * kBlocks), seen(sim_backend(), DType::i32, 4 * kBlocks);
    fill(slots, 0.0);
    fill(seen, 0.0);
    sim::launch_adversarial(sim_backend(), {seed, 3}, {"block_orders", {kBlocks, 1, 1}, {64, 1, 1}}, block_orders,
                            static_cast<unsigned*>(slots.data()), static_cast<unsigned*>(seen.data()));
    const auto v = seen.to_vector<std::int32_t>();
    bool bad = false;
    for (unsigned b = 0; b < kBlocks; ++b) {
      bad = bad || v[4 * b] != 7 || v[4 * b + 1] != 7 || v[4 * b + 2] != 9 || (v[4 * b + 3] != 5 && v[4 * b + 3] != 6);
    }
    n += bad ? 1 : 0;
  }
  return n;
}

// Store buffering: each block stores its flag, then reads the other's. Both reading 0 is allowed
// without fences and forbidden with them.
TANDEM_KERNEL void store_buffering(unsigned* flags, unsigned* seen, int fenced) {
  if (g::thread_rank() != 0) return;
  const unsigned me = g::block_idx().x;
  g::store_volatile(flags + me, 1u);
  if (fenced != 0) g::thread_fence();
  seen[me] = g::load_volatile(flags + (1 - me));
}

int both_zero(bool fenced) {
  return count_bad(
      [&](std::uint64_t seed, unsigned* a, unsigned* b) {
        sim::launch_adversarial(sim_backend(), {seed, 2}, {"store_buffering", {2, 1, 1}, {32, 1, 1}}, store_buffering, a, b,
                                fenced ? 1 : 0);
      },
      [](const auto&, const auto& seen) { return seen[0] == 0 && seen[1] == 0; });
}

// A chain of tiles in the look-back's two-array form: each block takes a ticket, waits for the
// previous ticket's flag, reads its inclusive value, and publishes its own (value, then flag).
// Without the fences a reader may see the flag before the value.
TANDEM_KERNEL void chain(unsigned* counter, unsigned* flags, unsigned* values, int fenced) {
  TANDEM_SHARED(unsigned, ticket);
  if (g::thread_rank() == 0) ticket = g::atomic_add(counter, 1u);
  g::sync_threads();
  if (g::thread_rank() != 0) return;
  const unsigned t = ticket;
  unsigned prefix = 0;
  if (t > 0) {
    while (g::load_volatile(flags + t - 1) == 0u) {
    }
    if (fenced != 0) g::thread_fence();
    prefix = g::load_volatile(values + t - 1);
  }
  g::store_volatile(values + t, prefix + 1);
  if (fenced != 0) g::thread_fence();
  g::store_volatile(flags + t, 1u);
}

int broken_chains(bool fenced) {
  constexpr unsigned kBlocks = 6;
  int n = 0;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    Buffer counter(sim_backend(), DType::i32, 1), flags(sim_backend(), DType::i32, kBlocks), values(sim_backend(), DType::i32, kBlocks);
    fill(counter, 0.0);
    fill(flags, 0.0);
    fill(values, 0.0);
    sim::launch_adversarial(sim_backend(), {seed, 3}, {"chain", {kBlocks, 1, 1}, {32, 1, 1}}, chain,
                            static_cast<unsigned*>(counter.data()), static_cast<unsigned*>(flags.data()),
                            static_cast<unsigned*>(values.data()), fenced ? 1 : 0);
    n += values.to_vector<std::int32_t>().back() != std::int32_t(kBlocks) ? 1 : 0;
  }
  return n;
}

// Block b waits for block b + 1 (by block index, not by a ticket taken at start): a block may wait
// for one that is not resident, and will never be while the waiters hold every slot.
TANDEM_KERNEL void wait_for_next_block(unsigned* flags, unsigned blocks, int by_ticket, unsigned* counter) {
  TANDEM_SHARED(unsigned, me);
  if (g::thread_rank() == 0) me = by_ticket != 0 ? blocks - 1 - g::atomic_add(counter, 1u) : g::block_idx().x;
  g::sync_threads();
  if (g::thread_rank() != 0) return;
  if (me + 1 < blocks) {
    while (g::load_volatile(flags + me + 1) == 0u) {
    }
  }
  g::thread_fence();
  g::store_volatile(flags + me, 1u);
}

// Which seeds hang (DeviceError naming the wait), out of kSeeds.
int hangs(bool by_ticket, std::string& first_report) {
  constexpr unsigned kBlocks = 5;
  int n = 0;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    Buffer flags(sim_backend(), DType::i32, kBlocks), counter(sim_backend(), DType::i32, 1);
    fill(flags, 0.0);
    fill(counter, 0.0);
    try {
      sim::launch_adversarial(sim_backend(), {seed, 2, 20000}, {"wait_for_next_block", {kBlocks, 1, 1}, {32, 1, 1}},
                              wait_for_next_block, static_cast<unsigned*>(flags.data()), kBlocks, by_ticket ? 1 : 0,
                              static_cast<unsigned*>(counter.data()));
    } catch (const DeviceError& e) {
      if (first_report.empty()) first_report = e.what();
      ++n;
    }
  }
  return n;
}

// What nvcc made of the look-back's lane search when it used std::countr_zero: in device code it
// became the bit width, so the lowest set lane of any non-zero ballot read as 64.
unsigned lowest_lane_as_nvcc_compiled(g::lane_mask m, unsigned none) { return m == 0 ? none : 64u; }
unsigned lowest_lane(g::lane_mask m, unsigned none) {
  const unsigned first = g::find_first_set(m);
  return first == 0 ? none : first - 1;
}

// The look-back's window walk (scan_lookback.hpp) over `tile` predecessors that have all published
// their inclusive prefix (flags[j] = 2, values[j] = j + 1), in the form that hung (bounded 0: the
// loop ends only when a lane finds the nearest prefix) or its bounded form.
TANDEM_KERNEL void lookback_walk(const unsigned* flags, const unsigned* values, unsigned tile, int bounded,
                                 int miscompiled, unsigned* out) {
  const unsigned lane = g::lane_id(), width = g::warp_size();
  unsigned prefix = 0;
  for (std::int64_t end = std::int64_t(tile) - 1; bounded == 0 || end >= 0; end -= width) {
    const std::int64_t j = end - std::int64_t(lane);
    const unsigned flag = j < 0 ? 2u : g::load_volatile(flags + j);
    unsigned value = j < 0 ? 0u : g::load_volatile(values + j);
    const g::lane_mask done = g::ballot(flag == 2u);
    const unsigned nearest = miscompiled != 0 ? lowest_lane_as_nvcc_compiled(done, width) : lowest_lane(done, width);
    if (lane > nearest) value = 0;
    for (unsigned d = width / 2; d > 0; d /= 2) value += g::shfl_down(value, d);
    prefix += value;
    if (nearest < width) break;
  }
  if (lane == 0) *out = prefix;
}

unsigned walk(bool bounded, bool miscompiled) {
  constexpr unsigned kTile = 40;
  std::vector<std::int32_t> flags(kTile, 2), values(kTile);
  for (unsigned j = 0; j < kTile; ++j) values[j] = std::int32_t(j + 1);
  Buffer f = Buffer::from(sim_backend(), flags), v = Buffer::from(sim_backend(), values), out(sim_backend(), DType::i32, 1);
  fill(out, 0.0);
  sim::launch_adversarial(sim_backend(), {7, 1, 50000}, {"lookback_walk", {1, 1, 1}, {32, 1, 1}}, lookback_walk,
                          static_cast<const unsigned*>(f.data()), static_cast<const unsigned*>(v.data()), kTile,
                          bounded ? 1 : 0, miscompiled ? 1 : 0, static_cast<unsigned*>(out.data()));
  return static_cast<unsigned>(out.to_vector<std::int32_t>()[0]);
}

// The library's look-back scan kernel, launched as gpu_reductions.hpp does, under one seed and
// residency: true when its inclusive scan of x (small integers, so every order of additions gives
// the same bits) is exact. T = int32 publishes through packed 64-bit words, double through the
// fenced two-array slots.
template <class T>
bool lookback_exact(std::size_t n, std::uint64_t seed, unsigned resident) {
  using namespace tandem::gpu::kernels;
  const std::size_t tiles = (n + kScanTile - 1) / kScanTile;
  std::vector<T> h(n);
  for (std::size_t i = 0; i < n; ++i) h[i] = T(std::int32_t(i * 7919 % 13) - 6);
  const DType t = sizeof(T) == 4 ? DType::i32 : DType::f64;
  Buffer x = Buffer::from(sim_backend(), h), out(sim_backend(), t, n);
  Buffer counter(sim_backend(), DType::i32, 1), words(sim_backend(), DType::f64, tiles);
  Buffer status(sim_backend(), DType::i32, tiles), values(sim_backend(), DType::f64, 2 * tiles);
  fill(counter, 0.0);
  fill(words, 0.0);  // 0.0: all bits zero
  fill(status, 0.0);
  LookbackSlots<T> slots{};
  slots.words = static_cast<std::uint64_t*>(words.data());
  slots.status = static_cast<unsigned*>(status.data());
  slots.aggregates = static_cast<T*>(values.data());
  slots.prefixes = slots.aggregates + tiles;
  sim::launch_adversarial(sim_backend(), {seed, resident}, {"scan_lookback", {unsigned(tiles), 1, 1}, {kScanThreads, 1, 1}},
                          scan_lookback_kernel<T>, static_cast<const T*>(x.data()), static_cast<T*>(out.data()), n, true,
                          slots, static_cast<unsigned*>(counter.data()));
  const auto got = out.to_vector<T>();
  T acc = T(0);
  for (std::size_t i = 0; i < n; ++i) {
    acc += h[i];
    if (got[i] != acc) return false;
  }
  return true;
}

}  // namespace

TEST_SUITE("sim adversary") {
  TEST_CASE("the look-back scan kernel is exact under every seed and residency tried, in both slot layouts") {
    for (std::uint64_t seed = 1; seed <= 16; ++seed) {
      const unsigned resident = 1 + unsigned(seed % 4);
      CHECK_MESSAGE(lookback_exact<std::int32_t>(9 * 2048 + 5, seed, resident), "i32, seed ", seed);
      CHECK_MESSAGE(lookback_exact<double>(9 * 2048 + 5, seed, resident), "f64, seed ", seed);
    }
  }

  TEST_CASE("message passing: stale data without fences, never with device fences or release/acquire") {
    CHECK(stale_messages(Order::none) > 0);
    CHECK(stale_messages(Order::writer_fence) > 0);  // the reader's loads reorder too
    CHECK(stale_messages(Order::block_fence) > 0);   // a block fence orders for the block only
    CHECK(stale_messages(Order::fences) == 0);
    CHECK(stale_messages(Order::release) == 0);
  }

  TEST_CASE("plain stores: data stored before a flag is stale without the writer's fence, never with it") {
    for (const bool plain_read : {false, true}) {
      CAPTURE(plain_read);
      CHECK(stale_plain_messages(Order::none, plain_read) > 0);
      CHECK(stale_plain_messages(Order::block_fence, plain_read) > 0);
      CHECK(stale_plain_messages(Order::writer_fence, plain_read) == 0);
      CHECK(stale_plain_messages(Order::release, plain_read) == 0);
    }
  }

  TEST_CASE("plain stores: what barriers and sync_warp order within a block is never seen out of order") {
    CHECK(misordered_blocks() == 0);
  }

  TEST_CASE("the single-pass reduction's last block reads stale partials without the writer's fence") {
    for (const bool plain_read : {false, true}) {
      CAPTURE(plain_read);
      CHECK(wrong_sums(false, plain_read) > 0);
      CHECK(wrong_sums(true, plain_read) == 0);
    }
  }

  TEST_CASE("store buffering: both loads see 0 without fences, never with them") {
    CHECK(both_zero(false) > 0);
    CHECK(both_zero(true) == 0);
  }

  TEST_CASE("a look-back chain without its fences gives wrong prefixes, with them never") {
    CHECK(broken_chains(false) > 0);
    CHECK(broken_chains(true) == 0);
  }

  TEST_CASE("a spin on a block that is not resident is reported as a hang, naming where it waits") {
    std::string report;
    CHECK(hangs(false, report) > 0);
    CHECK(report.find("hung") != std::string::npos);
    CHECK(report.find("load_volatile at test_sim_adversary.cpp") != std::string::npos);
    CHECK(report.find("blocks not started") != std::string::npos);
    CHECK(report.find("launch seed") != std::string::npos);
    std::string none;
    CHECK(hangs(true, none) == 0);  // waiting on earlier tickets only: every seed finishes
  }

  TEST_CASE("the look-back walk as nvcc compiled countr_zero hangs, bounded it ends (wrong, so checks see it)") {
    CHECK(walk(false, false) == 40);  // the nearest predecessor's inclusive prefix (tile 39: 40)
    CHECK(walk(true, false) == 40);
    // With lowest_lane reading 64, the unbounded walk never leaves the windows before tile 0: on
    // a GPU the scan hung. The simulator runs host code, where countr_zero is right, so no mode
    // of it could see that miscompilation; what it sees is the loop that nothing bounds.
    std::string what;
    try {
      walk(false, true);
    } catch (const DeviceError& e) {
      what = e.what();
    }
    CHECK(what.find("hung") != std::string::npos);
    CHECK(what.find("warp 0: 32 threads running, last switched at test_sim_adversary.cpp") != std::string::npos);
    CHECK(walk(true, true) != 40);  // ends, with a sum that the matrix's comparison fails
  }

  TEST_CASE("a launch replays from its seed") {
    std::vector<std::int32_t> first;
    for (int run = 0; run < 2; ++run) {
      Buffer a(sim_backend(), DType::i32, 4), b(sim_backend(), DType::i32, 4);
      fill(a, 0.0);
      fill(b, 0.0);
      std::vector<std::int32_t> seen;
      for (std::uint64_t seed = 1; seed <= 16; ++seed) {
        sim::launch_adversarial(sim_backend(), {seed, 2}, {"store_buffering", {2, 1, 1}, {32, 1, 1}}, store_buffering,
                                static_cast<unsigned*>(a.data()), static_cast<unsigned*>(b.data()), 0);
        for (auto v : b.to_vector<std::int32_t>()) seen.push_back(v);
        fill(a, 0.0);
      }
      if (run == 0) {
        first = seen;
      } else {
        CHECK(seen == first);
      }
    }
  }
}

// Run only by their own CTest tests (skipped otherwise, and excluded from discovery): a kernel
// that spins on a flag nobody sets, on the plain engine. With the simulator's hang watch off only
// the test program's watchdog can end it; with it on (TANDEM_SIM_HANG_SECONDS=1), it fails.
TANDEM_KERNEL void never_set(const unsigned* flag) {
  while (tandem::gpu::load_volatile(flag) == 0u) {
  }
}
TEST_CASE("watchdog: the plain engine ends a spin on a flag nobody sets" * doctest::skip()) {
  tandem::Buffer flag(tandem::get_backend("sim"), tandem::DType::i32, 1);
  tandem::fill(flag, 0.0);
  std::string what;
  try {
    tandem::sim::launch(tandem::get_backend("sim"), {"never_set", {2, 1, 1}, {32, 1, 1}}, never_set,
                        static_cast<const unsigned*>(flag.data()));
  } catch (const tandem::DeviceError& e) {
    what = e.what();
  }
  CHECK(what.find("kernel 'never_set'") != std::string::npos);
  CHECK(what.find("hung: thread (") != std::string::npos);
  CHECK(what.find("has spun on a flag at test_sim_adversary.cpp") != std::string::npos);
}
TEST_CASE("watchdog: a kernel that never ends" * doctest::skip()) {
  ::setenv("TANDEM_SIM_HANG_SECONDS", "86400", 1);
  tandem::Buffer flag(tandem::get_backend("sim64"), tandem::DType::i32, 1);
  tandem::fill(flag, 0.0);
  tandem::sim::launch(tandem::get_backend("sim64"), {"never_set", {1, 1, 1}, {64, 1, 1}}, never_set,
                      static_cast<const unsigned*>(flag.data()));
}
