#!/usr/bin/env python3
"""Instructions per iteration of a scope, two nested scopes, a `tracing` span with tickscope's
layer (less the registry alone) and a `.profiled()` future, counted by callgrind.

    python3 crates/core/benches/instructions/count.py

Each case runs at two iteration counts; the figure is the difference in instructions over the
difference in iterations, so start-up and warm-up cancel. Under valgrind a program runs some
fifty times slower, so slow paths that depend on time (a histogram's refit when durations
leave its window, the clock's anchor refresh) run far more often than natively: they are out
of line, and left out. For scopes, the self cost of the loop and of `close` (everything common
is inlined into them); for spans and futures, the loop's inclusive cost less those slow
paths'. Needs valgrind (callgrind_annotate) and cargo.
"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
TARGET = os.path.join(ROOT, "target", "instructions")
N = (100_000, 300_000)
LOOPS = {
    "scope": "scope_loop",
    "nested": "nested_loop",
    "span": "span_loop",
    "span-registry": "span_loop",
    "future": "future_loop",
}
ENTRY = re.compile(r"\s*([\d,]+) \([^)]*\)\s+(\S*?):(\S+)( \[.*\])?$")


def build():
    subprocess.run(
        ["cargo", "build", "--release", "--quiet", "--manifest-path",
         os.path.join(HERE, "Cargo.toml"), "--target-dir", TARGET],
        cwd=ROOT, check=True)
    return os.path.join(TARGET, "release", "tickscope-instructions")


def annotate(prog, n, case, out_dir, inclusive):
    out = os.path.join(out_dir, f"{case}.{n}.out")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", prog,
                    str(n), case], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    args = ["callgrind_annotate", "--threshold=100"] + (["--inclusive=yes"] if inclusive else [])
    text = subprocess.run(args + [out], capture_output=True, text=True, check=True).stdout
    loop = "tickscope_instructions::" + LOOPS[case]
    total = slow = 0
    for line in text.splitlines():
        m = ENTRY.match(line)
        if not m:
            continue
        value, name, whole = int(m.group(1).replace(",", "")), m.group(3), m.group(4)
        if inclusive:
            if whole and name == loop:
                total = max(total, value)
            if whole and (name.endswith("record_slow") or name.endswith("refresh_anchor")):
                slow += value
        elif name in (loop, "tickscope::imp::close"):
            total += value
    return total - slow


def per_iteration(prog, case, out_dir):
    inclusive = case not in ("scope", "nested")
    a, b = (annotate(prog, n, case, out_dir, inclusive) for n in N)
    return (b - a) / (N[1] - N[0])


def main():
    prog = build()
    with tempfile.TemporaryDirectory() as out_dir:
        got = {case: per_iteration(prog, case, out_dir) for case in LOOPS}
    print("tickscope instructions per iteration (callgrind)")
    print(f"  scope! in a loop (entry, exit, the loop's own):  {got['scope']:6.1f}")
    print(f"  two nested scope!s:                              {got['nested']:6.1f}")
    print(f"  a span under the registry and tickscope's layer: {got['span']:6.1f}"
          f"  (the layer adds {got['span'] - got['span-registry']:.1f})")
    print(f"  a one-poll future through .profiled():           {got['future']:6.1f}")


if __name__ == "__main__":
    sys.exit(main())
