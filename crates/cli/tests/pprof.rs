//! `tickscope top` against `go tool pprof -top`: the reference outputs saved beside the real
//! profiles in tests/data/pprof (written by Go 1.19's pprof), and the real `go tool
//! pprof` run on profiles a Go program writes during the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/pprof")
}

fn tickscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(args)
        .output()
        .unwrap()
}

/// Lines pprof prints about local symbolisation (binaries it could not open): not part of
/// the report, and tickscope does not look for those binaries' build paths.
fn is_symbolization_note(line: &str) -> bool {
    line.starts_with("Local symbolization failed")
        || line.starts_with("Some binary filenames not available")
        || line.starts_with("Try setting PPROF_BINARY_PATH")
        || line.starts_with("Main binary filename not available")
}

fn report_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !is_symbolization_note(l))
        .map(|l| l.trim_end().to_string())
        .collect()
}

/// Every profile with a `.top.txt` beside it: `tickscope top --nodecount 10` prints the
/// same header lines (File, Type, Time, Duration, Showing/Dropped) and the same rows (names,
/// flat and cum in the same units, same order).
#[test]
fn top_matches_go_tool_pprof_on_every_reference_profile() {
    let mut files: Vec<PathBuf> = Vec::new();
    for dir in [testdata(), testdata().join("legacy")] {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.to_string_lossy().ends_with(".top.txt") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 15, "reference files missing: {files:?}");
    let mut failures = Vec::new();
    for reference in &files {
        let profile = PathBuf::from(reference.to_string_lossy().trim_end_matches(".top.txt"));
        let out = tickscope(&["top", "--nodecount", "10", profile.to_str().unwrap()]);
        let ours = String::from_utf8_lossy(&out.stdout);
        let want = report_lines(&std::fs::read_to_string(reference).unwrap());
        let got = report_lines(&ours);
        if !out.status.success() || want != got {
            failures.push(format!(
                "== {}\n-- go tool pprof:\n{}\n-- tickscope (status {}):\n{}{}",
                profile.display(),
                want.join("\n"),
                out.status,
                got.join("\n"),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// `--json` carries the same rows as the text.
#[test]
fn top_json_has_the_rows_of_the_text() {
    let file = testdata().join("sample.cpu.pb.gz");
    let out = tickscope(&["top", "--nodecount", "3", "--json", file.to_str().unwrap()]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["name"], "runtime.mapiternext");
    assert_eq!(rows[0]["flat"], 1_280_000_000i64);
    assert_eq!(rows[1]["cum"], 1_760_000_000i64);
    assert_eq!(v["total"], 1_760_000_000i64);
}

/// Regular files are streamed (read twice, never held); a pipe is read once, whole; gzip
/// around a text format goes through the fallback that reads the bytes whole. All three
/// give the answer the plain file gives.
#[test]
fn pipes_and_compressed_text_read_like_files() {
    use std::io::Write;
    use std::process::Stdio;
    let file = testdata().join("sample.cpu.pb.gz");
    let from_file = tickscope(&["top", "--nodecount", "5", file.to_str().unwrap()]);
    assert!(from_file.status.success());
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(["top", "--nodecount", "5", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let bytes = std::fs::read(&file).unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let from_pipe = child.wait_with_output().unwrap();
    assert!(from_pipe.status.success());
    let rows = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("flat"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(rows(&from_pipe), rows(&from_file));
    assert_eq!(rows(&from_file).len(), 6);

    let dir = std::env::temp_dir().join(format!("tickscope-gzfolded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gz = dir.join("stacks.folded.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(b"main;parse;lex 7\nmain;alloc 3\n").unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let out = tickscope(&["top", gz.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("of 10 total"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_end().ends_with(" lex") && l.contains("70.00%")),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad input: one line naming the file and the problem, exit status 2, never a panic.
#[test]
fn bad_profiles_exit_2_with_the_file_and_the_problem() {
    let dir = std::env::temp_dir().join(format!("tickscope-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = std::fs::read(testdata().join("sample.cpu.pb.gz")).unwrap();
    let raw = {
        use std::io::Read;
        let mut v = Vec::new();
        flate2::read::GzDecoder::new(&good[..])
            .read_to_end(&mut v)
            .unwrap();
        v
    };
    let mut cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "empty file"),
        ("truncated.gz", good[..good.len() / 2].to_vec(), "gzip"),
        (
            "magic.bin",
            b"\x7fELF\x02\x01\x01\0binary".to_vec(),
            "not a profile",
        ),
        // string_table[0] = "x" (field 6, length 1).
        ("string0.pb", vec![0x32, 1, b'x'], "string_table[0]"),
        // A sample type pointing at string 99 of a one-string table.
        (
            "strindex.pb",
            vec![0x0a, 4, 0x08, 99, 0x10, 0, 0x32, 0],
            "string 99",
        ),
        // A length prefix claiming 2^62 bytes.
        (
            "length.pb",
            vec![0x32, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40],
            "claims",
        ),
        // A sample with location id 0: sample_type {1,2}, sample {location_id: 0, value: 1}.
        (
            "loc0.pb",
            vec![
                0x0a, 4, 0x08, 1, 0x10, 2, 0x12, 4, 0x08, 0, 0x10, 1, 0x32, 0, 0x32, 1, b'a', 0x32,
                1, b'b',
            ],
            "location id 0",
        ),
        // A sample with a location id that no location has.
        (
            "locmissing.pb",
            vec![
                0x0a, 4, 0x08, 1, 0x10, 2, 0x12, 4, 0x08, 7, 0x10, 1, 0x32, 0, 0x32, 1, b'a', 0x32,
                1, b'b',
            ],
            "location 7",
        ),
        // Two values for one sample type.
        (
            "values.pb",
            vec![
                0x0a, 4, 0x08, 1, 0x10, 2, 0x12, 4, 0x10, 1, 0x10, 2, 0x32, 0, 0x32, 1, b'a', 0x32,
                1, b'b',
            ],
            "2 values",
        ),
    ];
    // A sample 70,000 frames deep (runaway recursion): location 1 repeated.
    let mut deep = vec![0x0a, 4, 0x08, 1, 0x10, 2, 0x22, 2, 0x08, 1];
    let mut sample = vec![0x0a, 0xf0, 0xa2, 0x04]; // field 1, packed, 70000 bytes
    sample.extend(std::iter::repeat_n(1u8, 70_000));
    sample.extend([0x10, 1]);
    deep.extend([0x12, 0xf6, 0xa2, 0x04]); // field 2, 70006 bytes
    deep.extend(sample);
    deep.extend([0x32, 0, 0x32, 1, b'a', 0x32, 1, b'b']);
    cases.push(("deep.pb", deep, "frames deep"));
    // A timeline capture is not a profile: the error says which command reads it.
    cases.push((
        "run.tscap",
        b"TSCAP\r\n\x1a\x01\x00\x00\x00".to_vec(),
        "tickscope report",
    ));
    // The real profile cut mid-message (raw, not gzip).
    cases.push(("cut.pb", raw[..raw.len() - 7].to_vec(), "malformed pprof"));
    for (name, bytes, want) in &cases {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let out = tickscope(&["top", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(
            err.contains(name),
            "{name}: the error does not name the file: {err}"
        );
        assert!(err.contains(want), "{name}: expected {want:?} in: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{name}: not one line: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `tickscope ARGS`; returns its exit code, stderr and peak resident memory (KiB). The
/// peak includes this process's own at the fork: measure through `timeline::measured`.
// The child is reaped by `wait4`, which clippy does not see.
#[allow(clippy::zombie_processes)]
pub(crate) fn run_measured(args: &[&str]) -> (Option<i32>, String, i64) {
    use std::os::unix::process::ExitStatusExt;
    // Reaped below by wait4, which gives the rusage that `Child::wait` does not.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut s).unwrap();
        s
    });
    let mut status = 0;
    // SAFETY: rusage is plain data, all-zero valid.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, writing into valid locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    let code = std::process::ExitStatus::from_raw(status).code();
    (code, reader.join().unwrap(), usage.ru_maxrss)
}

/// One gzip member holding `n` zero bytes; members concatenated read as one stream.
fn gzip_zeros(n: usize) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&vec![0u8; n]).unwrap();
    e.finish().unwrap()
}

/// Folded stacks whose first line is longer than the 4 KiB the loader sniffs (a frame with
/// a name of 10,000 characters) are read as folded stacks, where they were "not a profile".
#[test]
fn folded_stacks_with_a_first_line_longer_than_the_sniff_are_read() {
    let dir = std::env::temp_dir().join(format!("tickscope-longline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let long = format!("very_long_{}", "x".repeat(10_000));
    let file = dir.join("long.folded");
    std::fs::write(&file, format!("main;{long};leaf 10\nmain;other 5\n")).unwrap();
    let out = tickscope(&["top", "--json", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let top: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(top["total"], 15);
    assert!(top["rows"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "leaf" && r["flat"] == 10));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Gzip bombs and endless devices are refused from their first bytes or by the ratio of
/// decompressed to compressed size, in memory unrelated to what they would decompress to
/// (before: 8.4 GB and a minute for 4 GiB of zeros; 4.2 GB for /dev/zero).
#[test]
fn gzip_bombs_and_endless_input_are_refused_in_bounded_memory() {
    let dir = std::env::temp_dir().join(format!("tickscope-bombs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mib = gzip_zeros(1 << 20);
    // 4 GiB of zeros in ~4 MB: not protobuf, not text; refused from its first kilobytes.
    let zeros = dir.join("zeros.pb.gz");
    std::fs::write(&zeros, mib.repeat(4096)).unwrap();
    // A protobuf start (field 6, a string of 1 GiB), then 1 GiB of zeros in ~1 MB: looks like
    // a profile, so it is read until the ratio limit says no.
    let proto = dir.join("proto.pb.gz");
    let mut bomb = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(&[0x32, 0x80, 0x80, 0x80, 0x80, 0x04]).unwrap();
        e.finish().unwrap()
    };
    bomb.extend(mib.repeat(1024));
    std::fs::write(&proto, &bomb).unwrap();
    let cases = [
        (zeros.to_str().unwrap(), "not a profile"),
        ("/dev/zero", "not a profile"),
        (proto.to_str().unwrap(), "over 100 times its size"),
    ];
    for (file, want) in cases {
        let (code, err, peak_kib) = crate::timeline::measured(&["top", file]);
        assert_eq!(code, Some(2), "{file}: {err}");
        assert!(err.contains(file) && err.contains(want), "{file}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{file}: {err}");
        // The ratio limit lets the protobuf bomb reach 100 MiB before it is refused; the
        // others stop at once. Fixed costs (binary, allocator) are a few MiB.
        let budget_kib = match want {
            "not a profile" => 32 << 10,
            _ => (100 + 64) << 10,
        };
        assert!(
            peak_kib < budget_kib,
            "{file}: peak {peak_kib} KiB, budget {budget_kib} KiB"
        );
    }
    // The flag reads past the ratio, up to the size it gives (and no further).
    let (code, err, _) =
        run_measured(&["top", "--max-decompressed", "200M", proto.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("more than 200 MiB"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

// --- the real go tool pprof on profiles a Go program writes ------------------------------

/// A Go program with a known CPU split: `main.hot` ~ 3 parts, `main.warm` ~ 2 (through
/// `main.middle`), `main.cold` ~ 1, in two goroutines labelled `worker=a` / `worker=b`; it
/// writes a CPU profile and a heap profile.
const GO_PROGRAM: &str = r#"
package main

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"
)

var sink uint64
var keep [][]byte

//go:noinline
func spin(n int) uint64 {
	var x uint64 = 1
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

//go:noinline
func hot(d time.Duration) { end := time.Now().Add(d); for time.Now().Before(end) { sink += spin(20000) } }

//go:noinline
func warm(d time.Duration) { end := time.Now().Add(d); for time.Now().Before(end) { sink += spin(20000) } }

//go:noinline
func middle(d time.Duration) { warm(d) }

//go:noinline
func cold(d time.Duration) { end := time.Now().Add(d); for time.Now().Before(end) { sink += spin(20000) } }

//go:noinline
func alloc(n int) { for i := 0; i < n; i++ { keep = append(keep, make([]byte, 4096)) } }

func work(ms int) {
	d := time.Duration(ms) * time.Millisecond
	for i := 0; i < 4; i++ {
		hot(3 * d / 4)
		middle(2 * d / 4)
		cold(d / 4)
	}
}

func main() {
	runtime.MemProfileRate = 512
	cpu, _ := os.Create(os.Args[1])
	pprof.StartCPUProfile(cpu)
	var wg sync.WaitGroup
	for _, w := range []string{"a", "b"} {
		wg.Add(1)
		go func(w string) {
			defer wg.Done()
			pprof.Do(context.Background(), pprof.Labels("worker", w), func(context.Context) { work(150) })
		}(w)
	}
	wg.Wait()
	pprof.StopCPUProfile()
	cpu.Close()
	alloc(2000)
	heap, _ := os.Create(os.Args[2])
	pprof.WriteHeapProfile(heap)
	heap.Close()
}
"#;

/// Builds and runs the Go program once per test binary; returns (cpu profile, heap profile).
fn go_profiles() -> &'static (PathBuf, PathBuf) {
    static PROFILES: std::sync::OnceLock<(PathBuf, PathBuf)> = std::sync::OnceLock::new();
    PROFILES.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("tickscope-go-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("prog.go");
        std::fs::write(&src, GO_PROGRAM).unwrap();
        let bin = dir.join("prog");
        let out = Command::new("go")
            .arg("build")
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .env("GOCACHE", dir.join("gocache"))
            .env("GO111MODULE", "off")
            .output()
            .expect("`go` not found: install Go (Debian: apt-get install golang-go; .ci/run does)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (cpu, heap) = (dir.join("cpu.pb.gz"), dir.join("heap.pb.gz"));
        let status = Command::new(&bin).arg(&cpu).arg(&heap).status().unwrap();
        assert!(status.success());
        (cpu, heap)
    })
}

fn go_pprof(args: &[&str], file: &Path) -> String {
    let out = Command::new("go")
        .arg("tool")
        .arg("pprof")
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The table rows: the lines after the `flat  flat%` header.
fn rows_of(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat  flat%"))
        .skip(1)
        .map(|l| l.trim_end().to_string())
        .collect()
}

fn ours(args: &[&str], file: &Path) -> String {
    let mut all: Vec<&str> = args.to_vec();
    all.push(file.to_str().unwrap());
    let out = tickscope(&all);
    assert!(
        out.status.success(),
        "tickscope {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `top` with pprof's options on a fresh Go CPU profile: same rows as the real go tool pprof.
#[test]
fn top_matches_go_tool_pprof_on_a_go_cpu_profile() {
    let (cpu, _) = go_profiles();
    let text = go_pprof(&["-top"], cpu);
    for name in ["main.hot", "main.warm", "main.cold"] {
        assert!(
            text.contains(name),
            "the Go program's profile lacks {name}:\n{text}"
        );
    }
    let cases: &[(&[&str], &[&str])] = &[
        (&["-top"], &["top"]),
        (&["-top", "-cum"], &["top", "--sort", "cum"]),
        (&["-top", "-nodecount=4"], &["top", "--nodecount", "4"]),
        (&["-top", "-lines"], &["top", "--lines"]),
        (&["-top", "-files"], &["top", "--files"]),
        (
            &["-top", "-sample_index=samples"],
            &["top", "--sample-index", "samples"],
        ),
        (&["-top", "-unit=ms"], &["top", "--unit", "ms"]),
        (&["-top", "-focus=middle"], &["top", "--focus", "middle"]),
        (&["-top", "-ignore=cold"], &["top", "--ignore", "cold"]),
        (&["-top", "-hide=spin"], &["top", "--hide", "spin"]),
        (
            &["-top", "-tagfocus=worker=a"],
            &["top", "--tagfocus", "worker=a"],
        ),
    ];
    for (go_args, our_args) in cases {
        let want = go_pprof(go_args, cpu);
        let got = ours(our_args, cpu);
        assert_eq!(
            rows_of(&got),
            rows_of(&want),
            "{go_args:?}\n-- go:\n{want}\n-- ours:\n{got}"
        );
        let header = |t: &str| -> Vec<String> {
            t.lines()
                .filter(|l| {
                    l.starts_with("Showing") || l.starts_with("Dropped") || l.starts_with("Type:")
                })
                .map(str::to_string)
                .collect()
        };
        assert_eq!(header(&got), header(&want), "{go_args:?} header");
    }
}

/// A heap profile of our own (`TICKSCOPE_HEAPPROFILE`, the `tickscope` binary's allocations
/// during a demo): `go tool pprof` reads it, as Go's heap profiles, with every sample type
/// (and `inuse_space` by default), and `top` prints the same rows for each.
#[test]
fn a_heap_profile_of_ours_reads_the_same_in_go_tool_pprof_and_top() {
    let dir = std::env::temp_dir().join(format!("tickscope-heap-top-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let heap = dir.join("heap.pb.gz");
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(["demo", "--seconds", "0.3", "--threads", "2"])
        .env("TICKSCOPE_HEAPPROFILE", &heap)
        .env("TICKSCOPE_HEAP_RATE", "4096")
        .env_remove("TICKSCOPE_SUMMARY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("heap profile written to"), "{stderr}");
    let default = go_pprof(&["-top"], &heap);
    assert!(default.contains("Type: inuse_space"), "{default}");
    for index in [
        "alloc_objects",
        "alloc_space",
        "inuse_objects",
        "inuse_space",
    ] {
        let want = go_pprof(&["-top", &format!("-sample_index={index}")], &heap);
        let got = ours(&["top", "--sample-index", index], &heap);
        assert!(want.contains(&format!("Type: {index}")), "{want}");
        assert!(!rows_of(&want).is_empty(), "{want}");
        assert_eq!(
            rows_of(&got),
            rows_of(&want),
            "{index}\n-- go:\n{want}\n-- ours:\n{got}"
        );
    }
    // The allocator's own frames are dropped by both.
    assert!(!default.contains("tickscope_sampler::heap"), "{default}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `peek`: the same callers, callees and weights as `go tool pprof -peek`.
#[test]
fn peek_matches_go_tool_pprof_on_a_go_cpu_profile() {
    let (cpu, _) = go_profiles();
    for rx in ["main\\.middle", "main\\.(hot|cold)", "spin"] {
        let want = go_pprof(&["-peek", rx], cpu);
        let got = ours(&["peek", rx], cpu);
        let body = |t: &str| -> Vec<String> {
            t.lines()
                .skip_while(|l| !l.starts_with("-----"))
                .map(|l| l.trim_end().to_string())
                .collect()
        };
        assert_eq!(
            body(&got),
            body(&want),
            "peek {rx}\n-- go:\n{want}\n-- ours:\n{got}"
        );
    }
}

/// The totals of every sample type: `go tool pprof -raw`'s sample lines summed, against our
/// `top --json` totals (a heap profile has four sample types).
#[test]
fn totals_match_go_tool_pprof_raw() {
    let (cpu, heap) = go_profiles();
    for file in [cpu, heap] {
        let raw = go_pprof(&["-raw"], file);
        // "Samples:" then a line of type names, then "  v1 v2 ...: locs" lines, until "Locations".
        let mut lines = raw
            .lines()
            .skip_while(|l| !l.starts_with("Samples:"))
            .skip(1);
        let types: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        let mut sums = vec![0i64; types.len()];
        for l in lines.take_while(|l| !l.starts_with("Locations")) {
            let Some((values, _)) = l.split_once(':') else {
                continue;
            };
            let values: Vec<i64> = values
                .split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect();
            if values.len() == types.len() {
                for (s, v) in sums.iter_mut().zip(values) {
                    *s += v;
                }
            }
        }
        assert!(sums.iter().any(|&s| s > 0), "{raw}");
        for (i, want) in sums.iter().enumerate() {
            let out = ours(&["top", "--json", "--sample-index", &i.to_string()], file);
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(
                v["total"].as_i64(),
                Some(*want),
                "{} sample type {}",
                file.display(),
                types[i]
            );
        }
    }
}

// --- tree, flame graphs, folded input -----------------------------------------------------

/// `tree`: the call tree from the root down, children under their parents with cum%.
#[test]
fn tree_indents_callees_under_callers_with_cum() {
    let file = testdata().join("sample.cpu.pb.gz");
    let text = ours(&["tree"], &file);
    let lines: Vec<&str> = text.lines().collect();
    let at = |name: &str| {
        lines
            .iter()
            .position(|l| l.ends_with(name))
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
    };
    let (main, busy) = (at(" main.main"), at(" main.busyLoop"));
    assert!(busy > main, "{text}");
    // The name column: the callee is indented two more than its caller.
    let name_col = |i: usize| lines[i].find("main.").unwrap();
    assert_eq!(name_col(busy), name_col(main) + 2, "{text}");
    assert!(lines[main].contains("  100%"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&ours(&["tree", "--json"], &file)).unwrap();
    assert_eq!(json["root"]["cum"], 1_760_000_000i64);
}

/// `flamegraph`: an SVG with the functions; `--reverse` puts leaves at the root (an icicle).
#[test]
fn flamegraph_writes_svg_and_reverse_puts_leaves_first() {
    let dir = std::env::temp_dir().join(format!("tickscope-flame-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = testdata().join("sample.cpu.pb.gz");
    let svg = dir.join("f.svg");
    let out = tickscope(&[
        "flamegraph",
        file.to_str().unwrap(),
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.contains("runtime.mapiternext"));
    let stacks = |args: &[&str]| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&ours(args, &file)).unwrap();
        v["stacks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["stack"].as_str().unwrap().to_string())
            .collect()
    };
    let forward = stacks(&["flamegraph", "--json"]);
    let reverse = stacks(&["flamegraph", "--json", "--reverse"]);
    assert!(
        forward
            .iter()
            .all(|s| s.starts_with("runtime.main") || s.starts_with("runtime.goexit")),
        "{forward:?}"
    );
    assert!(
        reverse
            .iter()
            .any(|s| s.starts_with("runtime.mapiternext;")),
        "{reverse:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Folded stacks are a profile too: `top` on them counts flat at the leaf, cum on the path.
#[test]
fn folded_stacks_load_by_content() {
    let dir = std::env::temp_dir().join(format!("tickscope-folded-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("stacks.txt");
    std::fs::write(
        &file,
        "main;parse;tokenize 30\nmain;parse 10\nmain;alloc 60\n",
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&ours(&["top", "--json"], &file)).unwrap();
    let rows: Vec<(String, i64, i64)> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["flat"].as_i64().unwrap(),
                r["cum"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("alloc".to_string(), 60, 60),
            ("tokenize".to_string(), 30, 30),
            ("parse".to_string(), 10, 40),
            ("main".to_string(), 0, 100)
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A real gperftools CPU profile (Debian's libprofiler preloaded into a C program): the
/// legacy reader takes it and `top` names the hot function from the binary's symbols.
#[test]
fn gperftools_profile_is_read_and_symbolised_from_the_binary() {
    let lib = [
        "/usr/lib/x86_64-linux-gnu/libprofiler.so.0",
        "/usr/lib/aarch64-linux-gnu/libprofiler.so.0",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists());
    let Some(lib) = lib else {
        crate::support::skip_unless_ci("libprofiler (Debian google-perftools) not installed");
        return;
    };
    let dir = std::env::temp_dir().join(format!("tickscope-gperf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("hot.c");
    std::fs::write(
        &src,
        "#include <time.h>\nvolatile unsigned long sink;\n\
         __attribute__((noinline)) void hot_loop(void) { for (unsigned long i = 0; i < 4000000UL; i++) sink += i * i; }\n\
         int main(void) { clock_t end = clock() + CLOCKS_PER_SEC / 2; while (clock() < end) hot_loop(); return 0; }\n",
    )
    .unwrap();
    let bin = dir.join("hot");
    let cc = Command::new("gcc")
        .args(["-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&bin)
        .arg(&src)
        .status();
    if !cc.is_ok_and(|s| s.success()) {
        crate::support::skip_unless_ci("gcc not available");
        return;
    }
    let prof = dir.join("hot.prof");
    let status = Command::new(&bin)
        .env("LD_PRELOAD", lib)
        .env("CPUPROFILE", &prof)
        .env("CPUPROFILE_FREQUENCY", "500")
        .status()
        .unwrap();
    assert!(status.success());
    let text = ours(&["top", "--nodecount", "3"], &prof);
    let first_row = rows_of(&text).into_iter().next().unwrap_or_default();
    assert!(first_row.ends_with("hot_loop"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Several files: merged into one profile, as `go tool pprof FILE FILE...` merges them (the
/// processes of one `record` run, say).
#[test]
fn several_profiles_are_merged_as_go_tool_pprof_merges_them() {
    let (cpu, _) = go_profiles();
    let other = testdata().join("sample.cpu.pb.gz");
    let go = Command::new("go")
        .args(["tool", "pprof", "-top"])
        .arg(cpu)
        .arg(&other)
        .output()
        .unwrap();
    assert!(
        go.status.success(),
        "{}",
        String::from_utf8_lossy(&go.stderr)
    );
    let want = String::from_utf8_lossy(&go.stdout).into_owned();
    let got = tickscope(&["top", cpu.to_str().unwrap(), other.to_str().unwrap()]);
    assert!(
        got.status.success(),
        "{}",
        String::from_utf8_lossy(&got.stderr)
    );
    let got = String::from_utf8_lossy(&got.stdout).into_owned();
    assert!(rows_of(&want).len() > 3, "{want}");
    assert_eq!(
        rows_of(&got),
        rows_of(&want),
        "-- go:\n{want}\n-- ours:\n{got}"
    );
    // Profiles of different kinds are not merged: one line naming the file, exit 2.
    let (_, heap) = go_profiles();
    let bad = tickscope(&["top", cpu.to_str().unwrap(), heap.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains(heap.to_str().unwrap()) && err.contains("incompatible"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
