#!/usr/bin/env python3
"""Heap profiles of one C program: tickscope (LD_PRELOAD libtickscope.so, TICKSCOPE_HEAPPROFILE)
beside gperftools' heap profiler (LD_PRELOAD libtcmalloc.so, HEAPPROFILE) and heaptrack.

The program (crates/preload/tests/c/heap.c, built -O2 -fno-omit-frame-pointer -no-pie) has a
known heap: heap_keep() keeps 1,000 blocks of 64 KiB, heap_churn() allocates and frees
200,000 of 64 B, heap_leak() leaks 1,000 of 10 KiB, and 8 threads allocate and free 20,000
blocks of 100 to 1,099 B each. Interleaved rounds of each way of running it; the script
prints each one's median wall time against the plain run's, and each profiler's estimate of
what each function holds at exit (inuse) and allocated (alloc) against the known figures.

- tickscope samples (every TICKSCOPE_HEAP_RATE bytes on average, 512 KiB by default); its
  profile is read by `go tool pprof -sample_index=...`.
- gperftools' heap profiler records every allocation, through tcmalloc (another allocator:
  its own plain run, tcmalloc without the profiler, is shown too); read by `google-pprof`.
- heaptrack records every call to a file; its totals come from `heaptrack_print`.

Debian: apt-get install google-perftools heaptrack golang-go.

usage: compare_heap.py [--rounds N] [--rate BYTES] [--debug]
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
KNOWN = {  # function: (inuse bytes, alloc bytes)
    "heap_keep": (1000 * 65536, 1000 * 65536),
    "heap_churn": (0, 200000 * 64),
    "heap_leak": (1000 * 10240, 1000 * 10240),
    "heap_threads": (0, 8 * 20000 * 599.5),
}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def find_lib(name):
    for line in sh(["ldconfig", "-p"]).stdout.splitlines():
        if name in line and "=>" in line:
            return line.split("=>")[1].strip()
    sys.exit(f"{name} not found: apt-get install google-perftools")


def timed(cmd, env):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env={**os.environ, **env}, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=120)
    return time.perf_counter() - t


def go_bytes(binary, profile, index):
    out = sh(["go", "tool", "pprof", "-top", "-unit=B", "-nodefraction=0",
              f"-sample_index={index}", binary, profile]).stdout
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and cols[0].endswith("B"):
            rows[cols[5]] = float(cols[0][:-1])
    return rows


def google_pprof_bytes(binary, profile, index):
    out = sh(["google-pprof", "--text", f"--{index}", binary, profile]).stdout
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 6 and re.match(r"^[\d.]+$", cols[0]):
            rows[cols[5]] = float(cols[0]) * 1024 * 1024  # google-pprof prints MB (MiB)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rate", type=int, default=512 * 1024)
    ap.add_argument("--debug", action="store_true", help="the debug build of the library")
    a = ap.parse_args()
    for tool in ["go", "google-pprof", "heaptrack", "heaptrack_print"]:
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found: apt-get install google-perftools heaptrack golang-go")
    profile_kind = "debug" if a.debug else "release"
    cargo = ["cargo", "build", "-q", "-p", "tickscope-preload"] + ([] if a.debug else ["--release"])
    subprocess.run(cargo, check=True, cwd=ROOT)
    lib = os.path.join(ROOT, "target", profile_kind, "libtickscope.so")
    tcmalloc = find_lib("libtcmalloc.so.4")
    d = tempfile.mkdtemp(prefix="tickscope-heap-bench-")
    exe = os.path.join(d, "heap")
    sh(["gcc", "-O2", "-fno-omit-frame-pointer", "-no-pie", "-pthread",
        os.path.join(ROOT, "crates/preload/tests/c/heap.c"), "-o", exe])
    ours, gp, ht = (os.path.join(d, n) for n in ["ours.pb.gz", "gp", "ht"])
    run = [exe, "--no-fork"]
    ways = {
        "plain (glibc malloc)": (run, {}),
        "tickscope, hooks only": (run, {"LD_PRELOAD": lib}),
        "tickscope": (run, {"LD_PRELOAD": lib, "TICKSCOPE_HEAPPROFILE": ours,
                              "TICKSCOPE_HEAP_RATE": str(a.rate)}),
        "tcmalloc, no profiler": (run, {"LD_PRELOAD": tcmalloc}),
        "gperftools heap profiler": (run, {"LD_PRELOAD": tcmalloc, "HEAPPROFILE": gp}),
        "heaptrack": (["heaptrack", "-o", ht] + run, {}),
    }
    walls = {k: [] for k in ways}
    for _ in range(a.rounds):
        for name, (cmd, env) in ways.items():
            # Each way's own files from the round before (the last round's are read below).
            mine = {"tickscope": "ours", "gperftools heap profiler": "gp.", "heaptrack": "ht"}
            for f in os.listdir(d):
                if name in mine and f.startswith(mine[name]):
                    os.remove(os.path.join(d, f))
            walls[name].append(timed(cmd, env))
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                if l.startswith("model name")), "?")
    print(f"heap profilers on {exe} (median of {a.rounds} interleaved rounds; CPU: {cpu})")
    plain = statistics.median(walls["plain (glibc malloc)"])
    for name, w in walls.items():
        m = statistics.median(w)
        print(f"  {name:26s} {m * 1000:8.1f} ms   x{m / plain:5.2f} the plain run")
    # The last round's profiles.
    est = {
        "tickscope": (go_bytes(exe, ours, "inuse_space"), go_bytes(exe, ours, "alloc_space")),
        "gperftools": (google_pprof_bytes(exe, gp + ".0001.heap", "inuse_space"),
                       google_pprof_bytes(exe, gp + ".0001.heap", "alloc_space")),
    }
    print(f"\nestimates, MiB (tickscope sampled every {a.rate} bytes; gperftools records every block):")
    print(f"  {'function':14s} {'known inuse':>12s} {'tickscope':>10s} {'gperftools':>11s}"
          f" {'known alloc':>12s} {'tickscope':>10s} {'gperftools':>11s}")
    mib = 1024 * 1024
    for f, (inuse, alloc) in KNOWN.items():
        t, g = est["tickscope"], est["gperftools"]
        print(f"  {f:14s} {inuse / mib:12.2f} {t[0].get(f, 0) / mib:10.2f} {g[0].get(f, 0) / mib:11.2f}"
              f" {alloc / mib:12.2f} {t[1].get(f, 0) / mib:10.2f} {g[1].get(f, 0) / mib:11.2f}")
    totals = sh(["heaptrack_print", "-f", ht + ".zst"]).stdout
    for line in totals.splitlines():
        if line.startswith(("peak heap memory consumption", "total memory leaked",
                            "calls to allocation functions")):
            print(f"  heaptrack: {line}")
    shutil.rmtree(d)


if __name__ == "__main__":
    main()
