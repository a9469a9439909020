#!/usr/bin/env python3
"""What profiling adds to each exec'd process under `tickscope record` (issue 21: ≤ 1 ms).

Runs /bin/true (or --program) many times, interleaved, in four ways and prints the median
wall time of each and what each adds to the plain run:

- plain;
- with the library preloaded but no profile asked for (the cost of loading it);
- profiled with `record`'s settings (1000 Hz, the profile written at exit, SIGINT/SIGTERM
  hooks, messages to a file: what `record` sets for every process it runs);
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
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LIB = os.path.join(ROOT, "target", "release", "libtickscope.so")


def median_ms(program, env, runs):
    """Median wall time (ms) of `runs` sequential runs of `program` under `env`."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        pid = os.posix_spawn(program, [program], env)
        os.waitpid(pid, 0)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--program", default="/bin/true")
    ap.add_argument("--runs", type=int, default=60, help="runs per measurement")
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds")
    ap.add_argument("--baseline", help="another build of libtickscope.so to compare")
    a = ap.parse_args()
    if not os.path.exists(LIB):
        sys.exit("build first: cargo build --release -p tickscope-preload")
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    work = tempfile.mkdtemp(prefix="tickscope-per-exec-", dir=base)
    messages = os.path.join(work, "messages")
    plain_env = {k: v for k, v in os.environ.items() if not k.startswith("TICKSCOPE_")}
    plain_env.pop("LD_PRELOAD", None)

    def profiled(lib):
        env = dict(plain_env)
        env.update(
            LD_PRELOAD=lib,
            TICKSCOPE_CPUPROFILE=os.path.join(work, "p.pb.gz"),
            # Not the first process of the run: each writes `p.pb.gz.<pid>`, as under record.
            TICKSCOPE_CPUPROFILE_PID="1",
            TICKSCOPE_CPUPROFILE_FREQUENCY="1000",
            TICKSCOPE_CPUPROFILE_SIGNALS="1",
            TICKSCOPE_CPUPROFILE_QUIET="1",
            TICKSCOPE_MESSAGES=messages,
        )
        return env

    ways = [
        ("plain", plain_env),
        ("library loaded, no profile", dict(plain_env, LD_PRELOAD=LIB)),
        ("profiled (record's settings)", profiled(LIB)),
    ]
    if a.baseline:
        ways.append((f"profiled, {a.baseline}", profiled(os.path.abspath(a.baseline))))
    results = {name: [] for name, _ in ways}
    try:
        for _ in range(a.rounds):
            for f in os.listdir(work):
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
        print(f"  {name:40} {m:6.3f} ms   adds {m - plain:6.3f} ms")


if __name__ == "__main__":
    main()
