#!/usr/bin/env python3
"""Where an in-process profiler's floor lies on a shell that forks for every command (issue 21).

Issue 21 asks for `bash -c 'for i in $(seq 400); do /bin/true; done'` under `tickscope
record` at ≤ 1.5 × its plain time. This script runs that loop, interleaved, in these ways and
prints each median against the plain run's:

- plain;
- under `tickscope record -F 1000 --top 0` (what the issue measures);
- every /bin/true profiled with the settings `record` gives the programs it execs, bash
  itself not loading anything: what a run whose top program had no thread of tickscope's
  (sampled from outside it) would cost;
- the same, with a C library preloaded into bash whose constructor starts one thread that
  waits on a pipe, on its creator's CPU as the library's threads are: the floor of any
  profiler that keeps a thread in the process it samples, doing no profiling at all;
- the same, with a C library whose constructor starts a thread and joins it at once: no
  second thread lives, but glibc has left its single-threaded mode for good (its `fork`
  then takes the malloc and stdio locks and resets them in the child, which costs both
  copy-on-write faults);
- the same, with libtickscope.so itself in bash with `record`'s settings: the sampled
  shell, as under `record`, without `record`'s own start and end.

Needs a release build (`cargo build --release -p tickscope-cli -p tickscope-preload`) and
`cc`. Profiles and messages go to tmpfs (/dev/shm) where there is one.

--baseline LIB adds `record` and the sampled shell with another build of the library (say,
before a change), so that two builds are compared side by side in one run.

usage: shell_floor.py [--rounds N] [--iterations N] [--baseline LIB]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from per_exec import LIB, ROOT, bench_dirs, build_floor, record_env  # noqa: E402

TICKSCOPE = os.path.join(ROOT, "target", "release", "tickscope")

JOINED_C = r'''
#include <pthread.h>
static void *nothing(void *a) { return a; }
__attribute__((constructor)) static void start(void) {
    pthread_t t;
    if (pthread_create(&t, 0, nothing, 0) == 0) pthread_join(t, 0);
}
'''


def build_joined(work):
    """The library whose constructor starts a thread and joins it, or None without cc."""
    src, lib = os.path.join(work, "joined.c"), os.path.join(work, "libjoined.so")
    with open(src, "w") as f:
        f.write(JOINED_C)
    try:
        r = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", lib, src, "-lpthread"],
                           capture_output=True)
    except OSError:
        return None
    return lib if r.returncode == 0 else None


def sampled_shell(children, lib):
    """The children's environment for a bash that loads `lib` itself and samples itself as
    the run's first process (no TICKSCOPE_CPUPROFILE_PID: the library sets it to bash's pid
    as it loads), as under `record`."""
    env = dict(children, LD_PRELOAD=lib)
    env.pop("TICKSCOPE_CPUPROFILE_PID", None)
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15, help="interleaved rounds")
    ap.add_argument("--iterations", type=int, default=400, help="/bin/true runs in the loop")
    ap.add_argument("--baseline", help="another build of libtickscope.so to compare")
    a = ap.parse_args()
    for path in (LIB, TICKSCOPE):
        if not os.path.exists(path):
            sys.exit("build first: cargo build --release -p tickscope-cli -p tickscope-preload")
    _, work, messages, plain_env = bench_dirs("tickscope-shell-floor-")
    loop = f"for i in $(seq {a.iterations}); do /bin/true; done"
    # The children's settings are record's; bash gets LD_PRELOAD only from its own `export`,
    # so that what bash itself loads is the one thing that differs between these ways.
    children = record_env(plain_env, LIB, work, messages)
    bash_plain = {k: v for k, v in children.items() if k != "LD_PRELOAD"}
    only_children = ["bash", "-c", f"export LD_PRELOAD={LIB}; {loop}"]
    record = [TICKSCOPE, "record", "-F", "1000", "--top", "0", "-o",
              os.path.join(work, "r.pb.gz"), "--", "bash", "-c", loop]
    baseline = a.baseline and os.path.abspath(a.baseline)
    floor = build_floor(work, here=True)
    joined = build_joined(work)
    if not floor or not joined:
        sys.exit("cc is needed to build the stand-in libraries")
    ways = [
        ("plain", ["bash", "-c", loop], plain_env),
        ("tickscope record -F 1000", record, plain_env),
    ]
    if baseline:
        ways.append(("tickscope record, the baseline", record,
                     dict(plain_env, TICKSCOPE_LIB=baseline)))
    ways += [
        ("children profiled, bash loads nothing", only_children, bash_plain),
        ("  + one idle thread in bash", only_children, dict(bash_plain, LD_PRELOAD=floor)),
        ("  + a thread started and joined in bash", only_children,
         dict(bash_plain, LD_PRELOAD=joined)),
        ("  + libtickscope sampling bash", only_children,
         sampled_shell(children, LIB)),
    ]
    if baseline:
        ways.append(("  + the baseline sampling bash", only_children,
                     sampled_shell(children, baseline)))
    results = {name: [] for name, _, _ in ways}
    try:
        for _ in range(a.rounds):
            for name, argv, env in ways:
                for f in os.listdir(work):
                    if f.startswith(("p.pb.gz", "r.pb.gz")):
                        os.remove(os.path.join(work, f))
                open(messages, "w").close()
                t = time.perf_counter()
                subprocess.run(argv, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=True)
                results[name].append(time.perf_counter() - t)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    plain = statistics.median(results["plain"])
    print(f"bash loop of {a.iterations} /bin/true: medians of {a.rounds} interleaved rounds")
    for name, _, _ in ways:
        m = statistics.median(results[name])
        print(f"  {name:44} {m:6.3f} s   {m / plain:5.3f} ×")


if __name__ == "__main__":
    main()
