// The cuda backend's DeviceCollective: NCCL allreduce of device buffers on the device, queued on
// the backend's streams. One NCCL communicator per backend (one device), over the ranks of the
// job, created on first use from an id that rank 0 makes and `share` (MPI, in tandem::dist)
// hands to the others; destroyed with the backend. Compiled into cuda_backend.cu when the CUDA
// toolkit has NCCL (TANDEM_HAVE_NCCL).
#pragma once

#include <nccl.h>

#include <functional>
#include <mutex>
#include <string>

#include "tandem/backend.hpp"
#include "tandem/errors.hpp"

namespace tandem::detail {

class NcclCollective final : public DeviceCollective {
 public:
  // stream_of: the CUDA stream of a queue, with the backend's device made current.
  explicit NcclCollective(std::function<cudaStream_t(Queue)> stream_of) : stream_of_(std::move(stream_of)) {}
  ~NcclCollective() override {
    if (comm_ != nullptr) (void)ncclCommDestroy(comm_);
  }

  void allreduce(Queue q, std::span<const Part> parts, Op op, int rank, int size,
                 const std::function<void(void*, std::size_t)>& share) override {
    if (parts.empty()) return;
    std::lock_guard lock(mutex_);
    const cudaStream_t stream = stream_of_(q);
    if (comm_ == nullptr) {
      ncclUniqueId id;
      if (rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      if (size > 1) share(&id, sizeof id);
      check(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
      rank_ = rank;
      size_ = size;
    } else if (rank != rank_ || size != size_) {
      throw InvalidArgument("allreduce: this backend's NCCL communicator is rank " + std::to_string(rank_) + " of " +
                            std::to_string(size_) + ", not " + std::to_string(rank) + " of " + std::to_string(size));
    }
    const ncclRedOp_t nop = op == Op::sum ? ncclSum : op == Op::mean ? ncclAvg : ncclMax;
    check(ncclGroupStart(), "ncclGroupStart");
    for (const Part& p : parts) {
      const ncclDataType_t type = p.dtype == DType::f32 ? ncclFloat32 : p.dtype == DType::f64 ? ncclFloat64 : ncclInt32;
      check(ncclAllReduce(p.data, p.data, p.count, type, nop, comm_, stream), "ncclAllReduce");
    }
    check(ncclGroupEnd(), "ncclGroupEnd");
  }

 private:
  static void check(ncclResult_t r, const char* what) {
    if (r != ncclSuccess) throw DeviceError(std::string("NCCL error in ") + what + ": " + ncclGetErrorString(r));
  }

  std::function<cudaStream_t(Queue)> stream_of_;
  std::mutex mutex_;
  ncclComm_t comm_ = nullptr;
  int rank_ = -1, size_ = 0;
};

}  // namespace tandem::detail
