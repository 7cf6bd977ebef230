#!/usr/bin/env python3
"""Per-call cost of a small op through tandem's Python binding, beside the same op in C++ and in
NumPy and PyTorch (CPU) for the same arrays: out = x + y in float32 at 1K and 1M elements.

    PYTHONPATH=build/ci/python python3 bench/python_overhead.py [--backend openmp] [--json FILE]

Each row is the median over rounds of the mean time per call in a loop of calls (the loop sized
to take about 0.1 s); tandem's C++ row is tandem::add called in a C++ loop on the same buffers
(tandem._tandem._cpp_add_seconds), so binding overhead = Python row - C++ row. Results go to
standard output (and JSON with --json); PyTorch is left out, saying so, when it is not installed.
"""
import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

import tandem
from tandem import _tandem


def per_call(fn, rounds=7):
    calls = 1
    while True:  # size the loop to about 0.1 s
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - start
        if elapsed > 0.1 or calls > 1 << 22:
            break
        calls *= 4
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="openmp", help="tandem backend (default openmp)")
    ap.add_argument("--json", help="also write the results as JSON to this file")
    args = ap.parse_args()
    be = tandem.get_backend(args.backend)
    try:
        import torch
    except ImportError:
        torch = None
        print("PyTorch is not installed in this Python: its rows are left out")
    rows = []
    for n in (1024, 1 << 20):
        a = np.random.default_rng(1).standard_normal(n, dtype=np.float32)
        b = np.random.default_rng(2).standard_normal(n, dtype=np.float32)
        c = np.empty_like(a)
        x, y, out = tandem.array(a, backend=be), tandem.array(b, backend=be), tandem.empty([n], backend=be)
        r = {"n": n}
        r["tandem_python_us"] = per_call(lambda: tandem.add(x, y, out=out)) * 1e6
        r["tandem_python_new_output_us"] = per_call(lambda: tandem.add(x, y)) * 1e6
        calls = max(1, int(1e5 / n * 100))
        r["tandem_cpp_us"] = statistics.median(_tandem._cpp_add_seconds(x, y, out, calls) / calls
                                               for _ in range(7)) * 1e6
        r["numpy_us"] = per_call(lambda: np.add(a, b, out=c)) * 1e6
        if torch is not None:
            ta, tb, tc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
            r["pytorch_us"] = per_call(lambda: torch.add(ta, tb, out=tc)) * 1e6
        r["binding_overhead_us"] = r["tandem_python_us"] - r["tandem_cpp_us"]
        rows.append(r)
    print(f"out = x + y, float32, tandem backend {be.name}, {os.cpu_count()} CPUs ({platform.processor() or platform.machine()})")
    print(f"{'n':>8} {'tandem py':>10} {'py+alloc':>9} {'tandem C++':>10} {'overhead':>9} {'NumPy':>9} {'PyTorch':>9}  (us per call)")
    for r in rows:
        torch_text = f"{r['pytorch_us']:9.2f}" if "pytorch_us" in r else f"{'-':>9}"
        print(f"{r['n']:>8} {r['tandem_python_us']:10.2f} {r['tandem_python_new_output_us']:9.2f} "
              f"{r['tandem_cpp_us']:10.2f} {r['binding_overhead_us']:9.2f} {r['numpy_us']:9.2f} {torch_text}")
    if args.json:
        doc = {"benchmark": "python_overhead", "backend": be.name, "device": be.properties["name"],
               "numpy": np.__version__, "pytorch": torch.__version__ if torch else None,
               "date": time.strftime("%Y-%m-%d"), "rows": rows}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)


if __name__ == "__main__":
    main()
