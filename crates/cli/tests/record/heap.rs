//! `tickscope record --heap`: the heap of every process of the run (the preload library's
//! `malloc` hooks), merged into one profile whose figures are each function's within their
//! sampling error.

use std::process::Command;

use super::{bin, build_c, library, scratch};

/// The sampling interval the test runs at, bytes.
const RATE: f64 = 65536.0;

/// `tickscope top FILE --sample-index INDEX --json`: each function's flat value.
fn flat(file: &std::path::Path, index: &str) -> Vec<(String, f64)> {
    let out = Command::new(bin())
        .arg("top")
        .arg(file)
        .args(["--sample-index", index, "--json", "--nodecount", "100"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["flat"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn record_heap_merges_every_process_heap_within_its_sampling_error() {
    library();
    let dir = scratch("heap");
    let src = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../preload/tests/c/heap.c"),
    )
    .unwrap();
    let exe = build_c(&dir, "heap", &src);
    // A shell running the program twice, each a process of its own that the shell execs.
    let out = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_HEAP_RATE", format!("{RATE}"))
        .args(["record", "--heap", "-o", "h.pb.gz", "--", "sh", "-c"])
        .arg("\"$0\"; \"$0\"; true")
        .arg(&exe)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.matches("heap: done").count(), 2, "{stdout}");
    // No per-process line of the library's: record says where the run's profile went.
    assert!(!stderr.contains("heap profile written to /"), "{stderr}");
    assert!(stderr.contains(" processes written to h.pb.gz"), "{stderr}");
    // The top table, by the bytes still in use, leads with what the programs kept.
    let table: Vec<&str> = stderr
        .lines()
        .filter(|l| l.ends_with("heap_keep"))
        .collect();
    assert_eq!(table.len(), 1, "{stderr}");
    // Each function's estimate over both runs: 2 × its blocks, within four standard errors
    // of a sum of 2n blocks (each sampled with chance 1 - exp(-size / rate)).
    let (inuse, alloc) = (
        flat(&dir.join("h.pb.gz"), "inuse_space"),
        flat(&dir.join("h.pb.gz"), "alloc_space"),
    );
    let of = |rows: &[(String, f64)], f: &str| -> f64 {
        rows.iter().filter(|(n, _)| n == f).map(|(_, v)| v).sum()
    };
    for (what, rows, name, n, size) in [
        ("in use", &inuse, "heap_keep", 2000, 64 << 10),
        ("in use", &inuse, "heap_leak", 2000, 10 << 10),
        ("allocated", &alloc, "heap_churn", 400_000, 64),
    ] {
        let p = -(-(size as f64) / RATE).exp_m1();
        let tolerance = 4.0 * ((1.0 - p) / (n as f64 * p)).sqrt();
        let (got, want) = (of(rows, name), (n * size) as f64);
        assert!(
            (got / want - 1.0).abs() <= tolerance,
            "{name} {what}: {got:.0} of {want:.0} (tolerance {:.1}%)\n{rows:?}",
            tolerance * 100.0
        );
    }
    // The run's own directory is gone: the output and the program's files only.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["h.pb.gz", "heap", "heap.c"]);
    let _ = std::fs::remove_dir_all(&dir);
}
