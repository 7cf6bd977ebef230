#!/usr/bin/env python3
"""bf16 matmul on the CPU: tandem's openmp tiers (tandem_bench_bf16) against PyTorch's bf16
matmul (oneDNN, which runs AMX or AVX512-BF16 kernels where the CPU has them), in alternating
rounds in one run, with the same thread count. Prints each size's GFLOP/s and tandem's best tier
as a share of PyTorch, and the roofs tandem_bench_bf16 measured beside the tiers (the f32 FMA
roof; the vdpbf16ps roof where the CPU has AVX512-BF16; the AMX tile roof where it has AMX-BF16)
with the tensor_core tier's engine;
--json writes the medians, the CPU, the thread count and what PyTorch ran
(torch.backends.cpu.get_cpu_capability()).

Where PyTorch has no bf16 kernel for the CPU (AVX2-only CPUs: its fallback ran at 0.8 GFLOP/s,
2.7 s for one 1024^3 product), larger sizes would take minutes a call. So in the first round a
size whose call would take more than --max-call-seconds, judged from the longest call at the
size below times the ratio of their cubes, is not timed for PyTorch, nor any larger one, in any
round; the output says so (JSON: "torch": null with the reason) instead of a ratio. The
smallest size is always timed.

PyTorch is not a build dependency of tandem: this script is only for machines that have it.

usage: python3 bench/pytorch_bf16_matmul.py --tandem build/cpu/bench/tandem_bench_bf16
                                            [--sizes 1024,2048,4096] [--rounds 3] [--threads N]
                                            [--max-call-seconds 5] [--json FILE]
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


def torch_gflops(torch, n, reps):
    """The median GFLOP/s of reps bf16 products of n x n after a warm-up, checked against f32,
    and the longest call's seconds."""
    g = torch.Generator().manual_seed(n)
    a = (torch.rand(n, n, generator=g) - 0.5).to(torch.bfloat16)
    b = (torch.rand(n, n, generator=g) - 0.5).to(torch.bfloat16)
    t0 = time.perf_counter()
    c = torch.matmul(a, b)
    warm_up = time.perf_counter() - t0
    want = torch.matmul(a.float(), b.float())
    if not torch.allclose(c.float(), want, rtol=0, atol=1e-2 * n ** 0.5):
        sys.exit(f"PyTorch's bf16 matmul at {n} is not within bf16 rounding of the f32 product")
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.matmul(a, b)
        times.append(time.perf_counter() - t0)
    return 2.0 * n ** 3 / statistics.median(times) / 1e9, max(times + [warm_up])


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tandem", required=True, help="the tandem_bench_bf16 program")
    parser.add_argument("--sizes", default="1024,2048,4096")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--max-call-seconds", type=float, default=5.0,
                        help="sizes whose PyTorch call would take longer, judged from the size below, are not timed")
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.max_call_seconds <= 0:
        parser.error("--max-call-seconds must be positive")
    if args.rounds < 1 or args.reps < 1:
        parser.error("--rounds and --reps must be at least 1")
    try:
        sizes = sorted({int(s) for s in args.sizes.split(",")})
    except ValueError:
        parser.error(f"--sizes: not a list of whole numbers: {args.sizes}")
    if sizes[0] < 1:
        parser.error("--sizes must be positive")
    try:
        import torch
    except ImportError:
        print("SKIPPED: PyTorch is not installed (pip install torch)")
        return 0
    torch.set_num_threads(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    ours, theirs, roofs, engine = {}, {}, {}, "not reported"
    torch_sizes = None  # the sizes PyTorch is timed at, chosen in its first round
    not_timed = {}  # size -> why PyTorch is not timed there
    for r in range(args.rounds):
        # Alternating, and each round starting with the other side, so that a drift of the
        # machine's speed falls on both alike.
        order = ["tandem", "torch"] if r % 2 == 0 else ["torch", "tandem"]
        for side in order:
            if side == "torch":
                first = torch_sizes is None
                previous = None  # (n, seconds of its longest call) of the size timed before
                for n in sizes if first else torch_sizes:
                    if first and previous is not None:
                        predicted = previous[1] * (n / previous[0]) ** 3
                        if predicted > args.max_call_seconds:
                            reason = (f"PyTorch not timed: a call at {previous[0]}^3 took {previous[1]:.3g} s, "
                                      f"so one at {n}^3 would take about {predicted:.3g} s "
                                      f"(over --max-call-seconds {args.max_call_seconds:g})")
                            not_timed = {m: reason for m in sizes if m >= n}
                            break
                    gflops, longest = torch_gflops(torch, n, args.reps)
                    theirs.setdefault(n, []).append(gflops)
                    previous = (n, longest)
                if first:
                    torch_sizes = [n for n in sizes if n not in not_timed]
            else:
                out = subprocess.run([args.tandem, "--sizes", ",".join(map(str, sizes)), "--reps", str(args.reps),
                                      "--json"],
                                     capture_output=True, text=True, env=env, check=False)
                if out.returncode != 0:
                    sys.exit(f"{args.tandem} exited {out.returncode}:\n{out.stderr}")
                result = json.loads(out.stdout)
                for row in result["rows"]:
                    ours.setdefault((row["n"], row["tier"]), []).append(row["gflops"])
                for name, gflops in result.get("roofs", {}).items():
                    roofs.setdefault(name, []).append(gflops)
                engine = result.get("tensor_core_engine", engine)
    capability = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else "?"
    print(f"bf16 matmul, {args.threads} threads, {cpu_model()}; PyTorch {torch.__version__} ({capability}); "
          f"medians of {args.rounds} alternating rounds")
    tiers = sorted({t for (_, t) in ours})
    print(f"{'size':>7} " + " ".join(f"{t:>17}" for t in tiers) + f" {'torch':>9}  best tandem / torch")
    rows = []
    for n in sizes:
        mine = {t: statistics.median(ours[(n, t)]) for t in tiers if (n, t) in ours}
        best = max(mine.values())
        cells = f"{n:>6}^3 " + " ".join(f"{mine.get(t, 0):17.1f}" for t in tiers)
        if n in not_timed:
            reason = not_timed[n]
            print(cells + f" {'-':>9}  {reason}")
            rows.append({"n": n, "tandem": mine, "torch": None, "ratio": None, "torch_not_timed": reason})
            continue
        peer = statistics.median(theirs[n])
        print(cells + f" {peer:9.1f}  {best / peer:6.2f}x")
        rows.append({"n": n, "tandem": mine, "torch": peer, "ratio": best / peer})
    roof = {name: statistics.median(v) for name, v in roofs.items()}
    print(f"tensor_core tier: {engine}; roofs on {args.threads} threads (medians): "
          + ", ".join(f"{name} {v:.1f}" for name, v in roof.items()) + " GFLOP/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "bench/pytorch_bf16_matmul.py", "date": datetime.date.today().isoformat(),
                       "cpu": cpu_model(), "threads": args.threads, "torch": torch.__version__,
                       "torch_cpu_capability": capability, "rounds": args.rounds, "rows": rows,
                       "tensor_core_engine": engine, "roofs": roof, "roofs_per_round": roofs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
