//! `tickscope record -- PROG`: the program runs with libtickscope.so preloaded, its exit
//! status comes back, and the top functions of its profile are printed.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tickscope")
}

/// libtickscope.so next to the binary, where `record` looks for it (built by the test).
fn library() -> PathBuf {
    let lib = Path::new(bin()).with_file_name("libtickscope.so");
    crate::preload_support::build_library(lib.parent().unwrap());
    assert!(lib.exists(), "{} is missing after the build", lib.display());
    lib
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tickscope-record-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn workload(dir: &Path) -> PathBuf {
    let exe = dir.join("workload");
    crate::preload_support::build_workload(&exe, true);
    exe
}

#[test]
fn record_forwards_the_exit_status_and_prints_the_top_functions() {
    library();
    let dir = scratch("status");
    let exe = workload(&dir);
    let out = Command::new(bin())
        .current_dir(&dir)
        .args(["record", "-F", "1000", "-o", "w.pb.gz", "--"])
        .arg(&exe)
        .args(["600", "--exit", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    // The program's own output is untouched; the table and the path go to stderr.
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("cpu_ns "));
    assert!(
        stderr.contains("tickscope: profile written to w.pb.gz"),
        "{stderr}"
    );
    let rows: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .take_while(|l| !l.starts_with("tickscope:"))
        .collect();
    assert_eq!(rows.len(), 10, "{stderr}");
    let flat_pct = |name: &str| -> f64 {
        let row = rows
            .iter()
            .find(|r| r.split_whitespace().last() == Some(name))
            .unwrap_or_else(|| panic!("{name} not in the top 10:\n{stderr}"));
        row.split_whitespace()
            .nth(1)
            .unwrap()
            .trim_end_matches('%')
            .parse()
            .unwrap()
    };
    for (name, share) in [
        ("work_a", 40.0),
        ("work_b", 25.0),
        ("work_c", 20.0),
        ("work_d", 10.0),
    ] {
        let got = flat_pct(name);
        assert!(
            (got - share).abs() <= 6.0,
            "{name}: {got}% vs {share}%:\n{stderr}"
        );
    }
    assert!(dir.join("w.pb.gz").is_file());
    // The library's own "written" line is silenced: one line says where, not two.
    assert_eq!(stderr.matches("written to").count(), 1, "{stderr}");
}

#[test]
fn record_says_where_the_library_is_missing_and_what_a_program_did_not_write() {
    let dir = scratch("missing");
    let out = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", dir.join("nope.so"))
        .args(["record", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("TICKSCOPE_LIB=") && stderr.contains("nope.so: no such file"),
        "{stderr}"
    );

    // A program that never runs main's exit path (killed by a signal) writes nothing:
    // said, with its status forwarded as a shell does (128 + 9).
    let out = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", library())
        .args(["record", "-o", "k.pb.gz", "--", "sh", "-c", "kill -KILL $$"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(stderr.contains("wrote no profile to"), "{stderr}");
}
