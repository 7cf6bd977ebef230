#!/usr/bin/env python3
"""Backend modules of a shared libtandem (core/modules.cpp), as a user would meet them.

  modules_test.py hidden --tandem T --library L --matrix M --ml T2 MODULE...
      The machine without the GPU runtimes: libtandem itself must not need any of them (its
      DT_NEEDED entries), and with copies of the modules whose runtime libraries cannot be found
      (each such DT_NEEDED name altered in the copy, as if the library were not installed) first
      on TANDEM_BACKEND_PATH, `tandem info` names each module's missing library,
      `tandem check` passes on the CPU backends, and so do the test matrix's elementwise and
      reduce families on openmp and reference and an MLP step on openmp (the whole matrix and ML
      tests run on those backends in their own CTest entries: loading no GPU module changes no
      kernel, and under ASan the whole of them here took 73 s).
  modules_test.py path --tandem T MODULE
      A module copied to a folder named by TANDEM_BACKEND_PATH is the one loaded (tandem info
      shows its path), and its backend passes `tandem check --quick` where it has a device.
  modules_test.py damaged --tandem T MODULE
      What TANDEM_BACKEND_PATH may name instead of a whole module: the module cut in half, a
      dangling symbolic link, a loop of links, a folder, a text file. `tandem info` must list
      the backend unavailable with that reason (never crash: a truncated library is mapped past
      its end, SIGBUS), load no other copy in its place, and `tandem train` without --backend
      must run on a CPU backend.

Prints SKIPPED (and exits 0) when readelf is missing; exits 1 with the reason on a failure.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The vendor runtimes a module may need: what a machine without a GPU stack lacks.
RUNTIMES = re.compile(r"^lib(cuda|cudart|cublas|cublasLt|nccl|amdhip64|hsa-runtime64|trilinos_kokkos\w*|kokkos\w*)\.so")


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def run(command, env):
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    return done.returncode, done.stdout + done.stderr


def hidden(args):
    runtimes = [n for n in needed(args.library) if RUNTIMES.match(n)]
    if runtimes:
        fail(f"{args.library} needs {', '.join(runtimes)}: it would not load without them")
    with tempfile.TemporaryDirectory() as folder:
        missing = {}
        for module in args.modules:
            data = open(module, "rb").read()
            name = os.path.basename(module)
            gone = [n for n in needed(module) if RUNTIMES.match(n)]
            if not gone:
                fail(f"{name} needs no vendor runtime ({needed(module)}): nothing to hide")
            for n in gone:  # same length: "libcublas.so.13" -> "libXublas.so.13"
                data = data.replace(n.encode(), (n[:3] + "X" + n[4:]).encode())
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
            missing[name] = gone[0][:3] + "X" + gone[0][4:]
        env = dict(os.environ, TANDEM_BACKEND_PATH=folder)
        rc, out = run([args.tandem, "info"], env)
        if rc != 0:
            fail(f"tandem info exited {rc}:\n{out}")
        for name, lib in missing.items():
            backend = name[len("libtandem-"):-len(".so")]
            want = rf"^{backend} +unavailable: {re.escape(os.path.join(folder, name))}: {re.escape(lib)}: cannot open shared object file"
            if not re.search(want, out, re.M):
                fail(f"tandem info does not say why {backend} is unavailable (wanted /{want}/):\n{out}")
            print(f"ok: {backend} unavailable, naming {lib}")
        rc, out = run([args.tandem, "check", "--quick", "--backend", "openmp", "--backend", "reference"], env)
        if rc != 0:
            fail(f"tandem check on the CPU backends exited {rc}:\n{out}")
        print("ok: tandem check --quick passes on openmp and reference")
        for program, backend, cases in [(args.matrix, "openmp", "elementwise,reduce"),
                                         (args.matrix, "reference", "elementwise,reduce"),
                                         (args.ml, "openmp", "*one step equals*")]:
            rc, out = run([program, f"--tandem-backend={backend}", f"--test-case={cases}"], env)
            if rc != 0:
                fail(f"{os.path.basename(program)} on {backend} exited {rc}:\n{out}")
            if not re.search(r"test cases: +[1-9][0-9]* \| +[1-9][0-9]* passed \| 0 failed", out):
                fail(f"{os.path.basename(program)} --test-case={cases} ran no test on {backend}:\n{out}")
            print(f"ok: {os.path.basename(program)} {cases} passes on {backend}")


def path(args):
    with tempfile.TemporaryDirectory() as folder:
        module = args.modules[0]
        copy = os.path.join(folder, os.path.basename(module))
        shutil.copy(module, copy)
        backend = os.path.basename(module)[len("libtandem-"):-len(".so")]
        env = dict(os.environ, TANDEM_BACKEND_PATH="/nonexistent:" + folder)
        rc, out = run([args.tandem, "info"], env)
        if rc != 0 or not re.search(rf"^ +module: +{re.escape(copy)}$", out, re.M):
            fail(f"tandem info (exit {rc}) does not show {copy} as {backend}'s module:\n{out}")
        print(f"ok: {backend} loaded from {copy}")
        if not re.search(rf"^{backend} +available", out, re.M):
            print(f"({backend} has no device here: loaded, not run)")
            return
        rc, out = run([args.tandem, "check", "--quick", "--backend", backend], env)
        if rc != 0:
            fail(f"tandem check --backend {backend} exited {rc}:\n{out}")
        print(f"ok: tandem check --quick passes on {backend}")


def damaged(args, data):
    module = args.modules[0]
    name = os.path.basename(module)
    backend = name[len("libtandem-"):-len(".so")]
    whole = open(module, "rb").read()
    cases = {
        "cut in half": (lambda f: open(f, "wb").write(whole[: len(whole) // 2]), r"truncated: it is \d+ bytes"),
        "a dangling link": (lambda f: os.symlink(f + ".gone", f), r"a symbolic link to a file that does not exist"),
        "a loop of links": (lambda f: (os.symlink(f + ".b", f), os.symlink(f, f + ".b")), r"a loop of symbolic links"),
        "a folder": (lambda f: os.mkdir(f), r"not a regular file"),
        "a text file": (lambda f: open(f, "w").write("not a library\n" * 10), r"not an ELF file"),
    }
    for what, (make, says) in cases.items():
        with tempfile.TemporaryDirectory() as folder:
            entry = os.path.join(folder, name)
            make(entry)
            env = dict(os.environ, TANDEM_BACKEND_PATH=folder)
            rc, out = run([args.tandem, "info", "--json", "-"], env)
            try:
                listed = {b["name"]: b for b in json.loads(out)["backends"]}[backend]
            except (ValueError, KeyError):
                fail(f"{what}: tandem info --json (exit {rc}) gave no entry for {backend}:\n{out}")
            if rc != 0 or listed["available"] or entry not in listed["reason"] or not re.search(says, listed["reason"]):
                fail(f"{what}: tandem info (exit {rc}) does not list {backend} unavailable for '{says}' at {entry}: "
                     f"{listed}")
            if listed["module"] != entry:  # the entry found first is the one used, no other copy
                fail(f"{what}: {backend}'s module is {listed['module']!r}, not {entry}")
            rc, out = run([args.tandem, "train", "--data", data, "--epochs", "1"], env)
            if rc != 0:
                fail(f"{what}: tandem train without --backend exited {rc}:\n{out}")
            print(f"ok: {what}: {backend} unavailable ({listed['reason'][:120]}), train ran")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["hidden", "path", "damaged"])
    parser.add_argument("--data", help="a small CSV for the damaged mode's training run")
    parser.add_argument("--tandem", required=True)
    parser.add_argument("--library")
    parser.add_argument("--matrix")
    parser.add_argument("--ml")
    parser.add_argument("modules", nargs="+")
    args = parser.parse_args()
    if shutil.which("readelf") is None:
        print("SKIPPED: readelf (binutils) is not installed")
        return 0
    if args.mode == "hidden":
        hidden(args)
    elif args.mode == "path":
        path(args)
    else:
        damaged(args, args.data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
