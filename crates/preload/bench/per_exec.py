#!/usr/bin/env python3
"""What profiling adds to each exec'd process under `tickscope record` (issue 21: ≤ 1 ms).

Runs /bin/true (or --program) many times, interleaved, in these ways and prints the median
wall time of each and what each adds to the plain run:

- plain;
- with a C library preloaded whose constructor starts one thread that waits (built with
  `cc`, if there is one): the floor of any profiler that runs a thread in each process;
  and the same with the thread made on its creator's CPU, as the library's is;
- with the library preloaded but no profile asked for (the cost of loading it);
- profiled with `record`'s settings but no SIGINT/SIGTERM hooks (what they cost: once a
  thread of their own, 0.18 ms; the drain thread does their work now);
- profiled with `record`'s settings (1000 Hz, the profile written at exit, SIGINT/SIGTERM
  hooks, messages to a file: what `record` sets for every process it runs; a program that
  ends within 1 ms, as /bin/true does, never starts its sampler, whose start is deferred);
- the same with --baseline LIB, another build of the library (say, before a change), so two
  builds are compared side by side in one run.

Profiles are written to a directory on tmpfs where there is one (/dev/shm): on ext4, the
time to create a file depends on how many were deleted there lately (its inode allocator
skips recently freed inodes), which would swamp the library's own cost.

Needs a release build: cargo build --release -p tickscope-preload

usage: per_exec.py [--program PATH] [--runs N] [--rounds N] [--baseline LIB]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LIB = os.path.join(ROOT, "target", "release", "libtickscope.so")


def record_env(base, lib, work, messages, signals=True):
    """`base` with what `record` sets for a program it execs (not the first of the run):
    `lib` preloaded, 1000 Hz, the profile written into `work` at exit, messages to the file
    `messages` (which must exist), the SIGINT/SIGTERM hooks if `signals`."""
    env = dict(base)
    env.update(
        LD_PRELOAD=lib,
        TICKSCOPE_CPUPROFILE=os.path.join(work, "p.pb.gz"),
        # Not the first process of the run: each writes `p.pb.gz.<pid>`, as under record.
        TICKSCOPE_CPUPROFILE_PID="1",
        TICKSCOPE_CPUPROFILE_FREQUENCY="1000",
        TICKSCOPE_CPUPROFILE_QUIET="1",
        TICKSCOPE_MESSAGES=messages,
    )
    if signals:
        env["TICKSCOPE_CPUPROFILE_SIGNALS"] = "1"
    return env


def bench_dirs(prefix):
    """Where a bench's profiles go: (the tmpfs directory or None, a new directory in it, the
    messages file's path there, not yet made), and the environment without tickscope's
    settings or a preloaded library."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix=prefix, dir=base)
    messages = os.path.join(work, "messages")
    plain_env = {k: v for k, v in os.environ.items() if not k.startswith("TICKSCOPE_")}
    plain_env.pop("LD_PRELOAD", None)
    return base, work, messages, plain_env


def median_ms(program, env, runs):
    """Median wall time (ms) of `runs` sequential runs of `program` under `env`."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        pid = os.posix_spawn(program, [program], env)
        os.waitpid(pid, 0)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


FLOOR_C = r'''
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
static int p[2];
static void *wait_on_pipe(void *a) { char b; while (read(p[0], &b, 1) == 1) {} return a; }
__attribute__((constructor)) static void start(void) {
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
#ifdef HERE
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(sched_getcpu(), &s);
    pthread_attr_setaffinity_np(&at, sizeof s, &s);
#endif
    if (pipe(p) == 0) pthread_create(&t, &at, wait_on_pipe, 0);
}
'''


def build_c_library(work, name, source, flags=()):
    """`source` built with cc into the shared library `work/name`; None without a compiler
    or if it does not build."""
    src, lib = os.path.join(work, name + ".c"), os.path.join(work, name)
    with open(src, "w") as f:
        f.write(source)
    try:
        r = subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", lib, src, "-lpthread",
                            *flags], capture_output=True)
    except OSError:
        return None
    return lib if r.returncode == 0 else None


def build_floor(work, here=False):
    """The one-idle-thread library, built with cc into `work` (the thread made on its
    creator's CPU if `here`); None without a compiler."""
    if here:
        return build_c_library(work, "libfloor-here.so", FLOOR_C, ["-DHERE"])
    return build_c_library(work, "libfloor.so", FLOOR_C)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", default="/bin/true")
    ap.add_argument("--runs", type=int, default=60, help="runs per measurement")
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    ap.add_argument("--baseline", help="another build of libtickscope.so to compare")
    a = ap.parse_args()
    if not os.path.exists(LIB):
        sys.exit("build first: cargo build --release -p tickscope-preload")
    base, work, messages, plain_env = bench_dirs("tickscope-per-exec-")

    def profiled(lib, signals=True):
        return record_env(plain_env, lib, work, messages, signals)

    ways = [
        ("plain", plain_env),
    ]
    # The floor of an in-process profiler: a C library whose constructor starts one thread
    # that waits on a pipe (no profiling at all). On a 2-core EPYC VM that alone added
    # ~0.15 ms to each exec (the clone, the scheduler, the thread's end at exit_group).
    # The same thread made on its creator's CPU, as the library's small thread is: no
    # interrupt between CPUs to start it or to end it (0.16 against 0.05 ms on that VM).
    for here, name in ((False, "a C library starting one idle thread"),
                       (True, "the same, the thread on its creator's CPU")):
        floor = build_floor(work, here)
        if floor:
            ways.append((name, dict(plain_env, LD_PRELOAD=floor)))
    ways += [
        ("library loaded, no profile", dict(plain_env, LD_PRELOAD=LIB)),
        # What the SIGINT/SIGTERM hooks cost: record's settings without them.
        ("profiled, no SIGINT/SIGTERM hooks", profiled(LIB, signals=False)),
        ("profiled (record's settings)", profiled(LIB)),
    ]
    if a.baseline:
        ways.append((f"profiled, {a.baseline}", profiled(os.path.abspath(a.baseline))))
    results = {name: [] for name, _ in ways}
    try:
        for _ in range(a.rounds):
            for f in os.listdir(work):
                if f.startswith("p.pb.gz"):
                    os.remove(os.path.join(work, f))
            open(messages, "w").close()
            for name, env in ways:
                results[name].append(median_ms(a.program, env, a.runs))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    plain = statistics.median(results["plain"])
    print(f"{a.program}: median of {a.rounds} interleaved rounds of {a.runs} runs each "
          f"(profiles in {base or tempfile.gettempdir()})")
    for name, _ in ways:
        m = statistics.median(results[name])
        print(f"  {name:44} {m:6.3f} ms   adds {m - plain:6.3f} ms")


if __name__ == "__main__":
    main()
