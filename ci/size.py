#!/usr/bin/env python3
"""The size rule (ARCHITECTURE.md, "The size rule"): prints lines per folder and the largest files,
and fails on a source file over 800 lines or a function over 120 (lizard measures functions in
C++, CUDA, HIP and Python). No exceptions: a long function is split where its steps are.

Usage: python3 ci/size.py [--root DIR]   (lizard from PyPI: ci/test.sh installs it in its venv)
"""
import argparse
import collections
import os
import subprocess
import sys

import lizard

FILE_LIMIT = 800
FUNCTION_LIMIT = 120
PATTERNS = ["*.cpp", "*.hpp", "*.h", "*.cu", "*.cuh", "*.hip", "*.inl", "*.py", "*.sh", "*.cmake", "*CMakeLists.txt"]
# lizard picks its reader by extension: the GPU and inline sources are C++ to it.
AS_CPP = (".cu", ".cuh", ".hip", ".inl")
# doctest's TEST_SUITE("...") { ... } blocks read as functions to lizard; their test cases are measured.
NOT_FUNCTIONS = {"TEST_SUITE"}


def sources(root):
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "--", *PATTERNS], cwd=root,
                             capture_output=True, text=True, check=True).stdout
        return sorted(f for f in out.split() if os.path.isfile(os.path.join(root, f)))
    except (OSError, subprocess.CalledProcessError):  # a copy without git: every such file outside build folders
        found = []
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if x not in ("build", ".deps", ".git")]
            for f in files:
                if any(f == p.lstrip("*") or (p.startswith("*.") and f.endswith(p[1:])) for p in PATTERNS):
                    found.append(os.path.relpath(os.path.join(d, f), root))
        return sorted(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    args = ap.parse_args()
    root = os.path.abspath(args.root)

    lines_of, per_folder = {}, collections.Counter()
    long_files, long_functions = [], []
    for f in sources(root):
        with open(os.path.join(root, f), errors="replace") as fh:
            code = fh.read()
        n = code.count("\n")
        lines_of[f] = n
        parts = f.split("/")
        per_folder["/".join(parts[:2]) if parts[0] == "backends" and len(parts) > 2 else
                   (parts[0] if len(parts) > 1 else ".")] += n
        if n > FILE_LIMIT:
            long_files.append((n, f))
        if f.endswith((".sh", ".cmake", "CMakeLists.txt")):
            continue
        name = f + ".cpp" if f.endswith(AS_CPP) else f
        for fn in lizard.analyze_file.analyze_source_code(name, code).function_list:
            length = fn.end_line - fn.start_line + 1
            if fn.name not in NOT_FUNCTIONS and length > FUNCTION_LIMIT:
                long_functions.append((length, f"{f}:{fn.name}"))

    print(f"size: {sum(lines_of.values())} lines in {len(lines_of)} source files")
    for folder, n in sorted(per_folder.items(), key=lambda kv: -kv[1]):
        print(f"  {n:7d}  {folder}/")
    print("  largest files:")
    for f in sorted(lines_of, key=lambda f: -lines_of[f])[:12]:
        print(f"  {lines_of[f]:7d}  {f}")

    failures = [f"{f}: {n} lines (a file may have {FILE_LIMIT}: split it by topic)" for n, f in long_files]
    for n, where in sorted(long_functions, reverse=True):
        failures.append(f"{where}: {n} lines (a function may have {FUNCTION_LIMIT}: split it where its steps are)")
    if failures:
        print("size: the rule is broken:", *failures, sep="\n  ", file=sys.stderr)
        return 1
    print(f"size: no file over {FILE_LIMIT} lines, no function over {FUNCTION_LIMIT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
