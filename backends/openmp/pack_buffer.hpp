// Packing memory kept by each thread between calls, grown as needed: allocated afresh, its pages
// fault in again on every call (a tenth of a 1024^3 product's time, a fifth of a bf16 one's on
// the tensor tier). Shared by the register_blocked tier (gemm_packed.cpp) and the tensor tier
// (matmul_amx.cpp): one product at a time runs on a thread, so their blocks take turns.
#pragma once

#include <cstddef>

namespace tandem::openmp {

// What a kept block holds: slots are distinct so that one product's blocks never share memory.
enum class PackSlot { a_blocks, b_blocks, accumulators };

// 64-byte aligned memory of at least `bytes` for `slot`, kept by the calling thread for its next
// call, on huge pages from 2 MiB where Linux gives them on request; blocks past 256 MiB are not
// kept (owned_ frees them). std::bad_alloc when the memory is not there. Defined in
// gemm_packed.cpp.
void* kept_block(PackSlot slot, std::size_t bytes, void** owned);

template <class T>
class PackBuffer {
 public:
  PackBuffer(PackSlot slot, std::size_t n) {
    // In the body, after every member's initializer: owned_'s must not run after kept_block
    // has handed a block over through it.
    data = static_cast<T*>(kept_block(slot, (n > 0 ? n : 1) * sizeof(T), &owned_));
  }
  ~PackBuffer();
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;

 private:
  void* owned_ = nullptr;  // a block past the kept size, freed with this buffer

 public:
  T* data = nullptr;
};

void free_block(void* owned);  // what ~PackBuffer calls on a block that was not kept

template <class T>
PackBuffer<T>::~PackBuffer() {
  free_block(owned_);
}

}  // namespace tandem::openmp
