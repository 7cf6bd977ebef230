#!/usr/bin/env python3
"""Plots of a `tandem bench` or `tandem compare` run (results.json, as --plot writes it):

  time_<algorithm>.png     kernel and end-to-end time vs size, one line per backend
  speedup_<algorithm>.png  speed-up over the CPU baseline vs size, the end-to-end crossover marked
  roofline.png             each kernel at its arithmetic intensity under each backend's measured
                           roofs (copy bandwidth, best matmul rate)
  transfers_<algorithm>.png  end-to-end time per way of moving the data (pageable, pinned,
                           overlapped on two queues, managed), one panel per backend
and of `tandem bench bandwidth` (bandwidth.png: host <-> device GB/s by size, pageable vs pinned)
and `tandem bench memory` (memory.png: read bandwidth by working set, the cache sizes marked; on a
GPU also shared memory and the host-device link), and of the targets benchmarks tandem_bench_cpu
and tandem_bench_gpu (targets.png: each row's ratio to its peer measured in the same run, with
its target marked).

Peers measured by other programs in the same rows (bench/pytorch_ops.py) are drawn beside the
backends when their JSON files follow OUT_DIR.

usage: python3 bench/plot.py results.json OUT_DIR [PEER.json ...]
       (needs matplotlib: apt install python3-matplotlib)
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Floating-point operations per element of the memory-bound ops (matmul carries its own count).
FLOPS_PER_ELEMENT = {"add": 1, "axpy": 2, "sum": 1, "dot": 2, "scan": 1, "softmax": 5}


def default_rows(results):
    """One row per (algorithm, backend, size): the default variant, else the first measured."""
    rows = {}
    for r in results:
        key = (r["algorithm"], r["backend"], r["size"])
        if key not in rows or r["variant"] in ("default", "register_blocked"):
            rows[key] = r
    return rows


# The ways of moving data end to end, as the JSON names them, and how they are drawn.
WAYS = (("e2e_pageable_ms", "pageable", "--"), ("e2e_pinned_ms", "pinned", "-"),
        ("e2e_overlap_ms", "pinned, overlapped on two queues", "-."), ("e2e_managed_ms", "managed memory", ":"))


def measured(r, key):
    """r[key] where it was measured, else 0 (results write null, older ones 0, for not measured)."""
    return r.get(key) or 0


def best_e2e(r):
    """The fastest end-to-end way measured."""
    return min(r[k] for k, _, _ in WAYS if measured(r, k) > 0)


def baseline_of(results, data):
    if "baseline" in data:
        return data["baseline"]
    cpus = [r["backend"] for r in results if r["kind"] == "cpu"]
    return "openmp" if "openmp" in cpus else (cpus[0] if cpus else None)


def human(b):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift:
            return f"{b / (1 << shift):g} {unit}"
    return f"{b} B"


def save(fig, out, name):
    """Writes the figure as out/name and returns the path."""
    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_bandwidth(data, out):
    rows = data["bandwidth"]
    sizes = [r["bytes"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, style in (("to_device_pageable_gbps", "host to device, pageable", "--"),
                              ("to_device_pinned_gbps", "host to device, pinned", "-"),
                              ("to_host_pageable_gbps", "device to host, pageable", "--"),
                              ("to_host_pinned_gbps", "device to host, pinned", "-")):
        ax.plot(sizes, [r[key] for r in rows], linestyle=style, marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes per copy")
    ax.set_ylabel("GB/s")
    pinned = all(r["pinned"] for r in rows)
    note = "" if pinned else " (no page-locked memory on this backend)"
    ax.set_title(f"{data['backend']}: host-device copies{note}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return [save(fig, out, "bandwidth.png")]


def plot_memory(data, out):
    rows = data["memory"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot([r["bytes"] for r in rows], [r["read_gbps"] for r in rows], marker="o", label="read bandwidth")
    seen = set()
    for c in data.get("caches", []):
        if c["level"] in seen:
            continue
        seen.add(c["level"])
        ax.axvline(c["bytes"], color="gray", linestyle=":", alpha=0.8)
        ax.annotate(f"{c['level']} {human(c['bytes'])}", (c["bytes"], 0), xycoords=("data", "axes fraction"),
                    xytext=(3, 6), textcoords="offset points", fontsize=8, rotation=90)
    # A GPU's run (--backend) also has on-chip shared memory and the host-device link beside it.
    for key, label, style in (("shared_gbps", "shared memory (on chip)", "--"), ("link_gbps", "host to device link, pinned", ":")):
        if data.get(key, 0) > 0:
            ax.axhline(data[key], linestyle=style, color="tab:red" if key == "shared_gbps" else "tab:green",
                       label=f"{label}: {data[key]:.3g} GB/s")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("working set (bytes)")
    ax.set_ylabel("GB/s")
    ax.set_ylim(bottom=0)
    who = f"{data['backend']}, {data['threads']} threads" if "device" in data else f"{data['threads']} threads"
    ax.set_title(f"memory hierarchy, measured: {who} ({data['date']})", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return [save(fig, out, "memory.png")]


def plot_targets(data, out):
    rows = [r for r in data["results"] if r["peer_value"] > 0]
    labels = [f"{r['group']}: {r['name']}  (vs {r['peer']})" for r in rows]
    ratios = [100 * r["ratio"] for r in rows]
    colors = ["tab:gray" if r["met"] is None else ("tab:green" if r["met"] else "tab:red") for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rows) + 1.5))
    y = list(range(len(rows)))
    ax.barh(y, ratios, color=colors)
    for i, r in enumerate(rows):
        if r["target"] > 0:
            ax.plot([100 * r["target"]] * 2, [i - 0.4, i + 0.4], color="black", linewidth=2)
        ax.annotate(f"{100 * r['ratio']:.0f}%", (ratios[i], i), xytext=(3, -3), textcoords="offset points", fontsize=7)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.axvline(100, color="gray", linestyle=":")
    ax.set_xlabel("% of the peer measured in the same run (black bar: the target; green met, red missed)")
    who = data.get("device", data.get("machine", ""))
    ax.set_title(f"{data.get('backend', 'openmp')} on {who} ({data['date']})", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    return [save(fig, out, "targets.png")]


def size_label(algo):
    """The x axis of an algorithm's plots: what its size counts."""
    return "N (N x N x N)" if algo == "matmul" else "elements (f32)"


def points(rows, algo, backend):
    """(size, row) of one algorithm on one backend, by size."""
    return sorted((k[2], v) for k, v in rows.items() if k[0] == algo and k[1] == backend)


def log_axes(ax, xlabel, ylabel):
    """Log-log axes (sizes in powers of two) with their labels, a grid and the legend."""
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def plot_time(data, rows, backends, algo, out):
    """time_<algo>.png: kernel and best end-to-end time vs size, one line per backend."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for b in backends:
        pts = points(rows, algo, b)
        if not pts:
            continue
        sizes = [p[0] for p in pts]
        line = ax.plot(sizes, [p[1]["kernel_ms"] for p in pts], marker="o", label=f"{b} kernel")[0]
        ax.plot(sizes, [best_e2e(p[1]) for p in pts], marker="x",
                linestyle="--", color=line.get_color(), label=f"{b} end to end")
    ax.set_title(f"{algo}: time vs size ({data.get('date', '')})")
    log_axes(ax, size_label(algo), "time (ms)")
    return save(fig, out, f"time_{algo}.png")


def crossover(sizes, speedups):
    """The least size from which every larger one is faster than the baseline, else None."""
    cross = None
    for s, v in zip(reversed(sizes), reversed(speedups)):
        if v > 1:
            cross = s
        else:
            break
    return cross


def plot_speedup(rows, base, others, algo, out):
    """speedup_<algo>.png: each backend's speed-up over the baseline vs size, the end-to-end
    crossover marked."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for n_b, b in enumerate(others):
        pts = [p for p in points(rows, algo, b) if (algo, base, p[0]) in rows]
        if not pts:
            continue
        sizes = [p[0] for p in pts]
        ref = [rows[(algo, base, s)] for s in sizes]
        kern = [r["kernel_ms"] / p[1]["kernel_ms"] for r, p in zip(ref, pts)]
        e2e = [r["e2e_pageable_ms"] / best_e2e(p[1]) for r, p in zip(ref, pts)]
        line = ax.plot(sizes, kern, marker="o", label=f"{b} kernel only")[0]
        ax.plot(sizes, e2e, marker="x", linestyle="--", color=line.get_color(), label=f"{b} end to end")
        cross = crossover(sizes, e2e)
        if cross is not None:
            ax.axvline(cross, color=line.get_color(), alpha=0.4)
            # one line of text per backend, so that two crossing at one size stay readable
            ax.annotate(f"{b} wins from {cross}", (cross, 1), textcoords="offset points",
                        xytext=(4, 8 + 11 * n_b), fontsize=8, color=line.get_color())
    ax.axhline(1, color="black", linewidth=0.8)
    ax.set_title(f"{algo}: speed-up over {base}")
    log_axes(ax, size_label(algo), f"speed-up over {base}")
    return save(fig, out, f"speedup_{algo}.png")


def plot_transfers(rows, backends, algo, out):
    """transfers_<algo>.png: end-to-end time per way of moving the data, a panel per backend that
    has more than two ways measured (overlap or managed memory); None where none has."""
    have = [b for b in backends
            if any(k[0] == algo and k[1] == b and (measured(v, "e2e_overlap_ms") > 0 or measured(v, "e2e_managed_ms") > 0)
                   for k, v in rows.items())]
    if not have:
        return None
    fig, axes = plt.subplots(1, len(have), figsize=(5.5 * len(have), 4.5), squeeze=False)
    for ax, b in zip(axes[0], have):
        pts = points(rows, algo, b)
        for key, label, style in WAYS:
            got = [(s, v[key]) for s, v in pts if measured(v, key) > 0]
            if got:
                ax.plot([g[0] for g in got], [g[1] for g in got], linestyle=style, marker="o", label=label)
        ax.plot([p[0] for p in pts], [p[1]["kernel_ms"] for p in pts], color="black", alpha=0.5, marker=".",
                label="kernel only")
        ax.set_title(f"{algo} on {b}: end to end, by transfer", fontsize=10)
        log_axes(ax, "elements (f32)", "time (ms)")
    return save(fig, out, f"transfers_{algo}.png")


def plot_roofline(results, rows, backends, algorithms, out):
    """roofline.png: per backend, the best copy bandwidth and the best matmul rate it reached, and
    each algorithm at its largest size placed by arithmetic intensity (flops per byte moved)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for b in backends:
        mine = [r for r in results if r["backend"] == b]
        # The memory roof: the copy bandwidth at the largest vector size measured (past the caches).
        vec = [r for r in mine if r["algorithm"] != "matmul"] or mine
        bw = max(vec, key=lambda r: r["size"])["copy_gbps"] if vec else 0
        peak = max([measured(r, "gflops") for r in mine] + [measured(r, "vendor_gflops") for r in mine] + [0])
        if bw <= 0:
            continue
        xs = [2 ** (i / 4) for i in range(-24, 41)]
        roof = [min(bw * x, peak) if peak > 0 else bw * x for x in xs]
        line = ax.plot(xs, roof, label=f"{b} roofs: copy {bw:.0f} GB/s at the largest size, {peak:.0f} GFLOP/s")[0]
        for algo in algorithms:
            pts = [v for k, v in rows.items() if k[0] == algo and k[1] == b]
            if not pts:
                continue
            r = max(pts, key=lambda v: v["size"])
            flops = r["flops"] if r["flops"] > 0 else FLOPS_PER_ELEMENT[algo] * r["size"]
            ai = flops / r["bytes"]
            rate = flops / (r["kernel_ms"] * 1e6)
            ax.plot([ai], [rate], marker="o", color=line.get_color())
            k = algorithms.index(algo)
            ax.annotate(algo, (ai, rate), textcoords="offset points", xytext=(5, -12 if k % 2 else 5), fontsize=8)
    ax.set_title("roofline: measured roofs, each kernel at its largest size")
    log_axes(ax, "arithmetic intensity (flop / byte)", "GFLOP/s")
    return save(fig, out, "roofline.png")


def plot_sweep(data, out):
    """The plots of a bench or compare run: time and speed-up per algorithm, transfers, roofline."""
    results = data["results"]
    rows = default_rows(results)
    backends = sorted({r["backend"] for r in results})
    algorithms = [a for a in ["add", "axpy", "sum", "dot", "scan", "softmax", "matmul"] if any(r["algorithm"] == a for r in results)]
    base = baseline_of(results, data)
    others = [b for b in backends if b != base]
    written = []
    for algo in algorithms:
        written.append(plot_time(data, rows, backends, algo, out))
        if base is not None and others:
            written.append(plot_speedup(rows, base, others, algo, out))
    for algo in algorithms:
        path = plot_transfers(rows, backends, algo, out)
        if path is not None:
            written.append(path)
    written.append(plot_roofline(results, rows, backends, algorithms, out))
    return written


def load(paths):
    """The run in paths[0] with the results of the peers in the other paths added; None after
    saying why they cannot be."""
    with open(paths[0]) as f:
        data = json.load(f)
    for peer in paths[1:]:
        with open(peer) as f:
            extra = json.load(f)
        if "results" not in data or "results" not in extra:
            print(f"plot.py: {peer}: peers go beside a bench or compare run (both need \"results\")", file=sys.stderr)
            return None
        data["results"] = data["results"] + extra["results"]
    return data


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    data = load([sys.argv[1]] + sys.argv[3:])
    if data is None:
        return 2
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)
    if "bandwidth" in data:
        written = plot_bandwidth(data, out)
    elif "memory" in data:
        written = plot_memory(data, out)
    elif data["results"] and "group" in data["results"][0]:
        written = plot_targets(data, out)
    else:
        written = plot_sweep(data, out)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
