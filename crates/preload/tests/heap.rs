//! LD_PRELOAD=libtickscope.so with TICKSCOPE_HEAPPROFILE on an unmodified C program
//! (`tests/c/heap.c`: a known heap, every function of the malloc family, threads, a fork
//! child): each function's estimate within its sampling error, read by `go tool pprof`.

use std::path::Path;
use std::process::Command;

use super::*;

/// The sampling interval the test runs at, bytes.
const RATE: f64 = 65536.0;

/// (function, blocks, bytes each): what the program allocates.
const KEEP: (&str, usize, usize) = ("heap_keep", 1000, 64 << 10);
const CHURN: (&str, usize, usize) = ("heap_churn", 200_000, 64);
const LEAK: (&str, usize, usize) = ("heap_leak", 1000, 10 << 10);

/// The standard error of an estimate of `n` blocks of `size` bytes, relative to their total:
/// each is sampled with chance `p = 1 - exp(-size / rate)` and counted `1 / p` times.
fn relative_error(n: usize, size: usize) -> f64 {
    let p = -(-(size as f64) / RATE).exp_m1();
    ((1.0 - p) / (n as f64 * p)).sqrt()
}

/// `go tool pprof -top -sample_index=INDEX -unit=B`: each function's flat bytes.
fn flat_bytes(profile: &Path, index: &str) -> Vec<(String, f64)> {
    let out = Command::new("go")
        .args(["tool", "pprof", "-top", "-unit=B", "-nodefraction=0"])
        .arg(format!("-sample_index={index}"))
        .arg(profile)
        .output()
        .expect("`go` not found: install Go (Debian: apt-get install golang-go; .ci/run does)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.contains(&format!("Type: {index}")),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let flat = match *cols.first()? {
                "0" => 0.0,
                v => v.strip_suffix('B')?.parse().ok()?,
            };
            Some((cols.get(5..)?.join(" "), flat))
        })
        .collect()
}

/// `tests/c/heap.c` built -O2 into `dir/heap` (with frame pointers: `fp`).
fn build(dir: &Path, fp: bool) -> std::path::PathBuf {
    let exe = dir.join("heap");
    let flag = if fp {
        "-fno-omit-frame-pointer"
    } else {
        "-fomit-frame-pointer"
    };
    compile(
        "gcc",
        &["-O2", flag, "-pthread"],
        &[c_source("heap.c")],
        &exe,
        &[] as &[&str],
    );
    exe
}

#[test]
fn a_c_programs_heap_is_estimated_within_its_sampling_error_and_unharmed() {
    let dir = scratch("heap");
    let exe = build(&dir, true);
    let path = dir.join("heap.pb.gz");
    let out = Command::new(&exe)
        .env("LD_PRELOAD", lib("libtickscope.so"))
        .env("TICKSCOPE_HEAPPROFILE", &path)
        .env("TICKSCOPE_HEAP_RATE", format!("{RATE}"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success() && stdout.contains("heap: done"),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("heap profile written to"), "{stderr}");
    // The fork child wrote nothing over its parent's profile, nor beside it.
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("heap.pb.gz"))
        .collect();
    assert_eq!(files, ["heap.pb.gz"]);
    let inuse = flat_bytes(&path, "inuse_space");
    let alloc = flat_bytes(&path, "alloc_space");
    let of = |rows: &[(String, f64)], f: &str| -> f64 {
        rows.iter().filter(|(n, _)| n == f).map(|(_, v)| v).sum()
    };
    let check = |what: &str, got: f64, (name, n, size): (&str, usize, usize)| {
        let want = (n * size) as f64;
        let tolerance = 4.0 * relative_error(n, size);
        assert!(
            (got / want - 1.0).abs() <= tolerance,
            "{name} {what}: {got:.0} bytes estimated of {want:.0} (tolerance {:.1}%, 4 standard \
             errors)\nin use: {inuse:?}\nallocated: {alloc:?}",
            tolerance * 100.0
        );
    };
    // The allocator's frames (the hooks, the sampler) are dropped: each function is the
    // leaf of its own allocations.
    check("in use", of(&inuse, KEEP.0), KEEP);
    check("in use", of(&inuse, LEAK.0), LEAK);
    check("allocated", of(&alloc, KEEP.0), KEEP);
    check("allocated", of(&alloc, CHURN.0), CHURN);
    check("allocated", of(&alloc, LEAK.0), LEAK);
    // Every sampled block the churn and the threads freed was found freed.
    assert_eq!(of(&inuse, CHURN.0), 0.0, "{inuse:?}");
    assert_eq!(of(&inuse, "heap_threads"), 0.0, "{inuse:?}");
    // 8 threads × 20,000 blocks of 100 to 1,099 bytes (mean 599.5): sampled on each thread.
    let threads = 8.0 * 20_000.0 * 599.5;
    let got = of(&alloc, "heap_threads");
    assert!(
        (got / threads - 1.0).abs() < 0.2,
        "threads: {got} of {threads}"
    );
    for (name, _) in &alloc {
        assert!(
            !["malloc", "calloc", "realloc"].contains(&name.as_str()),
            "an allocator frame is left in the profile: {alloc:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_a_heap_profile_asked_for_the_hooks_pass_every_call_through() {
    let dir = scratch("heap-off");
    let exe = build(&dir, false);
    let out = Command::new(&exe)
        .env("LD_PRELOAD", lib("libtickscope.so"))
        .env_remove("TICKSCOPE_HEAPPROFILE")
        .current_dir(&dir)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success() && stdout.contains("heap: done"),
        "{stdout}{stderr}"
    );
    assert!(!stderr.contains("heap profile"), "{stderr}");
    // Nothing written anywhere near it.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["heap"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn five_thousand_threads_and_a_bad_free_fare_as_without_the_profiler() {
    let dir = scratch("heap-harm");
    let exe = build(&dir, true);
    let run = |args: &[&str], profiled: bool| {
        let mut c = Command::new(&exe);
        c.args(args);
        if profiled {
            c.env("LD_PRELOAD", lib("libtickscope.so"))
                .env("TICKSCOPE_HEAPPROFILE", dir.join("h.pb.gz"))
                // Every thread samples: each takes the table.
                .env("TICKSCOPE_HEAP_RATE", "4096");
        }
        c.output().unwrap()
    };
    let threads = run(&["--threads", "5000"], true);
    let (stdout, stderr) = text(&threads);
    assert!(
        threads.status.success() && stdout.contains("heap: 5000 threads done"),
        "{stdout}{stderr}"
    );
    assert!(stderr.contains("heap profile written to"), "{stderr}");
    // The threads' blocks were sampled and all found freed.
    let inuse = flat_bytes(&dir.join("h.pb.gz"), "inuse_space");
    let alloc = flat_bytes(&dir.join("h.pb.gz"), "alloc_space");
    let of = |rows: &[(String, f64)], f: &str| -> f64 {
        rows.iter().filter(|(n, _)| n == f).map(|(_, v)| v).sum()
    };
    // 5,000 × (100 blocks of 1,000 to 1,099 bytes + 4,096): 8.3% standard error at most.
    let want = 5000.0 * (100.0 * 1049.5 + 4096.0);
    let got = of(&alloc, "light_worker");
    assert!((got / want - 1.0).abs() < 0.2, "{got} of {want}: {alloc:?}");
    assert_eq!(of(&inuse, "light_worker"), 0.0, "{inuse:?}");
    // A pointer malloc never gave: glibc aborts, with the profiler as without it.
    use std::os::unix::process::ExitStatusExt;
    for profiled in [false, true] {
        let out = run(&["--bad-free"], profiled);
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGABRT),
            "profiled {profiled}: {:?} {}",
            out.status,
            text(&out).1
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
