#!/usr/bin/env python3
"""Writes crates/preload/start_path.ld: the functions libtickscope.so runs in a program that
ends before its first sample (the constructor, the small thread that waits to start the
sampler, the line for `record` at exit), placed together at the start of its code, with
`.plt` before them.

Why: under `record` every process a script or a build runs loads the library, and most of
them end within the first millisecond. Each page of code a process touches first costs a
page fault (the kernel maps the 16 pages of the aligned 64 KiB around it, where they are
cached). Spread over the library's 1.8 MB of text by the linker's default order, the start
path touched 13 such windows; placed together it touches one (and `.plt`, moved beside it).

How the list is made (run this after changing what the start path runs; it needs valgrind
and cargo, and leaves the library built as before, with the new list):

1. builds the library, release and debug, without the ordering (TICKSCOPE_NO_START_PATH=1,
   which build.rs reads: valgrind names the functions of `.text` only);
2. runs /bin/true, sleep and a dash script (PROGRAMS) under each with `record`'s settings
   and a start delay long enough that the sampler never starts (valgrind is slow), under
   `valgrind --tool=callgrind`, and takes every function of the library that ran;
3. finds the input section of each in the linker's map (TICKSCOPE_LINK_MAP: lld's format)
   and writes one pattern per section, its name with what changes between builds (legacy
   mangling's hash, v0's crate disambiguators and back-references) made a wildcard, so that
   a new compiler or a change elsewhere keeps them matching; a generic function matches all
   of its instances (a little more code than runs). The release build's come first; then
   those only the debug build runs (unoptimised, it calls ~400 functions where the release
   build calls ~70), so that the tests, which use the debug build, check the same property.

`tests/preload.rs` (`the_code_a_program_runs_before_its_sampler_starts_lies_together`) fails
when the start path's code is no longer together (a function renamed, or a new one on the
path): run this again then.

usage: start_path.py [--check]   (--check: print the patterns, write nothing)
"""
import argparse
import bisect
import os
import re
import shutil
import subprocess
import sys
import tempfile

import per_exec  # record_env: what `record` sets for a program it execs

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
LIBS = {profile: os.path.join(ROOT, "target", profile, "libtickscope.so")
        for profile in ("release", "debug")}
OUT = os.path.join(ROOT, "crates", "preload", "start_path.ld")

HEADER = """\
/* The code libtickscope.so runs in a program that ends before its first sample, placed
 * together before the rest of its text, with `.plt` beside it: one 64 KiB window of page
 * faults where the linker's default order spread it over 13 (see
 * docs/decisions/0025-the-librarys-cost-at-load-and-exit.md). Written by crates/preload/bench/start_path.py from a trace;
 * build.rs passes it to the linker (lld or GNU ld) for the cdylib. A pattern that matches
 * nothing is harmless; the test that the start path lies together says when to write it
 * again. */
SECTIONS {
  .plt : { *(.plt) }
  .text.tickscope_start : {
"""
# What the child of a process whose sampler runs does between `fork` and `exec` (its
# atfork handlers), in every command a profiled shell runs: no traced program's sampler runs,
# so these are named here.
FORK_CHILD = """\
    /* A sampled process's fork child, before it execs (its atfork handlers). */
    *(.text._ZN9tickscope3ffi8deferred13in_fork_child17h* .text.unlikely._ZN9tickscope3ffi8deferred13in_fork_child17h*)
    *(.text._ZN9tickscope7sampler27forget_shared_in_fork_child17h* .text.unlikely._ZN9tickscope7sampler27forget_shared_in_fork_child17h*)
    *(.text._ZN9tickscope7capture13on_fork_child17h* .text.unlikely._ZN9tickscope7capture13on_fork_child17h*)
"""
DEBUG = """\
    /* What only a debug build runs on the same path (the tests' library), after it. */
"""
FOOTER = """\
  }
} INSERT BEFORE .text;
"""


def build(profile, env_extra):
    env = dict(os.environ, **env_extra)
    subprocess.run(["cargo", "build", "-p", "tickscope-preload"]
                   + (["--release"] if profile == "release" else []),
                   cwd=ROOT, env=env, check=True)


# What is traced: a program that ends at once by `exit` (/bin/true), one that lives long
# enough for the small thread to reach its wait (sleep), and a shell that forks, waits and
# ends by `_exit` (dash). valgrind runs them ~50 times slower.
PROGRAMS = [["/bin/true"], ["/bin/sleep", "1"], ["/bin/sh", "-c", "/bin/true; /bin/true"]]


def traced_functions(lib, work):
    """The mangled names of the library's functions that ran in the PROGRAMS under it (an
    address, 0x..., where valgrind had no name)."""
    functions = set()
    # Each twice: the small thread and the program race (valgrind runs one thread at a
    # time), and what the thread reaches before the program ends differs between runs.
    for program in PROGRAMS + PROGRAMS:
        functions |= traced_run(lib, work, program)
    return sorted(functions)


def traced_run(lib, work, program):
    """traced_functions for one program."""
    messages = os.path.join(work, "messages")
    open(messages, "w").close()
    out = os.path.join(work, "callgrind.out")
    env = per_exec.record_env(
        {k: v for k, v in os.environ.items() if not k.startswith("TICKSCOPE_")},
        lib, work, messages)
    # valgrind runs the program ~50 times slower: the sampler must still not start.
    env["TICKSCOPE_CPUPROFILE_START_DELAY_MS"] = "60000"
    # --fair-sched: the small thread gets its turn (by default valgrind may run the program to
    # its end first), so that its wait is traced in every run alike.
    subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", "--fair-sched=yes",
                    f"--callgrind-out-file={out}"] + program,
                   env=env, check=True, capture_output=True)
    with open(messages) as f:
        if "unsampled" not in f.read():
            sys.exit("start_path.py: the traced program did not end before its sampler started")
    objects, names, functions, current = {}, {}, set(), None
    with open(out) as f:
        for line in f:
            m = re.match(r"^(c?ob)=\((\d+)\)(?: (.*))?", line)
            if m:
                if m.group(3):
                    objects[m.group(2)] = m.group(3)
                if m.group(1) == "ob":
                    current = objects.get(m.group(2))
                continue
            m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?", line)
            if m:
                if m.group(3):
                    names[m.group(2)] = m.group(3)
                if m.group(1) == "fn" and current == lib:
                    functions.add(names[m.group(2)])
    return functions


def input_sections(map_path):
    """The input sections of code in lld's map: (address, size, file, section name), sorted."""
    line_re = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+(\S+):\((\.text[^)]*)\)$")
    sections = []
    with open(map_path) as f:
        for line in f:
            m = line_re.match(line)
            if m:
                sections.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3), m.group(4)))
    return sorted(sections)


def section_patterns(lib, map_path, functions):
    """The input-section patterns that hold `functions` (mangled names, or addresses where
    valgrind had no name) in the library linked with the map at `map_path`."""
    addresses = {}
    for line in subprocess.run(["nm", lib], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            addresses.setdefault(parts[2], int(parts[0], 16))
    sections = input_sections(map_path)
    starts = [s[0] for s in sections]
    patterns = set()
    for f in functions:
        addr = int(f, 16) if f.startswith("0x") else addresses.get(f)
        if addr is None:
            continue
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0 or not sections[i][0] <= addr < sections[i][0] + max(sections[i][1], 1):
            continue
        _, _, file, name = sections[i]
        if name == ".text":
            # C code, one `.text` per object: named by its file (an archive's member as
            # `archive:member`), which holds for another path to the same file.
            m = re.match(r"^.*/([^/]+)\((.+)\)$", file)
            patterns.add(f"*{m.group(1)}:{m.group(2)}(.text)" if m else
                         f"*{os.path.basename(file)}(.text)")
            continue
        # An alias shares its section, which is named by another of its names: the
        # section's own name is what the linker matches.
        symbol = re.sub(r"^\.text\.(unlikely\.|hot\.|startup\.|exit\.)?", "", name)
        p = pattern(symbol)
        if p:
            patterns.add(f"*(.text.{p} .text.unlikely.{p})")
    return patterns


def pattern(name):
    """A pattern for the symbol `name` that holds across builds; None for what is no
    symbol's name."""
    if name.startswith("_ZN"):
        # Legacy mangling: the 16-digit hash at the end (and LLVM's `.llvm.N`) change.
        p = re.sub(r"17h[0-9a-f]{16}E.*$", "17h*", name)
    elif name.startswith("_R"):
        # v0: a crate root's disambiguator (`Cs<base62>_`), the back-references whose
        # offsets follow from it (`B<base62>_`), and impl disambiguators change.
        p = re.sub(r"Cs[0-9A-Za-z]*_", "C*", name)
        p = re.sub(r"B[0-9A-Za-z]*_", "B*", p)
        p = re.sub(r"([MXY])s[0-9A-Za-z]*_", r"\1*", p)
        p = re.sub(r"\*+", "*", p)
    elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
        # Unmangled (LLVM's `__rust_try`, C): as it is, less LLVM's `.llvm.N`.
        p = re.sub(r"\.llvm\.\d+$", "*", name)
    else:
        return None
    # `$` (legacy mangling's escapes) is not a name character to the linkers' scripts.
    return p.replace("$", "?")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("start_path.py: needs valgrind (apt install valgrind)")
    work = tempfile.mkdtemp(prefix="tickscope-start-path-")
    try:
        traced = {}
        for profile in LIBS:
            link_map = os.path.join(work, f"map-{profile}.txt")
            build(profile, {"TICKSCOPE_NO_START_PATH": "1", "TICKSCOPE_LINK_MAP": link_map})
            lib = os.path.join(work, f"libtickscope-{profile}.so")
            shutil.copyfile(LIBS[profile], lib)
            traced[profile] = section_patterns(lib, link_map, traced_functions(lib, work))
        # The release build's first, so that its start path lies together at the start of
        # the section; then what only the debug build runs (the tests' library: the test of
        # this runs against it), which a release build's start path never reaches.
        release = sorted(traced["release"])
        debug = sorted(traced["debug"] - traced["release"])
        text = HEADER + "".join(f"    {p}\n" for p in release)
        text += FORK_CHILD + DEBUG + "".join(f"    {p}\n" for p in debug)
        text += FOOTER
        if a.check:
            print(text, end="")
        else:
            with open(OUT, "w") as f:
                f.write(text)
            print(f"{len(release)} patterns for the release build, {len(debug)} more for the "
                  f"debug build: {OUT}")
    finally:
        # The libraries as they are built by default again (with the list just written).
        for profile in LIBS:
            build(profile, {})
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
