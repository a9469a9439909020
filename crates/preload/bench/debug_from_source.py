#!/usr/bin/env python3
"""Installs the debug info of an installed Debian library rebuilt from its own source, where
its `-dbgsym` package cannot be had (issue 21's benchmark machine: `deb.debian.org/debian-debug`
answers HTTP 400 there, and no debuginfod is reachable).

For the library at PATH (say /lib/x86_64-linux-gnu/liblzma.so.5):

1. finds the Debian package that installed it and that package's source and version;
2. downloads that exact source (.dsc and its files) from the Debian archive the machine
   reaches, and checks each file's SHA-256 against the archive's own index of sources
   (`Sources.xz`, whose hash is in the suite's `InRelease`, whose signature `gpgv` checks
   against the installed archive keyring): nothing unverified is unpacked or built, as root
   least of all. A version superseded in the indexes since it was installed is checked by
   the .dsc's own signature instead, against Debian's developer keyring (`debian-keyring`,
   installed by apt if missing), and its files against the .dsc. Then it unpacks it,
   installs what it needs to build, and builds it as the buildd does (`dpkg-buildpackage
   -B`, tests skipped: `nocheck` does not change what is built);
3. compares every section of the rebuilt library that holds code or what code reads
   (.text, .rodata, .eh_frame, .eh_frame_hdr, .data.rel.ro, .data, .dynsym, .dynstr, .init,
   .fini, .plt) and their addresses with the installed file's, and stops, installing nothing,
   if any differs;
4. only then puts the rebuilt `-dbgsym` debug file where gdb, perf, pprof and tickscope look
   for it: `/usr/lib/debug/.build-id/ab/cdef….debug`, named by the *installed* file's build id,
   which it also writes into the debug file's build-id note.

The two build ids differ even when the code is the same byte for byte: the id hashes the
unstripped file, and the rebuilt DWARF names this machine's compiler build (for liblzma
5.4.1-1, gcc 12.2.0-14+deb12u1 here against the buildd's 12.2.0-14); Debian's reproducible
builds make the rest equal. Step 3 is what makes the debug file true of the installed code:
the same bytes at the same addresses.

Needs root (apt-get, /usr/lib/debug), dpkg-dev, and the Debian source archive. It installs
the package's build dependencies with apt (and so may upgrade a library they need): meant
for a benchmark machine, not a workstation. Takes a few minutes for a small library
(liblzma: 2-4 min on 2 cores).

usage: debug_from_source.py PATH [--work DIR]
"""
import argparse
import hashlib
import lzma
import os
import re
import subprocess
import sys
import tempfile
import urllib.request

ARCHIVE = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
SECTIONS = [".text", ".rodata", ".eh_frame", ".eh_frame_hdr", ".data.rel.ro", ".data",
            ".dynsym", ".dynstr", ".init", ".fini", ".plt"]


def run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def fail(msg):
    print(f"debug_from_source: {msg}", file=sys.stderr)
    sys.exit(2)


def fetch(url):
    with urllib.request.urlopen(url) as r:
        return r.read()


def signed_checksums(src, version):
    """File name -> SHA-256 of source package `src` at `version`, from the signed index of a
    suite of this machine's release (the release itself, its updates); None if no index
    holds that version (an older one, superseded since it was installed)."""
    codename = run("sh", "-c", ". /etc/os-release; echo $VERSION_CODENAME").strip()
    for suite in (codename, f"{codename}-updates"):
        with tempfile.TemporaryDirectory() as d:
            signed = os.path.join(d, "InRelease")
            with open(signed, "wb") as f:
                f.write(fetch(f"{ARCHIVE}/dists/{suite}/InRelease"))
            r = subprocess.run(["gpgv", "--keyring", KEYRING, "--output", "-", signed],
                               capture_output=True)
            if r.returncode != 0:
                fail(f"{suite}'s InRelease: bad signature: {r.stderr.decode(errors='replace')}")
            release = r.stdout.decode()
        sha = release[release.index("SHA256:"):]
        m = re.search(r"^ ([0-9a-f]{64})\s+\d+ main/source/Sources.xz$", sha, re.M)
        if not m:
            continue
        index = fetch(f"{ARCHIVE}/dists/{suite}/main/source/Sources.xz")
        if hashlib.sha256(index).hexdigest() != m.group(1):
            fail(f"{suite}'s Sources.xz does not match its signed hash")
        for para in lzma.decompress(index).decode(errors="replace").split("\n\n"):
            if (re.search(rf"^Package: {re.escape(src)}$", para, re.M)
                    and re.search(rf"^Version: {re.escape(version)}$", para, re.M)):
                block = para[para.index("Checksums-Sha256:"):].split("\n")[1:]
                sums = {}
                for line in block:
                    if not line.startswith(" "):
                        break
                    digest, _, name = line.split()
                    sums[name] = digest
                return sums
    return None


def build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", path))
    return m.group(1) if m else None


def sections(path):
    """Name -> (address, bytes) of the sections compared."""
    out = {}
    for line in run("readelf", "-S", "-W", path).splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)", line)
        if m and m.group(1) in SECTIONS:
            with tempfile.NamedTemporaryFile() as f:
                run("objcopy", "-O", "binary", f"--only-section={m.group(1)}", path, f.name)
                out[m.group(1)] = (int(m.group(2), 16), open(f.name, "rb").read())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--work", default=None, help="build directory (default: a new one in /tmp)")
    a = ap.parse_args()
    lib = os.path.realpath(a.path)
    installed_id = build_id(lib)
    if not installed_id:
        fail(f"{lib}: no build id")
    target = f"/usr/lib/debug/.build-id/{installed_id[:2]}/{installed_id[2:]}.debug"
    if os.path.exists(target):
        print(f"{target} is already installed")
        return
    owner = None
    for p in {lib, a.path, "/usr" + lib, lib.replace("/usr/lib/", "/lib/", 1)}:
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            owner = r.stdout.split(":")[0]
            break
    if not owner:
        fail(f"{lib}: no installed Debian package holds it")
    src, version = run("dpkg-query", "-W", "-f", "${source:Package} ${source:Version}",
                       owner).split()
    upstream = version.split(":", 1)[-1]
    prefix = src[:4] if src.startswith("lib") else src[0]
    pool = f"{ARCHIVE}/pool/main/{prefix}/{src}"
    work = a.work or tempfile.mkdtemp(prefix=f"dbg-{src}-")
    os.makedirs(work, exist_ok=True)
    print(f"{lib}: package {owner}, source {src} {version}; building in {work}")

    dsc_name = f"{src}_{upstream}.dsc"
    sums = signed_checksums(src, version)
    if sums is not None:
        # Every file of the source (the .dsc, the tarballs, an upstream signature), each
        # checked against the signed index before anything reads it.
        for name, digest in sums.items():
            data = fetch(f"{pool}/{name}")
            if hashlib.sha256(data).hexdigest() != digest:
                fail(f"{pool}/{name} does not match the archive's signed SHA-256")
            with open(os.path.join(work, name), "wb") as f:
                f.write(data)
        if not os.path.exists(os.path.join(work, dsc_name)):
            fail(f"the signed index of {src} {version} names no {dsc_name}")
        run("dpkg-source", "-x", dsc_name, "tree", cwd=work)
    else:
        # Superseded in the indexes: the .dsc's own signature, by its uploader, checked
        # against Debian's developer keyring (itself installed by apt, from a signed
        # index); dpkg-source then checks each file against the .dsc's checksums.
        if not os.path.exists("/usr/share/keyrings/debian-keyring.gpg"):
            subprocess.run(["apt-get", "install", "-y", "--no-install-recommends",
                            "debian-keyring"], check=True,
                           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        dsc = fetch(f"{pool}/{dsc_name}")
        with open(os.path.join(work, dsc_name), "wb") as f:
            f.write(dsc)
        listed = re.search(rb"\nFiles:\n((?: .*\n)+)", dsc).group(1).decode().split("\n")
        for name in [line.split()[-1] for line in listed if line.strip()]:
            with open(os.path.join(work, name), "wb") as f:
                f.write(fetch(f"{pool}/{name}"))
        r = subprocess.run(["dpkg-source", "--require-valid-signature", "-x", dsc_name, "tree"],
                           cwd=work, capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"{dsc_name}: not unpacked (its signature or a checksum did not verify): "
                 f"{r.stderr.strip()}")
    tree = os.path.join(work, "tree")

    # The build dependencies dpkg-checkbuilddeps finds missing, without their version ranges.
    r = subprocess.run(["dpkg-checkbuilddeps", "-B"], cwd=tree, capture_output=True, text=True)
    m = re.search(r"Unmet build dependencies: (.*)", r.stderr)
    if m:
        # "a (>= 1) b | c d:any [amd64]": the first of each set of alternatives, bare.
        tokens = re.sub(r"\([^)]*\)|\[[^]]*\]", " ", m.group(1)).split()
        wanted, skip = [], False
        for t in tokens:
            if t == "|":
                skip = True
            elif skip:
                skip = False
            else:
                wanted.append(t.split(":")[0])
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *wanted],
                       check=True, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    env = dict(os.environ, DEB_BUILD_OPTIONS=f"nocheck parallel={os.cpu_count() or 1}")
    build_log = os.path.join(work, "build.log")
    with open(build_log, "w") as log:
        built = subprocess.run(["dpkg-buildpackage", "-B", "-us", "-uc"], cwd=tree, env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    if built.returncode != 0:
        fail(f"the build of {src} {version} failed ({built.returncode}): see {build_log}")

    unpacked = os.path.join(work, "unpacked")
    for deb in os.listdir(work):
        if deb.startswith(f"{owner}_") or deb.startswith(f"{owner}-dbgsym_"):
            run("dpkg-deb", "-x", os.path.join(work, deb), unpacked)
    rebuilt = None
    for root, _, names in os.walk(unpacked):
        if os.path.basename(lib) in names and "/debug/" not in root:
            rebuilt = os.path.join(root, os.path.basename(lib))
    if not rebuilt:
        fail(f"the rebuilt {owner} holds no {os.path.basename(lib)}")
    ours, theirs = sections(rebuilt), sections(lib)
    if ours.keys() != theirs.keys() or any(ours[s] != theirs[s] for s in ours):
        differ = sorted(s for s in set(ours) | set(theirs) if ours.get(s) != theirs.get(s))
        fail(f"the rebuilt {os.path.basename(lib)} differs from the installed one in "
             f"{', '.join(differ)}: its debug info would not describe the installed code")
    rebuilt_id = build_id(rebuilt)
    debug = os.path.join(unpacked, "usr/lib/debug/.build-id", rebuilt_id[:2],
                         rebuilt_id[2:] + ".debug")
    if not os.path.exists(debug):
        fail(f"the rebuild made no debug file {debug}")
    data = open(debug, "rb").read()
    old, new = bytes.fromhex(rebuilt_id), bytes.fromhex(installed_id)
    if data.count(old) != 1:
        fail(f"{debug}: its build id is not found exactly once")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = target + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data.replace(old, new))
    os.rename(tmp, target)
    print(f"{', '.join(sorted(ours))} equal, byte for byte at the same addresses; "
          f"installed {target}")


if __name__ == "__main__":
    try:
        main()
    except subprocess.CalledProcessError as e:
        fail(f"{' '.join(map(str, e.cmd))} failed ({e.returncode}): "
             f"{(e.stderr or '').strip()[-500:]}")
    except OSError as e:
        fail(str(e))
