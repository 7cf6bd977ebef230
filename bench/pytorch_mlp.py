#!/usr/bin/env python3
"""The PyTorch peer of tandem_bench_ml: the same 784-W-W-10 MLP (f32, Adam, softmax
cross-entropy, data already on the device, batches gathered by a shuffled index) timed on the
same widths and batches, eager and, on CUDA, with the whole step (gather, forward, backward,
Adam) captured once in a CUDA graph and replayed (torch.cuda.graphs). Run it on the GPU machine
after `tandem_bench_ml --backend cuda --json ml.json` and give it that file (--tandem): it prints
tandem's step beside PyTorch's, row by row, with the ratios and the targets (tandem's step at
least as fast as PyTorch eager at every width and batch; tandem's --graphs step at least as fast
as PyTorch's CUDA graph at widths up to 256).

PyTorch is not a build dependency of tandem: this script is only for machines that have it.

usage: python3 bench/pytorch_mlp.py [--quick] [--device cuda|cpu] [--no-graphs] [--tandem ML_JSON]
                                    [--backend NAME] [--json FILE]
"""
import argparse
import json
import sys
import time


def tandem_rows(path, backend):
    """tandem_bench_ml's MLP rows of one backend, by (width, batch)."""
    with open(path) as f:
        doc = json.load(f)
    rows = {}
    for r in doc.get("mlp", []):
        if r.get("backend") == backend:
            rows[(r["layers"][1], r["batch"])] = r
    return rows


class Peer:
    """PyTorch's side: one 784-W-W-10 model per row, its step eager or captured, timed."""

    def __init__(self, torch, dev):
        self.torch, self.dev = torch, dev

    def sync(self):
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize()

    def setup(self, w, b, capturable):
        torch, dev = self.torch, self.dev
        torch.manual_seed(1)
        n = 2 * b
        x = torch.randn(n, 784, device=dev)
        y = torch.randint(0, 10, (n,), device=dev)
        model = torch.nn.Sequential(torch.nn.Linear(784, w), torch.nn.ReLU(), torch.nn.Linear(w, w),
                                    torch.nn.ReLU(), torch.nn.Linear(w, 10)).to(dev)
        # capturable: Adam's step may be captured in a graph (its step count stays on the device);
        # eager keeps PyTorch's default
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=capturable)
        return n, x, y, model, opt, torch.nn.CrossEntropyLoss()

    @staticmethod
    def eager_step(model, opt, loss_fn, x, y):
        def step(idx):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
        return step

    def graphed_step(self, model, opt, loss_fn, x, y, b):
        # PyTorch's whole-network capture: warm up on a side stream, capture one step reading the
        # batch through a static index, then replay it with the index copied in.
        torch = self.torch
        static_idx = torch.arange(b, device=self.dev)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            warm = self.eager_step(model, opt, loss_fn, x, y)
            for _ in range(3):
                warm(static_idx)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            loss = loss_fn(model(x[static_idx]), y[static_idx])
            loss.backward()
            opt.step()

        def step(idx):
            static_idx.copy_(idx)
            graph.replay()
        return step

    def timed(self, step, n, b):
        """Seconds per step over 2 epochs of 2 steps, after one epoch of warm-up."""
        def epoch():
            order = self.torch.randperm(n, device=self.dev)
            for k in range(0, n, b):
                step(order[k:k + b])
        epoch()  # warm-up, as tandem_bench_ml does
        self.sync()
        t0 = time.perf_counter()
        for _ in range(2):
            epoch()
        self.sync()
        return (time.perf_counter() - t0) / 4

    def row(self, w, b, graphs):
        n, x, y, model, opt, loss_fn = self.setup(w, b, False)
        row = {"width": w, "batch": b}
        row["step_seconds"] = self.timed(self.eager_step(model, opt, loss_fn, x, y), n, b)
        row["samples_per_second"] = b / row["step_seconds"]
        if graphs:
            n, x, y, model, opt, loss_fn = self.setup(w, b, True)
            row["graph_step_seconds"] = self.timed(self.graphed_step(model, opt, loss_fn, x, y, b), n, b)
        return row


def beside(row, mine, graphs):
    """tandem's row beside PyTorch's: the line's tail, and how many targets it misses."""
    if mine is None:
        return "  (no tandem row)", 0
    ratio = row["step_seconds"] / mine["step_seconds"]
    row["tandem_step_seconds"] = mine["step_seconds"]
    row["tandem_vs_eager"] = ratio
    missed = 0 if ratio >= 1.0 else 1
    line = f" {1e3 * mine['step_seconds']:>10.3f} {ratio:>8.2f}x" + ("" if ratio >= 1.0 else " (missed: >= 1)")
    if graphs and mine.get("graph_step_seconds"):
        gratio = row["graph_step_seconds"] / mine["graph_step_seconds"]
        row["tandem_graph_step_seconds"] = mine["graph_step_seconds"]
        row["tandem_graphs_vs_graph"] = gratio
        line += f" {1e3 * mine['graph_step_seconds']:>13.3f} {gratio:>8.2f}x"
        if row["width"] <= 256 and gratio < 1.0:
            missed += 1
            line += " (missed: >= 1 at widths <= 256)"
    return line, missed


def main() -> int:
    parser = argparse.ArgumentParser(
        description="The PyTorch peer of tandem_bench_ml: its 784-W-W-10 MLP step timed in PyTorch, eager and "
                    "with CUDA graphs, beside tandem's rows with the ratios (--tandem).")
    parser.add_argument("--quick", action="store_true", help="widths 64, 256 and batches 256, 1024 only")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cuda (default) or cpu")
    parser.add_argument("--no-graphs", action="store_true", help="eager only (graphs are timed on cuda only)")
    parser.add_argument("--tandem", metavar="ML_JSON",
                        help="tandem_bench_ml's JSON from the same machine: print its rows beside these, with ratios")
    parser.add_argument("--backend",
                        help="the backend of --tandem's rows to compare (default: cuda, or openmp with --device cpu)")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("pytorch_mlp.py: PyTorch is not installed here; nothing to compare against", file=sys.stderr)
        return 2
    if args.device == "cuda" and not torch.cuda.is_available():
        print("pytorch_mlp.py: no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    theirs = {}
    backend = args.backend or ("cuda" if args.device == "cuda" else "openmp")
    if args.tandem:
        try:
            theirs = tandem_rows(args.tandem, backend)
        except (OSError, ValueError, KeyError, IndexError) as e:
            print(f"pytorch_mlp.py: cannot read tandem_bench_ml's rows from {args.tandem}: {e}", file=sys.stderr)
            return 2
        if not theirs:
            print(f"pytorch_mlp.py: {args.tandem} has no MLP rows of backend {backend!r} (--backend picks one)",
                  file=sys.stderr)
            return 2
    dev = torch.device(args.device)
    peer = Peer(torch, dev)
    graphs = dev.type == "cuda" and not args.no_graphs
    widths = [64, 256] if args.quick else [64, 128, 256, 1024]
    batches = [256, 1024] if args.quick else [256, 1024, 4096, 16384]

    name = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"
    modes = "eager and CUDA graphs" if graphs else "eager"
    print(f"PyTorch {torch.__version__} ({modes}), 784-W-W-10, f32, Adam, data on the device: {name}")
    if theirs:
        print(f"beside tandem_bench_ml's {backend} rows from {args.tandem}; ratio = PyTorch's step / tandem's "
              "(above 1: tandem faster)")
    header = f"{'width':>6} {'batch':>7} {'eager ms':>10} {'samples/s':>12}"
    if graphs:
        header += f" {'graph ms':>10}"
    if theirs:
        header += f" {'tandem ms':>10} {'vs eager':>9}"
        if graphs:
            header += f" {'tandem graph':>13} {'vs graph':>9}"
    print(header)
    rows, missed = [], 0
    for w in widths:
        for b in batches:
            row = peer.row(w, b, graphs)
            line = f"{w:>6} {b:>7} {1e3 * row['step_seconds']:>10.3f} {row['samples_per_second']:>12.0f}"
            if graphs:
                line += f" {1e3 * row['graph_step_seconds']:>10.3f}"
            if theirs:
                tail, misses = beside(row, theirs.get((w, b)), graphs)
                line += tail
                missed += misses
            rows.append(row)
            print(line, flush=True)
    if theirs:
        print(f"targets: tandem's step >= PyTorch eager at every row"
              f"{', its --graphs step >= the CUDA graph at widths <= 256' if graphs else ''}: "
              f"{'met' if missed == 0 else f'{missed} missed'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "pytorch_mlp.py", "device": name, "torch": torch.__version__,
                       "date": time.strftime("%Y-%m-%d"), "modes": modes, "tandem": args.tandem, "mlp": rows},
                      f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
