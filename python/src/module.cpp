// tandem._tandem: the typed errors, backends and their selection, info(), check() and compare().
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <optional>

#include "../../cli/sweep.hpp"
#include "bindings.hpp"
#include "tandem/verify.hpp"

namespace tandem::py {

namespace {

nb::dict properties_dict(const DeviceProperties& p) {
  nb::dict d;
  d["name"] = p.name;
  d["kind"] = std::string(name_of(p.kind));
  d["memory_bytes"] = p.memory_bytes;
  d["compute_units"] = p.compute_units;
  d["simd_width"] = p.simd_width;
  d["l1_cache_bytes"] = p.l1_cache_bytes;
  d["l2_cache_bytes"] = p.l2_cache_bytes;
  d["l3_cache_bytes"] = p.l3_cache_bytes;
  d["clock_mhz"] = p.clock_mhz;
  d["memory_bandwidth_gbs"] = p.memory_bandwidth_gbs;
  d["compute_capability"] = p.compute_capability;
  d["isa_features"] = p.isa_features;
  nb::dict tuning;
  for (const auto& [k, v] : p.tuning) tuning[nb::str(k.c_str())] = v;
  d["tuning"] = tuning;
  return d;
}

nb::dict memory_place_dict(const MemoryPlace& place) {
  static constexpr const char* kKinds[] = {"host", "cuda", "rocm", "other"};
  nb::dict d;
  d["kind"] = kKinds[static_cast<int>(place.kind)];
  d["device"] = place.device;
  d["description"] = describe(place);
  return d;
}

nb::list backend_list() {
  nb::list out;
  for (const BackendInfo& info : backends()) {
    nb::dict d;
    d["name"] = info.name;
    d["kind"] = info.kind == BackendKind::cpu ? "cpu" : info.kind == BackendKind::gpu ? "gpu" : "simulator";
    d["built"] = info.built;
    d["available"] = info.available;
    d["reason"] = info.reason;
    d["device_count"] = info.device_count;
    d["module"] = info.module;
    out.append(d);
  }
  return out;
}

std::shared_ptr<Backend> shared(Backend& b) { return b.shared_from_this(); }

// The names of the variants a backend keeps of 'reduce' or 'scan' (teaching variants, and
// 'vendor' where the vendor library is linked).
std::vector<std::string> variant_names(const Backend& b, const std::string& algorithm) {
  std::vector<std::string> names;
  if (algorithm == "reduce") {
    for (ReduceVariant v : b.reduce_variants()) names.emplace_back(name_of(v));
  } else if (algorithm == "scan") {
    for (ScanVariant v : b.scan_variants()) names.emplace_back(name_of(v));
  } else {
    throw InvalidArgument("variants: algorithm '" + algorithm + "' has no variants; use 'reduce' or 'scan'");
  }
  return names;
}

nb::dict case_dict(const verify::CaseResult& r) {
  nb::dict d;
  d["family"] = "";
  d["algorithm"] = r.algorithm;
  d["tier"] = r.tier;
  d["dtype"] = r.dtype;
  d["size"] = r.size;
  d["passed"] = r.passed();
  d["worst_share_of_bound"] = r.comparison.worst_share;
  d["detail"] = !r.error.empty() ? r.error : !r.guard_failure.empty() ? r.guard_failure : r.comparison.describe();
  return d;
}

nb::list compare_results(const std::vector<cli::sweep::Result>& results) {
  nb::list out;
  for (const auto& r : results) {
    nb::dict d;
    d["algorithm"] = r.algorithm;
    d["backend"] = r.backend;
    d["kind"] = r.kind;
    d["variant"] = r.variant;
    d["size"] = r.size;
    d["kernel_ms"] = r.kernel.median_ms;
    d["kernel_min_ms"] = r.kernel.min_ms;
    d["reps"] = r.kernel.reps;
    d["gbps"] = r.bytes > 0 ? r.gbps() : 0.0;
    // Not measured: None (no flops, no overlapped or managed way, no vendor tier).
    const auto measured = [](double v) { return v > 0 ? nb::cast(v) : nb::none(); };
    d["gflops"] = measured(r.flops > 0 ? r.gflops() : 0.0);
    d["end_to_end_pageable_ms"] = r.e2e_pageable_ms;
    d["end_to_end_pinned_ms"] = r.e2e_pinned_ms;
    d["end_to_end_overlap_ms"] = measured(r.e2e_overlap_ms);
    d["end_to_end_managed_ms"] = measured(r.e2e_managed_ms);
    d["best_end_to_end_ms"] = r.best_e2e_ms();
    d["limit_gbps"] = r.limit_gbps;
    d["vendor_gflops"] = measured(r.vendor_gflops);
    out.append(d);
  }
  return out;
}

// The typed errors, as Python exceptions under tandem.Error.
void bind_errors(nb::module_& m) {
  // The C++ hierarchy, most general first: nanobind tries the translators registered last first.
  nb::exception<Error> error(m, "Error", PyExc_RuntimeError);
  nb::exception<InvalidArgument> invalid(m, "InvalidArgument", error);
  nb::exception<ShapeMismatch>(m, "ShapeMismatch", error);
  nb::exception<DTypeMismatch>(m, "DTypeMismatch", error);
  nb::exception<DeviceMismatch>(m, "DeviceMismatch", error);
  nb::exception<Unsupported>(m, "Unsupported", error);
  nb::exception<OutOfMemory>(m, "OutOfMemory", error);
  nb::exception<BackendUnavailable>(m, "BackendUnavailable", error);
  nb::exception<DeviceError>(m, "DeviceError", error);
  nb::exception<DataError> data_error(m, "DataError", error);
  nb::exception<IoError>(m, "IoError", data_error);
}

// tandem.Backend: a backend's device, memory place, tiers, variants and allocator.
void bind_backend_class(nb::module_& m) {
  nb::class_<Backend>(m, "Backend",
                      "A compute backend (openmp, reference, sim, cuda, hip, kokkos); get one with get_backend().")
      .def_prop_ro("name", &Backend::name)
      .def_prop_ro("kind", [](const Backend& b) { return std::string(name_of(b.properties().kind)); })
      .def_prop_ro(
          "properties", [](const Backend& b) { return properties_dict(b.properties()); },
          "The device: name, memory, compute units, caches, ISA features, the tuning chosen.")
      .def_prop_ro(
          "memory_place", [](const Backend& b) { return memory_place_dict(b.memory_place()); },
          "Where its arrays live: host memory, a CUDA or ROCm device.")
      .def(
          "matmul_tiers",
          [](const Backend& b, nb::handle dtype) {
            std::vector<std::string> names;
            for (MatmulTier t : b.matmul_tiers(dtype_arg(dtype, DType::f32))) names.emplace_back(name_of(t));
            return names;
          },
          nb::arg("dtype") = nb::none())
      .def(
          "variants", &variant_names, nb::arg("algorithm"),
          "The variants of 'reduce' or 'scan' this backend keeps; empty when it has one way only.")
      .def(
          "synchronize", [](Backend& b) { b.synchronize(Queue{}); }, nb::call_guard<nb::gil_scoped_release>(),
          "Waits until the work queued on the default queue is done.")
      .def("memory_stats",
           [](const Backend& b) {
             const MemoryStats s = b.memory_stats();
             nb::dict d;
             d["bytes_in_use"] = s.bytes_in_use;
             d["peak_bytes_in_use"] = s.peak_bytes_in_use;
             d["bytes_reserved"] = s.bytes_reserved;
             d["allocations"] = s.allocations;
             d["cache_hits"] = s.cache_hits;
             return d;
           })
      .def("empty_cache", &Backend::empty_cache, "Returns the allocator's cached blocks to the device.")
      .def("__repr__", [](const Backend& b) { return "<tandem.Backend '" + b.name() + "'>"; });
}

// backends(), get_backend(), auto_backend_name() and info().
void bind_backend_selection(nb::module_& m) {
  m.def("backends", &backend_list,
        "Every backend tandem knows: built, available here, and why not (the device probe runs once).");
  m.def(
      "get_backend", [](nb::handle name) { return shared(backend_arg(name)); }, nb::arg("name") = nb::none(),
      "The shared backend of this name ('openmp', 'cuda:1', 'auto'); None: TANDEM_BACKEND when set, else auto.");
  m.def("auto_backend_name", &auto_backend_name, "What 'auto' resolves to here.");
  m.def("info", [] {
    nb::dict d;
    d["version"] = version_string;
    d["auto"] = auto_backend_name();
    nb::list list = backend_list();
    for (nb::handle h : list) {
      nb::dict entry = nb::borrow<nb::dict>(h);
      if (!nb::cast<bool>(entry["available"])) continue;
      Backend& b = get_backend(nb::cast<std::string>(entry["name"]));
      entry["properties"] = properties_dict(b.properties());
      entry["memory_place"] = memory_place_dict(b.memory_place());
    }
    d["backends"] = list;
    return d;
  }, "What tandem knows here: its version, what 'auto' picks, and every backend (available ones with\n"
     "their device properties and memory place), as `tandem info --json` prints.");
}

// check(): the verification cases on a backend (as `tandem check`).
void bind_check(nb::module_& m) {
  m.def(
      "check",
      [](nb::handle backend, bool quick, std::optional<std::vector<std::string>> families,
         std::optional<std::uint64_t> seed) {
        Backend& be = backend_arg(backend);
        Backend& reference = get_backend("reference");
        const std::uint64_t s = seed ? *seed : verify::seed_from_environment();
        if (families) {
          const std::vector<std::string> known = verify::families();
          for (const auto& f : *families) {
            if (std::find(known.begin(), known.end(), f) == known.end()) {
              std::string list;
              for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
              throw InvalidArgument("check: unknown family '" + f + "': use " + list);
            }
          }
        }
        verify::CheckOptions options;
        options.quick = quick;
        std::vector<std::pair<std::string, verify::CaseResult>> results;
        {
          nb::gil_scoped_release release;
          for (const auto& c : verify::cases(be, options)) {
            if (families && std::find(families->begin(), families->end(), c.family) == families->end()) continue;
            results.emplace_back(c.family, verify::run_case(c, be, reference, s));
          }
        }
        nb::list cases;
        std::size_t failed = 0;
        for (const auto& [family, r] : results) {
          nb::dict d = case_dict(r);
          d["family"] = family;
          failed += r.passed() ? 0 : 1;
          cases.append(d);
        }
        nb::dict out;
        out["backend"] = be.name();
        out["seed"] = s;
        out["cases"] = cases;
        out["failed"] = failed;
        out["passed"] = failed == 0 && !results.empty();
        return out;
      },
      nb::arg("backend") = nb::none(), nb::arg("quick") = true, nb::arg("families") = nb::none(),
      nb::arg("seed") = nb::none(),
      "Runs tandem's verification cases on a backend against the float64 reference (as `tandem check`).\n"
      "families: a subset of elementwise, matrix, matmul, reduce, scan, ml. Returns a dict with\n"
      "'passed', 'failed', 'seed' (TANDEM_TEST_SEED replays it) and one dict per case.");
}

// compare() and compare_algorithms(): timings across backends (as `tandem compare`).
void bind_compare(nb::module_& m) {
  m.def(
      "compare",
      [](std::optional<std::vector<std::string>> algorithms, std::optional<std::vector<std::string>> backends_,
         bool full, double min_seconds, bool variants) {
        cli::sweep::Options options;
        if (algorithms) options.algorithms = *algorithms;
        if (backends_) options.backends = *backends_;
        options.full = full;
        options.variants = variants;
        options.min_seconds = min_seconds;
        std::vector<cli::sweep::Result> results;
        {
          nb::gil_scoped_release release;
          results = cli::sweep::run(options);
        }
        return compare_results(results);
      },
      nb::arg("algorithms") = nb::none(), nb::arg("backends") = nb::none(), nb::arg("full") = false,
      nb::arg("min_seconds") = 0.02, nb::arg("variants") = false,
      "Times algorithms on backends at log-spaced sizes, kernel-only and end to end (as `tandem compare`),\n"
      "beside the copy bandwidth or vendor BLAS measured in the same run. One dict per measurement.");
  m.def("compare_algorithms", &cli::sweep::algorithm_names, "The algorithms compare() can time.");
}

}  // namespace

void bind_core(nb::module_& m) {
  bind_errors(m);
  m.attr("__version__") = version_string;
  bind_backend_class(m);
  bind_backend_selection(m);
  bind_check(m);
  bind_compare(m);
}

}  // namespace tandem::py

NB_MODULE(_tandem, m) {
  m.doc() = "tandem's C++ core; import tandem instead.";
  tandem::py::bind_core(m);
  tandem::py::bind_array(m);
  tandem::py::bind_ops(m);
  tandem::py::bind_ml(m);
  tandem::py::bind_verify(m);
}
