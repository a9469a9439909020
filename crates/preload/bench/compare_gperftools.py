#!/usr/bin/env python3
"""tickscope record vs gperftools (LD_PRELOAD libprofiler.so) on one C workload.

The workload (tests/c/workload.c, built -O2 -fno-omit-frame-pointer) has a known CPU split:
work_a 40%, work_b 25%, work_c 20%, work_d 10%, work_e 5%, over three threads. For each rate
(100 and 1000 Hz) the script runs it unprofiled, under gperftools (CPUPROFILE,
CPUPROFILE_FREQUENCY) and under `tickscope record -F HZ`, interleaved, and prints:

- CPU accounted / the process's CPU time (getrusage, printed by the workload): "accounted" is
  everything the profile holds, "sampled" leaves out tickscope's explicit [not sampled: ...]
  rows (CPU time it measured but could not attribute to a stack);
- wall time / the unprofiled run's (medians);
- the top 5 functions' shares of the profile against the known split.

tickscope's profile is read by the real `go tool pprof`, gperftools' by its own
`google-pprof` (go tool pprof does not symbolise a PIE from a legacy profile). With --assert, exits 1 unless tickscope
accounts for >= 0.98 of the CPU time at both rates and its top 5 shares are within 3 points.

usage: compare_gperftools.py [--ms TOTAL_CPU_MS] [--rounds N] [--debug] [--assert]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SPLIT = {"work_a": 40.0, "work_b": 25.0, "work_c": 20.0, "work_d": 10.0, "work_e": 5.0}
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def libprofiler():
    out = sh(["ldconfig", "-p"]).stdout
    for line in out.splitlines():
        if "libprofiler.so" in line and "=>" in line:
            return line.split("=>")[1].strip()
    sys.exit("libprofiler.so not found: apt-get install google-perftools (.ci/run does)")


def cpu_ns(stdout):
    for line in reversed(stdout.splitlines()):
        if line.startswith("cpu_ns "):
            return int(line.split()[1])
    raise RuntimeError("no cpu_ns line in " + repr(stdout))


def top_rows(profile, binary):
    """go tool pprof -top in ms, nothing dropped: [(flat_ms, name)]."""
    out = sh(["go", "tool", "pprof", "-top", "-unit=ms", "-nodefraction=0",
              "-nodecount=1000", binary, profile]).stdout
    rows = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 6 or not cols[1].endswith("%"):
            continue
        flat = cols[0]
        ms = 0.0 if flat == "0" else float(flat[:-2]) if flat.endswith("ms") else None
        if ms is not None:
            rows.append((ms, " ".join(cols[5:])))
    return rows


def gperf_rows(profile, binary, hz):
    """google-pprof --text (go tool pprof cannot symbolise a PIE from a legacy profile):
    [(flat_ms, name)], samples converted at the profile's period."""
    out = sh(["google-pprof", "--text", "--nodefraction=0", "--nodecount=1000", binary,
              profile]).stdout
    rows = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) < 6 or not cols[1].endswith("%") or not cols[0].isdigit():
            continue
        rows.append((int(cols[0]) * 1000.0 / hz, " ".join(cols[5:])))
    return rows


def timed(cmd, env):
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"{cmd} failed ({res.returncode}):\n{res.stderr}")
    return wall, res.stdout, res.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ms", type=int, default=2000, help="CPU time of one run, ms")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--debug", action="store_true", help="use target/debug, not a release build")
    ap.add_argument("--assert", dest="check", action="store_true")
    args = ap.parse_args()

    profile = "debug" if args.debug else "release"
    build = ["cargo", "build", "--quiet", "-p", "tickscope-preload", "-p", "tickscope-cli"]
    if not args.debug:
        build.append("--release")
    subprocess.run(build, check=True, cwd=ROOT)
    tickscope = os.path.join(ROOT, "target", profile, "tickscope")
    gperf = libprofiler()

    tmp = tempfile.mkdtemp(prefix="tickscope-vs-gperftools-")
    workload = os.path.join(tmp, "workload")
    sh(["gcc", "-O2", "-fno-omit-frame-pointer", "-pthread",
        os.path.join(ROOT, "crates/preload/tests/c/workload.c"), "-o", workload])

    failures = []
    print(f"workload: {args.ms} ms of CPU over 3 threads, {args.rounds} rounds, "
          f"tickscope {profile} build, gperftools {gperf}")
    for hz in (100, 1000):
        walls = {"none": [], "gperftools": [], "tickscope": []}
        last = {}
        for _ in range(args.rounds):
            env = dict(os.environ)
            for k in ("CPUPROFILE", "LD_PRELOAD", "TICKSCOPE_CPUPROFILE"):
                env.pop(k, None)
            wall, out, _ = timed([workload, str(args.ms)], env)
            walls["none"].append(wall)

            gprof = os.path.join(tmp, f"g{hz}.prof")
            genv = dict(env, CPUPROFILE=gprof, CPUPROFILE_FREQUENCY=str(hz), LD_PRELOAD=gperf)
            wall, out, _ = timed([workload, str(args.ms)], genv)
            walls["gperftools"].append(wall)
            last["gperftools"] = (gprof, cpu_ns(out))

            tprof = os.path.join(tmp, f"t{hz}.pb.gz")
            wall, out, _ = timed([tickscope, "record", "-F", str(hz), "-o", tprof, "--top", "0",
                                  "--", workload, str(args.ms)], env)
            walls["tickscope"].append(wall)
            last["tickscope"] = (tprof, cpu_ns(out))

        base = statistics.median(walls["none"])
        print(f"\n{hz} Hz (unprofiled wall {base * 1000:.0f} ms, median of {args.rounds})")
        print(f"{'':12} {'accounted':>9} {'sampled':>8} {'wall':>7}  top 5 (share of profile, known split)")
        for tool in ("gperftools", "tickscope"):
            prof, cpu = last[tool]
            rows = top_rows(prof, workload) if tool == "tickscope" else gperf_rows(prof, workload, hz)
            total = sum(ms for ms, _ in rows)
            sampled = sum(ms for ms, n in rows if not n.startswith("[not sampled"))
            acc, smp = total / (cpu / 1e6), sampled / (cpu / 1e6)
            wall = statistics.median(walls[tool]) / base
            flat = sorted(((ms, n) for ms, n in rows if ms > 0), reverse=True)[:5]
            shares = []
            worst = 0.0
            for ms, n in flat:
                share = 100 * ms / total if total else 0
                known = SPLIT.get(n)
                if known is None:
                    worst = max(worst, share)
                    shares.append(f"{n} {share:.1f}% (-)")
                else:
                    worst = max(worst, abs(share - known))
                    shares.append(f"{n} {share:.1f}% ({known:.0f})")
            missing = [n for n in SPLIT if n not in [m for _, m in flat]]
            print(f"{tool:12} {acc:9.3f} {smp:8.3f} {wall:6.3f}x  " + ", ".join(shares)
                  + (f"; missing {missing}" if missing else "") + f"; worst {worst:.1f} pts")
            if tool == "tickscope" and args.check:
                if acc < 0.98:
                    failures.append(f"{hz} Hz: tickscope accounts for {acc:.3f} of the CPU time")
                if missing or worst > 3.0:
                    failures.append(f"{hz} Hz: tickscope's top 5 off the split by {worst:.1f} points"
                                    + (f", missing {missing}" if missing else ""))
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
