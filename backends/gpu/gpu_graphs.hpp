// GpuBackend::capture (see gpu_backend.hpp, which includes this file at its end): a runtime with
// graphs (CUDA) captures the queue's work into a graph instantiated once and replayed as one
// launch; the others (HIP 5.2 here, the simulator) record the work itself (Backend::capture).
#pragma once

namespace tandem::gpu {

template <class Runtime>
Graph GpuBackend<Runtime>::capture(Queue q, const std::function<void()>& work) {
  if constexpr (requires(Runtime & r) { r.begin_capture(0); }) {
    if (!work) throw InvalidArgument("capture: no work to record");
    if (q.id == 0) {
      throw InvalidArgument("capture: the default queue of '" + name_ +
                            "' cannot be captured; capture on a queue from create_queue()");
    }
    const int s = stream(q);
    struct Captured final : Graph::Impl {
      std::shared_ptr<Backend> keep_alive;  // the graph may outlive every other handle
      GpuBackend& be;
      int stream;
      void* exec = nullptr;
      std::vector<void*> kept;  // scratch memory the recorded ops use, for the graph's life
      Captured(std::shared_ptr<Backend> owner, GpuBackend& b, int st)
          : keep_alive(std::move(owner)), be(b), stream(st) {}
      ~Captured() override {
        if (exec != nullptr) {  // replayed at some time: wait for the last replay (an aborted capture launched nothing)
          try {
            be.rt_.synchronize(stream);
          } catch (const Error&) {
          }
          be.rt_.destroy_graph(exec);
        }
        for (void* p : kept) be.deallocate(p);
      }
      void replay() override { be.rt_.launch_graph(exec, stream); }
    };
    // Refused before anything is made: a refused capture inside a capture must leave the stream
    // being captured untouched (waiting for it there would invalidate the outer capture).
    bool idle = false;
    if (!capture_busy_.compare_exchange_strong(idle, true)) {
      throw InvalidArgument("capture: a capture is already under way on '" + name_ +
                            "' (captures do not nest, and one runs at a time per backend)");
    }
    struct Release {
      std::atomic<bool>& busy;
      ~Release() { busy.store(false); }
    } release{capture_busy_};
    std::shared_ptr<Backend> owner = weak_from_this().lock();  // null for a backend not held by a shared_ptr
    auto graph = std::make_shared<Captured>(std::move(owner), *this, s);
    graph->kept.reserve(64);
    before_capture();
    rt_.begin_capture(s);
    capture_stream_.store(s);
    capture_keep_.store(&graph->kept);
    try {
      work();
    } catch (...) {
      capture_keep_.store(nullptr);
      capture_stream_.store(-1);
      rt_.abort_capture(s);
      throw;
    }
    capture_keep_.store(nullptr);
    capture_stream_.store(-1);
    graph->exec = rt_.end_capture(s);
    return Graph(std::move(graph));
  } else {
    return Backend::capture(q, work);
  }
}

}  // namespace tandem::gpu
