// The TANDEM_* environment variables: what each one takes, checked the same way wherever it is
// read. A value tandem does not understand is an InvalidArgument that names the variable and
// lists what it accepts; it is never ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem {

struct EnvironmentVariable {
  std::string name;
  std::string values;   // what it takes, e.g. "generic, avx2 or avx512"
  std::string meaning;  // what it does
};

// Every variable tandem reads, in the order `tandem --help` lists them.
const std::vector<EnvironmentVariable>& environment_variables();

// Checks the value of every TANDEM_* variable set in this process and throws InvalidArgument for
// the first one tandem cannot use. Returns the names of set TANDEM_* variables that tandem does not
// read (a typo, most likely), for the caller to warn about.
std::vector<std::string> check_environment();

namespace env {

// The variable's value when it is set and not empty.
std::optional<std::string> text(const char* name);
// 0 or 1 (unset or empty: false).
bool flag(const char* name);
// One of `allowed` (unset or empty: fallback).
std::string choice(const char* name, const std::vector<std::string>& allowed, const std::string& fallback);
// A whole number in [min, max] (unset or empty: nullopt).
std::optional<std::uint64_t> whole(const char* name, std::uint64_t min = 0, std::uint64_t max = UINT64_MAX);
// `count` whole numbers in [min, max], separated by commas (unset or empty: nullopt).
std::optional<std::vector<std::uint64_t>> whole_list(const char* name, std::size_t count, std::uint64_t min,
                                                     std::uint64_t max);
// A cache level and a distance, written "l1:BYTES" or "l2:BYTES" (BYTES a multiple of 64 up to
// 65536), or "off" (level and bytes 0): how far ahead, and into which cache, a loop prefetches
// (TANDEM_OPENMP_SCAN_PREFETCH, TANDEM_OPENMP_REDUCE_PREFETCH).
struct CacheDistance {
  int level = 1;
  int bytes = 0;
};
// The text read that way (nullopt: not of that form).
std::optional<CacheDistance> parse_cache_distance(const std::string& text);
// The variable read that way (unset or empty: nullopt; another form: InvalidArgument).
std::optional<CacheDistance> cache_distance(const char* name);
// TANDEM_OPENMP_STREAM_FROM: the bytes an op moves (inputs and output) from which the openmp
// backend writes its output around the cache, UINT64_MAX for "off" (unset or empty: nullopt;
// another form: InvalidArgument).
std::optional<std::uint64_t> stream_from();
// TANDEM_OPENMP_PARALLEL_FROM: the elements from which the openmp backend's loops run on its team
// (below: on the calling thread) (unset or empty: nullopt; another form: InvalidArgument).
std::optional<std::uint64_t> parallel_from();

}  // namespace env
}  // namespace tandem
