#!/usr/bin/env python3
"""The PyTorch peer of `tandem bench` / `tandem compare`: the sweep's algorithms (add, axpy, sum,
dot, scan as cumsum, softmax over rows of 1024, matmul) in PyTorch eager mode, at the sweep's
sizes and timed the way it times them: kernel only (CUDA events on a GPU, the median of repeats
after a warm-up, the caches flushed before each run whose operands fit in twice the last-level
cache unless --warm: here by overwriting a buffer that size, while tandem on an x86 CPU flushes
only its operands' cache lines, so small CPU sizes compare fairly with --warm on both) and end to end (host data in, host result out: from pageable memory, and
on a GPU from pinned memory). Each result is checked against a float64 NumPy reference, so a
wrong answer fails the run instead of being timed. The JSON has the rows of `tandem bench --json`, with backend "torch:cuda" or
"torch:cpu", so that bench/plot.py draws them beside tandem's backends:

  python3 bench/pytorch_ops.py --device cuda --full --json torch.json
  tandem compare --full --backend openmp --backend cuda --json compare.json
  python3 bench/plot.py compare.json plots torch.json

PyTorch is not a build dependency of tandem: this script is only for machines that have it.

usage: python3 bench/pytorch_ops.py [--device cuda|cpu] [--full] [--warm] [--algorithm A ...]
                                    [--json FILE] [--tandem PATH [--rounds N]]

With --tandem, the same algorithms and sizes run through `PATH bench` (openmp on the CPU, cuda on
a GPU) in alternating rounds, and each row prints tandem's speed against PyTorch's measured in the
same run (medians over the rounds).
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ALGORITHMS = ["add", "axpy", "sum", "dot", "scan", "softmax", "matmul"]


def sizes(algorithm, full):
    """The sweep's sizes (cli/sweep.cpp, sizes())."""
    if algorithm == "matmul":
        return [32, 64, 128, 256, 512, 1024, 2048] if full else [64, 256, 1024]
    if full:
        return [1 << k for k in range(10, 27, 2)]
    return [1 << 12, 1 << 16, 1 << 20, 1 << 24]


def llc_bytes():
    """The CPU's largest cache, from sysfs (0 when it does not say)."""
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            try:
                with open(os.path.join(base, entry, "size")) as f:
                    text = f.read().strip()
            except OSError:
                continue
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            best = max(best, int(text.rstrip("KMG")) * scale)
    except OSError:
        pass
    return best


def merge_rounds(rounds):
    """The rows of the first round, each with the median kernel time over all rounds."""
    merged = []
    for row in rounds[0]:
        key = (row["algorithm"], row["variant"], row["size"])
        times = [r["kernel_ms"] for rows in rounds for r in rows if (r["algorithm"], r["variant"], r["size"]) == key]
        merged.append(dict(row, kernel_ms=statistics.median(times), rounds=len(times)))
        merged[-1]["gbps"] = row["bytes"] / (merged[-1]["kernel_ms"] * 1e6)
        if row["flops"]:
            merged[-1]["gflops"] = row["flops"] / (merged[-1]["kernel_ms"] * 1e6)
    return merged


def run_tandem(args, backend):
    """tandem bench on `backend` with this run's algorithms and options: its default rows (the
    register_blocked tier for matmul), or None after saying why it failed."""
    command = [args.tandem, "bench", "--backend", backend, "--json", "-", "--min-time", str(args.min_seconds)]
    for algorithm in args.algorithm or ALGORITHMS:
        command += ["--algorithm", algorithm]
    if args.full:
        command.append("--full")
    if args.warm:
        command.append("--warm")
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError as e:
        print(f"pytorch_ops.py: cannot run {args.tandem}: {e}", file=sys.stderr)
        return None
    if done.returncode != 0:
        print(f"pytorch_ops.py: {' '.join(command)} failed ({done.returncode}):\n{done.stderr}", file=sys.stderr)
        return None
    rows = json.loads(done.stdout)["results"]
    return [r for r in rows if r["variant"] in ("default", "register_blocked")]


def parse_args():
    """The command line (the module's docstring says what each option does)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--full", action="store_true", help="the whole size range (default: the quick subset)")
    parser.add_argument("--warm", action="store_true", help="do not flush the caches between kernel runs")
    parser.add_argument("--algorithm", action="append", choices=ALGORITHMS, help="only these (repeatable)")
    parser.add_argument("--min-seconds", type=float, default=0.02, help="per kernel timing (default 0.02)")
    parser.add_argument("--json", help="write the results to this file")
    parser.add_argument("--tandem", metavar="PATH",
                        help="also run PATH (the tandem program) bench on openmp (cpu) or cuda with the same "
                             "algorithms, sizes and --warm, alternating with PyTorch, and print tandem's speed "
                             "against PyTorch's per row")
    parser.add_argument("--rounds", type=int, default=3,
                        help="with --tandem: alternating rounds of each, medians taken (default 3)")
    return parser.parse_args()


class TorchDevice:
    """The device PyTorch runs on, with what its measurements share: cache flusher, inputs, timers."""

    def __init__(self, args):
        import numpy as np
        import torch
        self.args = args
        self.dev = torch.device(args.device)
        self.gpu = self.dev.type == "cuda"
        torch.backends.cuda.matmul.allow_tf32 = False  # f32 as tandem's sweep computes it
        self.name = torch.cuda.get_device_name(0) if self.gpu else (platform.processor() or platform.machine())
        self.backend = f"torch:{args.device}"
        if self.gpu:
            props = torch.cuda.get_device_properties(0)
            cache = getattr(props, "L2_cache_size", 0)
        else:
            cache = llc_bytes()
        self.flush_bytes = 0 if args.warm else 2 * cache
        self.flusher = (torch.empty(self.flush_bytes // 4, dtype=torch.float32, device=self.dev)
                        if self.flush_bytes else None)
        self.rng = np.random.default_rng(1)

    def sync(self):
        """Waits for the device (nothing to wait for on the CPU)."""
        import torch
        if self.gpu:
            torch.cuda.synchronize()

    def warm_up(self):
        """A quarter second of adds: clocks and thread pools wake before anything is measured."""
        import torch
        wa = torch.ones(1 << 22, device=self.dev)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.25:
            torch.add(wa, wa)
            self.sync()

    def time_kernel(self, op, flush):
        """Median, min and max milliseconds of op over repeats (at least 3, at most 100; 30 flushed)."""
        import torch
        op()
        self.sync()
        ms = []
        most = 30 if flush else 100
        start = time.perf_counter()
        while len(ms) < 3 or (time.perf_counter() - start < self.args.min_seconds and len(ms) < most):
            if flush:
                self.flusher.fill_(float(len(ms) % 7))
            if self.gpu:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                op()
                b.record()
                b.synchronize()
                ms.append(a.elapsed_time(b))
            else:
                t0 = time.perf_counter()
                op()
                ms.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ms), min(ms), max(ms), len(ms)

    def time_host(self, op):
        """Median milliseconds of op and the wait for the device, by the host's clock."""
        op()
        self.sync()
        ms = []
        start = time.perf_counter()
        while len(ms) < 3 or (time.perf_counter() - start < self.args.min_seconds and len(ms) < 100):
            t0 = time.perf_counter()
            op()
            self.sync()
            ms.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(ms)


def softmax_shape(n):
    """(rows, cols) of softmax on n elements: rows of 1024, as the sweep's softmax_cross_entropy."""
    cols = min(n, 1024)
    return n // cols, cols


def kernel_of(algorithm, n, x, y, out):
    """The kernel on device data, writing into out (axpy: into y, as tandem's)."""
    import torch
    rows, cols = softmax_shape(n)

    def kernel():
        if algorithm == "add":
            torch.add(x, y, out=out)
        elif algorithm == "axpy":
            y.add_(x, alpha=1e-3)
        elif algorithm == "sum":
            torch.sum(x, dim=0, keepdim=True, out=out)
        elif algorithm == "dot":
            torch.dot(x, y, out=out.view(()))  # into out itself: no second kernel
        elif algorithm == "scan":
            torch.cumsum(x, dim=0, out=out)
        elif algorithm == "softmax":
            torch.softmax(x.view(rows, cols), 1, out=out.view(rows, cols))
        else:
            torch.mm(x, y, out=out)

    return kernel


def time_end_to_end(device, kernel, x, y, result, hx, hy, uses_y):
    """Milliseconds end to end (inputs up, kernel, result back) from pageable and (GPU) pinned memory."""
    import torch
    page_x = torch.from_numpy(hx.copy())
    page_y = torch.from_numpy(hy.copy())
    page_out = torch.empty(result.numel(), dtype=torch.float32)

    def e2e_pageable():
        x.view(-1).copy_(page_x)
        if uses_y:
            y.view(-1).copy_(page_y)
        kernel()
        page_out.copy_(result.view(-1))

    pageable_ms = device.time_host(e2e_pageable)
    pinned_ms = 0.0
    if device.gpu:
        pin_x, pin_y = page_x.pin_memory(), page_y.pin_memory()
        pin_out = torch.empty(result.numel(), dtype=torch.float32).pin_memory()

        def e2e_pinned():
            x.view(-1).copy_(pin_x, non_blocking=True)
            if uses_y:
                y.view(-1).copy_(pin_y, non_blocking=True)
            kernel()
            pin_out.copy_(result.view(-1), non_blocking=True)

        pinned_ms = device.time_host(e2e_pinned)
    return pageable_ms, pinned_ms


def is_right(backend, algorithm, n, got, hx, hy):
    """Whether got, the result on hx and hy, is within rounding of float64 NumPy's (if not, says so)."""
    import numpy as np
    dx, dy = hx.astype(np.float64), hy.astype(np.float64)
    if algorithm == "add":
        want, scale = dx + dy, 2.0
    elif algorithm == "axpy":
        want, scale = dy + 1e-3 * dx, 1.0
    elif algorithm == "sum":
        want, scale = np.array([dx.sum()]), float(np.abs(dx).sum())
    elif algorithm == "dot":
        want, scale = np.array([dx @ dy]), float(np.abs(dx * dy).sum())
    elif algorithm == "scan":
        want, scale = np.cumsum(dx), float(np.abs(dx).sum())
    elif algorithm == "softmax":
        rows, cols = softmax_shape(n)
        e = np.exp(dx.reshape(rows, cols) - dx.reshape(rows, cols).max(axis=1, keepdims=True))
        want, scale = (e / e.sum(axis=1, keepdims=True)).reshape(-1), 1.0
    else:
        want = (dx.reshape(n, n) @ dy.reshape(n, n)).reshape(-1)
        scale = float(n)
    err = float(np.max(np.abs(got - want)))
    elems = hx.size
    bound = 1e-5 * scale * (np.log2(max(elems, 2)) if algorithm in ("sum", "dot", "scan") else 1) + 1e-6
    if not err <= bound:
        print(f"pytorch_ops.py: {algorithm} at {n} is off by {err:g} (bound {bound:g}) on {backend}",
              file=sys.stderr)
        return False
    return True


def measure(device, algorithm, n):
    """One algorithm at one size, timed and checked: its row (printed), or None when the result is wrong."""
    import numpy as np
    import torch
    mm = algorithm == "matmul"
    elems = n * n if mm else n
    hx = device.rng.uniform(-1, 1, elems).astype(np.float32)
    hy = device.rng.uniform(-1, 1, elems).astype(np.float32)
    x = torch.tensor(hx, device=device.dev)  # copies (from_numpy would share hx on the CPU)
    y = torch.tensor(hy, device=device.dev)
    scalar = algorithm in ("sum", "dot")
    out = torch.empty(1 if scalar else elems, dtype=torch.float32, device=device.dev)
    if mm:
        x, y, out = x.view(n, n), y.view(n, n), out.view(n, n)
    kernel = kernel_of(algorithm, n, x, y, out)
    nbytes = {"add": 12.0 * n, "axpy": 12.0 * n, "sum": 4.0 * n, "dot": 8.0 * n, "scan": 8.0 * n,
              "softmax": 8.0 * n, "matmul": 12.0 * n * n}[algorithm]
    flops = 2.0 * n * n * n if mm else 0.0
    flush = device.flusher is not None and 3 * 4 * elems < device.flush_bytes

    # The limit beside it, as the sweep measures it: a device copy of n floats.
    ca = torch.empty(elems, dtype=torch.float32, device=device.dev)
    cb = torch.empty(elems, dtype=torch.float32, device=device.dev)
    ca.fill_(1.0)
    copy_ms = device.time_kernel(lambda: cb.copy_(ca), flush)[0]
    del ca, cb

    y0 = y.clone()
    median, lo, hi, reps = device.time_kernel(kernel, flush)
    result = y if algorithm == "axpy" else out
    pageable_ms, pinned_ms = time_end_to_end(device, kernel, x, y, result, hx, hy,
                                             uses_y=algorithm not in ("sum", "scan", "softmax"))

    # Checked once more from the inputs (axpy from y as it was), against float64 NumPy.
    y.copy_(y0)
    kernel()
    if not is_right(device.backend, algorithm, n, result.double().cpu().numpy().reshape(-1), hx, hy):
        return None

    row = {"algorithm": algorithm, "backend": device.backend, "kind": "gpu" if device.gpu else "cpu",
           "variant": "torch", "size": n, "bytes": nbytes, "flops": flops, "kernel_ms": median, "kernel_min_ms": lo,
           "kernel_max_ms": hi, "reps": reps, "e2e_pageable_ms": pageable_ms, "e2e_pinned_ms": pinned_ms,
           "e2e_overlap_ms": None, "e2e_managed_ms": None, "flushed": flush,
           "gbps": nbytes / (median * 1e6), "gflops": flops / (median * 1e6) if mm else None,
           "copy_gbps": 8.0 * elems / (copy_ms * 1e6), "vendor_gflops": None}
    rate = f"{row['gflops']:.1f} GFLOP/s" if mm else f"{row['gbps']:.1f} GB/s"
    print(f"{device.backend:10} {algorithm:7} {n:>10}  kernel {median:10.4f} ms  {rate:>16}  "
          f"end to end {pageable_ms:10.4f} ms{f' (pinned {pinned_ms:.4f})' if device.gpu else ''}"
          f"{'  (cold)' if flush else ''}", flush=True)
    return row


def sweep(device):
    """One measurement of every algorithm and size: the rows, or None when a result is wrong."""
    results = []
    for algorithm in device.args.algorithm or ALGORITHMS:
        for n in sizes(algorithm, device.args.full):
            row = measure(device, algorithm, n)
            if row is None:
                return None
            results.append(row)
    return results


def versus_tandem(device, results, tandem_rounds):
    """tandem's kernel times against PyTorch's, row by row (printed): the JSON's versus_tandem."""
    args = device.args
    theirs = merge_rounds(tandem_rounds)
    print(f"\ntandem ({'cuda' if device.gpu else 'openmp'}) against {device.backend}, kernel only, medians of "
          f"{args.rounds} alternating rounds{' (warm)' if args.warm else ''}; speed > 1: tandem faster")
    versus = []
    for r in results:
        t = next((u for u in theirs if u["algorithm"] == r["algorithm"] and u["size"] == r["size"]), None)
        if t is None:
            continue
        speed = r["kernel_ms"] / t["kernel_ms"]
        versus.append({"algorithm": r["algorithm"], "size": r["size"], "torch_ms": r["kernel_ms"],
                       "tandem_ms": t["kernel_ms"], "tandem_speed": speed})
        print(f"{r['algorithm']:8} {r['size']:>10}  torch {r['kernel_ms']:10.4f} ms  tandem "
              f"{t['kernel_ms']:10.4f} ms  speed {speed:6.2f}x")
    return versus


def main() -> int:
    args = parse_args()
    try:
        import numpy  # noqa: F401  (the reference results)
        import torch
    except ImportError as e:
        print(f"pytorch_ops.py: {e.name} is not installed here; nothing to compare against", file=sys.stderr)
        return 2
    if args.device not in ("cuda", "cpu"):
        print(f"pytorch_ops.py: --device {args.device}: give cuda or cpu", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_ops.py: no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    device = TorchDevice(args)
    device.warm_up()
    if args.rounds < 1:
        print("pytorch_ops.py: --rounds must be at least 1", file=sys.stderr)
        return 2
    # PyTorch and (with --tandem) tandem in turns, each round a whole sweep.
    torch_rounds, tandem_rounds = [], []
    for _ in range(args.rounds if args.tandem else 1):
        rows = sweep(device)
        if rows is None:
            return 1
        torch_rounds.append(rows)
        if args.tandem:
            rows = run_tandem(args, "cuda" if device.gpu else "openmp")
            if rows is None:
                return 1
            tandem_rounds.append(rows)
    results = merge_rounds(torch_rounds)
    versus = versus_tandem(device, results, tandem_rounds) if args.tandem else []

    doc = {"command": "python3 bench/pytorch_ops.py " + " ".join(sys.argv[1:]),
           "date": datetime.date.today().isoformat(), "torch": torch.__version__,
           "backends": {device.backend: device.name}, "results": results}
    if versus:
        doc["versus_tandem"] = versus
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
