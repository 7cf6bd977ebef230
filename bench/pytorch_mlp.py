#!/usr/bin/env python3
"""The PyTorch peer of tandem_bench_ml: the same 784-W-W-10 MLP (f32, Adam, softmax
cross-entropy, data already on the device, batches gathered by a shuffled index) timed on the
same widths and batches, eager mode. Run it on the GPU machine beside
`tandem_bench_ml --backend cuda` and compare samples/s row by row.

PyTorch is not a build dependency of tandem: this script is only for machines that have it.

usage: python3 bench/pytorch_mlp.py [--quick] [--device cuda|cpu] [--json FILE]
"""
import argparse
import json
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="widths 64, 256 and batches 256, 1024 only")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
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
    dev = torch.device(args.device)
    widths = [64, 256] if args.quick else [64, 128, 256, 1024]
    batches = [256, 1024] if args.quick else [256, 1024, 4096, 16384]

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    rows = []
    name = torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"
    print(f"PyTorch {torch.__version__} eager, 784-W-W-10, f32, Adam, data on the device: {name}")
    print(f"{'width':>6} {'batch':>7} {'ms/step':>10} {'samples/s':>12}")
    for w in widths:
        for b in batches:
            torch.manual_seed(1)
            n = 2 * b
            x = torch.randn(n, 784, device=dev)
            y = torch.randint(0, 10, (n,), device=dev)
            model = torch.nn.Sequential(torch.nn.Linear(784, w), torch.nn.ReLU(), torch.nn.Linear(w, w),
                                        torch.nn.ReLU(), torch.nn.Linear(w, 10)).to(dev)
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            loss_fn = torch.nn.CrossEntropyLoss()

            def epoch():
                order = torch.randperm(n, device=dev)
                for k in range(0, n, b):
                    idx = order[k:k + b]
                    opt.zero_grad(set_to_none=True)
                    loss = loss_fn(model(x[idx]), y[idx])
                    loss.backward()
                    opt.step()

            epoch()  # warm-up, as tandem_bench_ml does
            sync()
            t0 = time.perf_counter()
            for _ in range(2):
                epoch()
            sync()
            step = (time.perf_counter() - t0) / 4
            rows.append({"width": w, "batch": b, "step_seconds": step, "samples_per_second": b / step})
            print(f"{w:>6} {b:>7} {1e3 * step:>10.3f} {b / step:>12.0f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "pytorch_mlp.py", "device": name, "torch": torch.__version__,
                       "date": time.strftime("%Y-%m-%d"), "mlp": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
