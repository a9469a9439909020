#!/usr/bin/env python3
"""Where an in-process profiler's floor lies on a shell that forks for every command (issue 21).

Issue 21 asks for `bash -c 'for i in $(seq 400); do /bin/true; done'` under `tickscope
record` at ≤ 1.5 × its plain time. This script runs that loop, interleaved, in these ways and
prints each median against the plain run's:

- plain;
- under `tickscope record -F 1000 --top 0` (what the issue measures; `record` samples bash
  from outside, the library in bash only passing the settings on);
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
- the same, with libtickscope.so itself in bash with `record`'s settings: the shell
  sampling itself, as `record` had it until it sampled its program from outside;
- the same, with libtickscope.so in bash told that its parent samples it from outside
  (`TICKSCOPE_CPUPROFILE_OUTSIDE`, as `record` starts it now): the library loaded, no
  sampler, nothing sampling bash;
- the same as the second of these (bash loads nothing), with bash sampled from outside it:
  this script opens a task-clock event on bash's main thread that copies its registers and
  16 KiB of its stack into a ring at 1000 Hz (user mode only), as libtickscope's perf source
  does, and a thread of its own empties the ring every 10 ms. The records are thrown away:
  no unwinding, so this is the floor of sampling the top program from `record` (the design
  docs/decisions/0028-record-samples-its-program-from-outside.md describes for meeting 1.5 ×), not a measure of it.

Needs a release build (`cargo build --release -p tickscope-cli -p tickscope-preload`) and
`cc`. Profiles and messages go to tmpfs (/dev/shm) where there is one.

--baseline LIB adds `record` and the sampled shell with another build of the library (say,
before a change), so that two builds are compared side by side in one run.

usage: shell_floor.py [--rounds N] [--iterations N] [--baseline LIB]
"""
import argparse
import ctypes
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from per_exec import (LIB, ROOT, bench_dirs, build_c_library, build_floor,  # noqa: E402
                      record_env)

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
    return build_c_library(work, "libjoined.so", JOINED_C)


class PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr (linux/perf_event.h), up to config3."""
    _fields_ = [(name, kind) for name, kind in (
        ("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64), ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32), ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64), ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16), ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32), ("reserved_3", ctypes.c_uint32),
        ("sig_data", ctypes.c_uint64), ("config3", ctypes.c_uint64))]


RING_PAGES = 64


def open_stack_ring(tid):
    """A task-clock event on thread `tid` sampling at 1000 Hz into a ring of RING_PAGES pages:
    its tid, the user registers bp, sp, ip and 16 KiB of user stack per sample, user mode
    only (what perf_event_paranoid 2 allows a user on its own processes). (fd, ring)."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = PerfEventAttr(
        type=1, size=ctypes.sizeof(PerfEventAttr), config=1,  # software, task-clock
        sample_period=1_000_000,
        sample_type=(1 << 1) | (1 << 12) | (1 << 13),  # TID, REGS_USER, STACK_USER
        flags=(1 << 5) | (1 << 6),  # exclude_kernel, exclude_hv
        sample_regs_user=(1 << 6) | (1 << 7) | (1 << 8), sample_stack_user=16384)
    nr_perf_event_open = 298  # x86-64
    fd = libc.syscall(nr_perf_event_open, ctypes.byref(attr), tid, -1, -1, 8)  # FD_CLOEXEC
    if fd < 0:
        raise OSError(ctypes.get_errno(), "perf_event_open")
    page = mmap.PAGESIZE
    return fd, mmap.mmap(fd, (1 + RING_PAGES) * page, mmap.MAP_SHARED,
                         mmap.PROT_READ | mmap.PROT_WRITE)


def empty_ring(ring, stop):
    """Every 10 ms, marks what the kernel wrote as read (data_tail = data_head), until `stop`."""
    while True:
        ring[1032:1040] = ring[1024:1032]
        if stop.is_set():
            return
        time.sleep(0.01)


def run_sampled_from_outside(loop, env):
    """`loop` in bash, which waits on descriptor 3 until its main thread's ring is open."""
    gate_read, gate_write = os.pipe()
    t = time.perf_counter()
    bash = subprocess.Popen(
        ["bash", "-c", f"read -r _ <&3; exec 3<&-; export LD_PRELOAD={LIB}; {loop}"],
        env=env, pass_fds=(gate_read,), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        preexec_fn=lambda: os.dup2(gate_read, 3))
    os.close(gate_read)
    fd, ring = open_stack_ring(bash.pid)
    stop = threading.Event()
    drain = threading.Thread(target=empty_ring, args=(ring, stop))
    drain.start()
    os.write(gate_write, b"go\n")
    os.close(gate_write)
    bash.wait()
    elapsed = time.perf_counter() - t
    stop.set()
    drain.join()
    ring.close()
    os.close(fd)
    if bash.returncode != 0:
        sys.exit(f"bash sampled from outside exited {bash.returncode}")
    return elapsed


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
    # What `record` starts now: the library in bash, told that its parent (this script)
    # samples it from outside, starts nothing; nothing samples bash here.
    ways.append(("  + libtickscope in bash, sampling nothing", only_children,
                 dict(sampled_shell(children, LIB),
                      TICKSCOPE_CPUPROFILE_OUTSIDE=str(os.getpid()))))
    outside = "  + bash sampled from outside, not unwound"
    ways.append((outside, None, bash_plain))
    results = {name: [] for name, _, _ in ways}
    try:
        for _ in range(a.rounds):
            for name, argv, env in ways:
                for f in os.listdir(work):
                    if f.startswith(("p.pb.gz", "r.pb.gz")):
                        os.remove(os.path.join(work, f))
                open(messages, "w").close()
                if argv is None:
                    results[name].append(run_sampled_from_outside(loop, env))
                    continue
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
