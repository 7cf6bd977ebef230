#!/usr/bin/env python3
"""The openmp backend on a busy machine: tandem_bench_busy's ops and MLP epoch timed quiet and
beside one busy process per core (a spinning Python process each), each way with the backend's
own thread choice ("adaptive") and with OMP_NUM_THREADS fixing the team at one thread and at one
per core. The targets: busy adaptive <= 2x quiet adaptive and <= 1.1x busy one-thread for
every op (never slower than the same work on one thread, within the noise); quiet adaptive
within 10% of quiet with the team fixed at one per core (the check costs nothing when quiet).
Then, quiet, each call after --pause seconds of sleep (the team's threads asleep by then, as in a
program that computes now and then), adaptive and on one thread: the target, no cliff, adaptive
<= 2x one thread after the same pause. Rounds alternate the modes; the medians of the rounds are
judged. --json writes them.

usage: python3 bench/busy_machine.py --bench build/cpu/bench/tandem_bench_busy [--rounds 3]
                                     [--pause 0.25] [--json FILE]
"""
import argparse
import datetime
import json
import multiprocessing
import os
import statistics
import subprocess
import sys


def spin(_):
    while True:
        pass


def run(bench, env_extra, reps, pause_s=0.0):
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    env.update(env_extra)
    out = subprocess.run([bench, "--reps", str(reps), "--pause", str(round(pause_s * 1000))], capture_output=True,
                         text=True, env=env, check=False)
    if out.returncode != 0:
        sys.exit(f"{bench} exited {out.returncode}:\n{out.stderr}")
    return {op["name"]: op["ms"] for op in json.loads(out.stdout)["ops"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="the tandem_bench_busy program")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--pause", type=float, default=0.25,
                        help="seconds of sleep before each call of the paused runs (0: none; default 0.25)")
    parser.add_argument("--json")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    modes = {"adaptive": {}, "one thread": {"OMP_NUM_THREADS": "1"}, "fixed team": {"OMP_NUM_THREADS": str(cores)}}
    times = {}  # (load, mode) -> op -> [ms per round]
    for r in range(args.rounds):
        for load in ("quiet", "busy"):
            pool = multiprocessing.Pool(cores) if load == "busy" else None
            if pool is not None:
                pool.map_async(spin, range(cores))
            try:
                order = list(modes) if r % 2 == 0 else list(reversed(modes))
                for mode in order:
                    for op, ms in run(args.bench, modes[mode], args.reps).items():
                        times.setdefault((load, mode), {}).setdefault(op, []).append(ms)
            finally:
                if pool is not None:
                    pool.terminate()
                    pool.join()
        if args.pause > 0:
            for mode in (["adaptive", "one thread"] if r % 2 == 0 else ["one thread", "adaptive"]):
                for op, ms in run(args.bench, modes[mode], args.reps, args.pause).items():
                    times.setdefault(("paused", mode), {}).setdefault(op, []).append(ms)
    med = {key: {op: statistics.median(v) for op, v in ops.items()} for key, ops in times.items()}
    ops = list(med[("quiet", "adaptive")])
    print(f"openmp on a busy machine: {cores} cores, one spinning process per core when busy; "
          f"median ms of {args.rounds} rounds")
    print(f"{'op':34} {'quiet':>8} {'quiet 1t':>9} {'quiet fix':>9} {'busy':>8} {'busy 1t':>8} {'busy fix':>9}  verdict")
    missed = 0
    rows = []
    for op in ops:
        q, q1, qf = med[("quiet", "adaptive")][op], med[("quiet", "one thread")][op], med[("quiet", "fixed team")][op]
        b, b1, bf = med[("busy", "adaptive")][op], med[("busy", "one thread")][op], med[("busy", "fixed team")][op]
        ok = b <= 2 * q and b <= 1.1 * b1 and q <= 1.1 * qf
        row = {"op": op, "quiet": q, "quiet_one_thread": q1, "quiet_fixed": qf, "busy": b,
               "busy_one_thread": b1, "busy_fixed": bf}
        paused = ""
        if args.pause > 0:
            p, p1 = med[("paused", "adaptive")][op], med[("paused", "one thread")][op]
            ok = ok and p <= 2 * p1
            row.update({"paused": p, "paused_one_thread": p1})
            paused = f"; after {args.pause} s pauses {p:.3f} ms, {p / p1:.2f}x one thread's {p1:.3f}"
        missed += not ok
        print(f"{op:34} {q:8.3f} {q1:9.3f} {qf:9.3f} {b:8.3f} {b1:8.3f} {bf:9.3f}  "
              f"{'met' if ok else 'MISSED'} (busy/quiet {b / q:.2f}, busy/one thread {b / b1:.2f}, "
              f"quiet/fixed {q / qf:.2f}; the fixed team busy: {bf / q:.1f}x quiet{paused})")
        row["met"] = ok
        rows.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": "bench/busy_machine.py", "date": datetime.date.today().isoformat(),
                       "cores": cores, "rounds": args.rounds, "pause_s": args.pause, "rows": rows}, f, indent=1)
    print(f"{len(ops) - missed} of {len(ops)} targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
