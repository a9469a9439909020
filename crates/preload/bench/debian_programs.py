#!/usr/bin/env python3
"""tickscope record on unmodified Debian programs, against perf and gperftools (issue 21).

For each workload the script runs the program plain, under `tickscope record -F HZ`, under
`perf record -F HZ -g` (frame pointers) and under gperftools (LD_PRELOAD libprofiler.so,
which unwinds with libunwind), interleaved, and prints one row per workload:

- wall time of each profiled run / the plain run's (medians of --rounds runs);
- CPU accounted: the CPU time tickscope's profiles hold / the CPU time the run's processes
  used, as `record` reports it (getrusage of its process tree, less what writing the
  profiles took);
- mean stack depth (frames per sample) of tickscope's and gperftools' profiles, and the
  share of samples with `main` on the stack (single-threaded programs);
- the top 5 leaf functions of tickscope's profiles against perf's on the same runs (`perf
  record` samples the program while `tickscope record` does: the issue's "on the same run";
  runs of their own differ by more than the profilers do, sqlite3's hottest function by 2 to
  3 points from run to run), each over all rounds (ours merged, perf's averaged), and the
  largest difference in points.

Workloads: sqlite3 on an in-memory join, xz -9 -T1 and xz -6 -T2 on generated text, python3
on a pure-Python loop, a bash loop of 400 /bin/true (wall ratio only), and make compiling 8
small C files with gcc (25 processes, each writing its profile at its exit).

Needs: a release build (`cargo build --release -p tickscope-cli -p tickscope-preload`),
perf, google-perftools, go (for `go tool pprof`), sqlite3, xz. Takes a few minutes.
The leaf functions are named as far as debug info is installed: libc6-dbg for glibc, and
for liblzma, whose -dbgsym package this machine cannot reach, the debug file that
`debug_from_source.py /lib/x86_64-linux-gnu/liblzma.so.5` rebuilds from Debian's source
and installs only if the rebuilt code equals the installed code byte for byte. Without it,
xz's functions are `[liblzma.so.5.4.1]` in every tool and its `named` share is ~0.

usage: debian_programs.py [--hz HZ] [--rounds N] [--mb TEXT_MB] [--scale K] [--only NAME...]

--scale K runs the sqlite3 and python3 workloads K times longer: the top-5 comparison with
perf needs several thousand samples before its sampling error falls under 2 points.
"""
import argparse
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TICKSCOPE = os.path.join(ROOT, "target", "release", "tickscope")


def need(tool, hint):
    if not shutil.which(tool):
        sys.exit(f"{tool} not found: {hint}")


def libprofiler():
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "libprofiler.so" in line and "=>" in line:
            return line.split("=>")[1].strip()
    sys.exit("libprofiler.so not found: apt-get install google-perftools")


def workloads(tmp, mb, scale=1):
    text = os.path.join(tmp, "text.txt")
    words = [w.encode() for w in "the quick brown fox jumps over a lazy dog while profilers "
             "count every sample they take and some of them unwind each stack".split()]
    with open(text, "wb") as f:
        x, n = 12345, 0
        while n < mb << 20:
            line = []
            for _ in range(16):
                x = (x * 1103515245 + 12345) & 0x7FFFFFFF
                line.append(words[x % len(words)])
            b = b" ".join(line) + b"\n"
            f.write(b)
            n += len(b)
    sql = ("CREATE TABLE a(k INTEGER, v TEXT); CREATE TABLE b(k INTEGER, w TEXT);"
           f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT {600000 * scale}) "
           "INSERT INTO a SELECT x % 5000, printf('v%d', x) FROM c;"
           "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 20000) "
           "INSERT INTO b SELECT x % 5000, printf('w%d', x) FROM c;"
           "SELECT count(*), sum(length(v) + length(w)) FROM a JOIN b USING (k);")
    py = f"s = 0\nfor i in range({12_000_000 * scale}):\n    s += i * i % 7\nprint(s)\n"
    # A build: make compiling 8 small C files with gcc (make, the driver, cc1 and as for each:
    # 25 processes, most of them short), every file rebuilt each run (-B).
    build = os.path.join(tmp, "build")
    os.makedirs(build, exist_ok=True)
    for i in range(8):
        with open(os.path.join(build, f"f{i}.c"), "w") as f:
            f.write("#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n"
                    f"int f{i}(int x) {{ char b[64]; snprintf(b, 64, \"%d\", x); "
                    "return (int)strlen(b) + atoi(b); }\n")
    with open(os.path.join(build, "Makefile"), "w") as f:
        f.write("OBJS = $(patsubst %.c,%.o,$(wildcard *.c))\nall: $(OBJS)\n"
                "%.o: %.c\n\tgcc -O2 -c $< -o $@\n")
    return [
        ("sqlite3 join", ["sqlite3", ":memory:", sql], True),
        ("xz -9 -T1", ["xz", "-9", "-T1", "-c", "-k", text], True),
        ("xz -6 -T2", ["xz", "-6", "-T2", "-c", "-k", text], False),
        ("python3 loop", ["/usr/bin/python3", "-c", py], True),
        ("bash 400 execs", ["bash", "-c", "for i in $(seq 400); do /bin/true; done"], True),
        ("make 8 C files", ["make", "-s", "-B", "-j1", "-C", build], False),
    ]


def timed(cmd, env=None):
    """(wall seconds, children's CPU seconds) of one run, its output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "": 1.0}


def traces(profile, binary=None):
    """Samples of a profile as (weight, [frames leaf first]) from `go tool pprof -traces`
    (inlined frames count as frames; tickscope's synthetic `[...]` rows are left out, and so
    are its own threads' samples, as record's table leaves them out: the program's stacks
    are compared, and a shell that mostly waits has fewer samples than the drain thread)."""
    cmd = (["go", "tool", "pprof", "-traces", "-tagignore=thread=^tickscope-"]
           + ([binary] if binary else []) + [profile])
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    samples, frames, weight = [], [], 0.0
    for line in out.splitlines():
        if line.startswith("-----------+"):
            if frames and not synthetic(frames[0]):
                samples.append((weight, frames))
            frames, weight = [], 0.0
            continue
        m = re.match(r"^\s+(-?[\d.]+)([a-z]*)\s{3}(\S.*)$", line)
        if m and not frames:
            weight = float(m.group(1)) * UNITS.get(m.group(2), 1.0)
            frames.append(m.group(3).strip())
        elif frames and line.startswith(" " * 13) and line.strip():
            frames.append(line.strip())
    if frames and not synthetic(frames[0]):
        samples.append((weight, frames))
    return samples


def synthetic(frame):
    """tickscope's rows for CPU time it measured but could not put on a stack, and its
    per-thread `[kernel mode]` row (no stack: the perf source samples user mode only)."""
    return frame.startswith(("[not sampled", "[lost", "[kernel mode]"))


def named(name):
    """A function name (not a bare module or address, which the tools split differently)."""
    return not (name.startswith("[") or name.startswith("0x"))


def depth_and_main(samples):
    """Mean frames per sample, and the share of samples with `main` on the stack: named
    `main`, or, in a stripped program where main has no name, called by glibc's
    `__libc_start_call_main` (the frame a walk reaches only through main)."""
    n = sum(c for c, _ in samples) or 1
    depth = sum(c * len(f) for c, f in samples) / n
    def has_main(frames):
        names = [x.split(" ")[0] for x in frames]
        # go tool pprof names gperftools' frames from the dynamic symbols only: glibc's
        # exported __libc_start_main (which calls __libc_start_call_main) stands for both.
        return "main" in names or any(n.startswith("__libc_start_") for n in names)
    main = sum(c for c, f in samples if has_main(f)) / n
    return depth, main


def leaf_key(name):
    """A function's name without its C++ parameters (`ira_init()` as perf's `ira_init`)."""
    body = name[:-len(" const")] if name.endswith(" const") else name
    if name.startswith("[") or not body.endswith(")"):
        return name
    depth = 0
    for i in range(len(body) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(body[i], 0)
        if depth == 0:
            # `operator()` is a name, not its parameters.
            return body[:i] if i > 0 and not body[:i].endswith("operator") else name
    return name


def tickscope_leaves(profile_files):
    """Leaf shares (%) of the program's own threads (tickscope's sampler left out)."""
    out = subprocess.run([TICKSCOPE, "top", "--nodecount=200", "--unit=ms",
                          "--tagignore=thread=^tickscope-"] + profile_files,
                         capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        cols = line.split(None, 5)
        if len(cols) == 6 and cols[1].endswith("%"):
            key = leaf_key(cols[5])
            rows[key] = rows.get(key, 0.0) + float(cols[1][:-1])
    return rows


def perf_comms(data):
    """The process names in a perf.data, tickscope's own (`record`, its threads) left out:
    a build's compilers, assemblers and make."""
    out = subprocess.run(["perf", "report", "-i", data, "--sort", "comm", "--stdio", "-q",
                          "-g", "none"], capture_output=True, text=True).stdout
    names = (line.split(None, 1)[1].strip() for line in out.splitlines()
             if re.match(r"\s*[\d.]+%\s+\S", line))
    return [n for n in names if not n.startswith("tickscope")]


def perf_leaves(data, comm=None):
    """Leaf shares (%) of perf's samples, of the threads named `comm` only (the program's,
    not `tickscope record`'s nor its sampler's when perf samples them all)."""
    only = ["--comm", comm, "--percentage", "relative"] if comm else []
    out = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "sym",
                          "--stdio", "-q", "-g", "none"] + only,
                         capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+\[[.k]\]\s+(.*)$", line)
        if m:
            key = leaf_key(m.group(2).strip())
            rows[key] = rows.get(key, 0.0) + float(m.group(1))
    return rows


def main():
    # Every run of python3 the same: with string hashing randomised per process, the loop's
    # global-variable lookups collide differently from run to run, and its leaf shares moved
    # by up to 10 points between two runs of the same program, more than the comparison with
    # perf's run (made on another run) can tell from a profiler's error.
    os.environ["PYTHONHASHSEED"] = "0"
    ap = argparse.ArgumentParser()
    ap.add_argument("--hz", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mb", type=int, default=20, help="size of the generated text for xz")
    ap.add_argument("--scale", type=int, default=1,
                    help="sqlite3 and python3 workloads K times longer (more samples)")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    for tool, hint in [("perf", "apt-get install linux-perf"), ("go", "apt-get install golang-go"),
                       ("sqlite3", "apt-get install sqlite3"), ("xz", "apt-get install xz-utils"),
                       ("make", "apt-get install make"), ("gcc", "apt-get install gcc")]:
        need(tool, hint)
    if not os.path.exists(TICKSCOPE):
        sys.exit("build first: cargo build --release -p tickscope-cli -p tickscope-preload")
    prof = libprofiler()
    tmp = tempfile.mkdtemp(prefix="tickscope-debian-")
    print(f"tickscope record -F {a.hz} against perf record -F {a.hz} -g and gperftools "
          f"(CPUPROFILE_FREQUENCY={a.hz}); medians of {a.rounds} interleaved rounds\n")
    head = (f"{'workload':16} {'plain s':>8} {'record':>7} {'perf -g':>7} {'gperf':>7} "
            f"{'CPU acc':>7} {'named':>6} {'depth':>6} {'gperf':>6} {'main%':>6} {'gperf':>6} "
            f"{'top5 vs perf (max diff)'}")
    print(head)
    for name, cmd, single in workloads(tmp, a.mb, a.scale):
        if a.only and not any(o in name for o in a.only):
            continue
        plain, rec, perf, gp, acc = [], [], [], [], []
        # Every round's profiles are kept: the leaf shares compared are over all rounds
        # (ours merged, perf's averaged), so that one run's own variation (xz's threads,
        # scheduled differently each time) weighs 1/rounds.
        for f in os.listdir(tmp):
            if (f.startswith("t") and ".pb.gz" in f) or f.startswith("perf"):
                os.remove(os.path.join(tmp, f))
        outs, pdatas, both = [], [], []
        for rnd in range(a.rounds):
            plain.append(timed(cmd)[0])
            out = os.path.join(tmp, f"t{rnd}.pb.gz")
            outs.append(out)
            t = time.monotonic()
            r = subprocess.run([TICKSCOPE, "record", "--top", "0", "-F", str(a.hz), "-o", out,
                                "--merge", "--"] + cmd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, check=True)
            rec.append(time.monotonic() - t)
            # record's own accounting: the profiles' CPU against its process tree's (record's
            # own work after the run, loading and merging the profiles, left out).
            m = re.search(r"hold ([\d.]+) (m?s) of the ([\d.]+) (m?s) of CPU", r.stderr)
            # and what it says the ends of the processes took after their profiles were
            # written (the kernel unmapping their memory), which no profile can hold.
            e = re.search(r"; ([\d.]+) (m?s) more was the ends of the processes", r.stderr)
            if m:
                held = float(m.group(1)) * UNITS[m.group(2)]
                tree = float(m.group(3)) * UNITS[m.group(4)]
                if e:
                    held += float(e.group(1)) * UNITS[e.group(2)]
                if tree > 0:
                    acc.append(held / tree)
            pdata = os.path.join(tmp, f"perf{rnd}.data")
            pdatas.append(pdata)
            perf.append(timed(["perf", "record", "-q", "-F", str(a.hz), "-g", "-o", pdata, "--"]
                              + cmd)[0])
            genv = dict(os.environ, LD_PRELOAD=prof, CPUPROFILE=os.path.join(tmp, "g.prof"),
                        CPUPROFILE_FREQUENCY=str(a.hz))
            gp.append(timed(cmd, env=genv)[0])
            # Both profilers on one run, for the leaf functions (not timed).
            bout, bdata = os.path.join(tmp, f"tb{rnd}.pb.gz"), os.path.join(tmp, f"perfb{rnd}.data")
            both.append((bout, bdata))
            subprocess.run(["perf", "record", "-q", "-F", str(a.hz), "-o", bdata, "--",
                            TICKSCOPE, "record", "--top", "0", "-F", str(a.hz), "-o", bout,
                            "--merge", "--"] + cmd, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
        p = statistics.median(plain)
        ours = [t for out in outs for t in traces(out)]
        d, mn = depth_and_main(ours)
        gprof = os.path.join(tmp, "g.prof")
        # gperftools writes one file, whichever process ends last: no depth for a build.
        gtraces = (traces(gprof, shutil.which(cmd[0]) or cmd[0])
                   if os.path.exists(gprof) and not name.startswith("make") else [])
        gd, gmn = depth_and_main(gtraces) if gtraces else (float("nan"), float("nan"))
        # Where go tool pprof could name none of gperftools' frames (`[python3.11]`), no
        # `main` can be told: not 0 %.
        if not any(named(f.split(" ")[0]) for _, frames in gtraces for f in frames):
            gmn = float("nan")
        leaves = tickscope_leaves([b for b, _ in both])
        named_share = sum(v for k, v in leaves.items() if named(k))
        t5 = sorted(((k, v) for k, v in leaves.items() if named(k)),
                    key=lambda kv: -kv[1])[:5]
        pl = {}
        comm = os.path.basename(cmd[0])[:15]
        for _, bdata in both:
            # A build's processes are many: all of them but tickscope's.
            if name.startswith("make"):
                comm = ",".join(perf_comms(bdata))
            for k, v in perf_leaves(bdata, comm).items():
                pl[k] = pl.get(k, 0.0) + v / len(both)
        diffs = [abs(v - pl.get(k, 0.0)) for k, v in t5]
        # The sampling error of a difference of two shares from independent sets of runs of
        # about n samples each (all rounds; one a millisecond at 1000 Hz):
        # 2 sigma = 2 sqrt(2 p (1 - p) / n).
        n = sum(c for b, _ in both for c, _ in traces(b)) * a.hz or 1
        p5 = max((v for _, v in t5), default=0.0) / 100
        two_sigma = 200 * math.sqrt(2 * p5 * (1 - p5) / n)
        top = ", ".join(f"{k[:24]} {v:.1f}/{pl.get(k, 0.0):.1f}" for k, v in t5[:3])
        print(f"{name:16} {p:8.3f} {statistics.median(rec) / p:7.2f} {statistics.median(perf) / p:7.2f} "
              f"{statistics.median(gp) / p:7.2f} {statistics.median(acc) if acc else 0:7.3f} "
              f"{named_share:6.1f} "
              f"{d:6.2f} {gd:6.2f} {100 * mn if single else float('nan'):6.1f} "
              f"{100 * gmn if single else float('nan'):6.1f} "
              f"{max(diffs) if diffs else 0:.1f} (2σ {two_sigma:.1f})  [{top}]")
    print("\nrecord, perf -g, gperf: wall time / plain. CPU acc: the profiles' CPU, and the "
          "processes' ends after their profiles were written, / the run's (record's own line). named: % of the program's CPU on a named leaf function. depth: frames per sample, tickscope's and gperftools'. main%: samples "
          "with main on the stack (or glibc's __libc_start_call_main, main's caller, where main has no name), tickscope's and gperftools'. top5: tickscope's leaf shares / perf's over all rounds, both sampling the same runs (points), and twice the sampling error of the largest one's difference.")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
