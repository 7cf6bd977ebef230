// Backend selection: by name ("reference", "openmp", "cuda", "cuda:1", "hip", "sim"), by the
// environment variable TANDEM_BACKEND, or "auto" (the best available).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/backend.hpp"

namespace tandem {

struct BackendInfo {
  std::string name;      // "openmp", "cuda", ...
  BackendKind kind = BackendKind::cpu;  // cpu: its buffers are host memory; gpu; simulator (GPU kernels on the CPU)
  bool built = false;    // compiled into this library
  bool available = false;  // built and has a usable device here
  std::string reason;    // why not available ("" when available)
  int device_count = 0;
  std::string module;    // a backend in a module (shared builds: cuda, hip, kokkos): its file, "" if none
};

// Every backend tandem knows of, built or not, with availability and the reason when unavailable.
std::vector<BackendInfo> backends();
// The names of those backends alone, without probing any device (help texts).
std::vector<std::string> backend_names();

// The shared instance of a backend. name: a backend name, "name:index", or "auto".
// Throws BackendUnavailable (listing the backends) for an unknown name or one that cannot run here.
Backend& get_backend(std::string_view name);
// The backend named by TANDEM_BACKEND, or "auto" when it is unset.
Backend& default_backend();
// A fresh instance with its own allocator and statistics (tests, isolation).
std::shared_ptr<Backend> create_backend(std::string_view name);
// What "auto" resolves to here.
std::string auto_backend_name();

// Transfer-aware choice for an op on host data of `size` (elements, or N for matmul): the backend
// a crossover file names for that algorithm when size is at least its crossover and it can run
// here, else the best CPU backend (openmp, else reference). Without a file, always the CPU: on
// host data a GPU only pays once the work outweighs the transfers, and only a measurement on
// this machine says where that is. The file is TANDEM_CROSSOVER, written by
// `tandem compare --crossover FILE`: lines "algorithm backend size" ('#' starts a comment).
// A malformed file raises DataError naming the line.
Backend& backend_for(std::string_view algorithm, std::size_t size);
// The crossover the file gives an algorithm: the backend and the size it wins from; empty
// backend when the file has none (or there is no file).
struct Crossover {
  std::string backend;
  std::size_t from = 0;
};
Crossover crossover_for(std::string_view algorithm);

}  // namespace tandem
