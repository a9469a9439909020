//! The C and C++ API against the built library.

use std::process::Command;

use super::*;

/// The exit summary's row for `name`: its calls column.
fn calls(summary: &str, name: &str) -> Option<u64> {
    summary.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?;
        // name, location (one or two words: "c/api.c:40 +1"), calls
        let cols: Vec<&str> = rest.split_whitespace().collect();
        let i = if cols.get(1).is_some_and(|c| c.starts_with('+')) {
            2
        } else {
            1
        };
        cols.get(i)?.parse().ok()
    })
}

#[test]
fn c90_program_uses_scopes_groups_timer_sampler_capture_and_error_codes() {
    let dir = scratch("c90");
    let exe = dir.join("api");
    compile(
        "gcc",
        &[
            "-std=c90",
            "-pedantic",
            "-Werror",
            "-Wall",
            "-Wextra",
            "-O2",
        ],
        &[c_source("api.c")],
        &exe,
        &shared_lib_flags(),
    );
    let profile = dir.join("api.pb.gz");
    let capture = dir.join("api.tscap");
    let out = Command::new(&exe)
        .arg(&profile)
        .arg(&capture)
        .env("TICKSCOPE_INTERVAL", "20ms")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for line in [
        "timer_create 0",
        "begin 0 end 0 end-again 0",
        "elapsed ok ticks ok rate ok now ok ms ok",
        "reset 0",
        "null site -1 the call site is a null pointer",
        "null timer -1",
        "stop before start -2 no sampler is running in this process",
        "bad rate -1 cannot start the sampler: sampling frequency 0 Hz: must be 1 to 100000",
        "bad sink -1",
        "capture stop before start -2",
        "capture start 0",
        "sampler start 0",
        "sampler start again -2",
        "flush 0",
        "sampler stop 0",
        "capture stop 0",
        "version 0.1.0 enabled 1",
    ] {
        assert!(
            stdout.lines().any(|l| l.trim_end() == line),
            "missing {line:?} in\n{stdout}"
        );
    }
    // The exit summary, as in Rust: every return path closed its scope; the group is one
    // row with both functions' calls; TICKSCOPE_FUNCTION() is named after the function.
    assert_eq!(calls(&stderr, "parse "), Some(40_300), "{stderr}");
    assert_eq!(calls(&stderr, "pool [group] "), Some(100), "{stderr}");
    assert_eq!(calls(&stderr, "named_after_function "), Some(7), "{stderr}");
    assert_eq!(calls(&stderr, "manual "), Some(1), "{stderr}");
    assert!(stderr.contains("c/api.c:20"), "{stderr}");
    assert!(stderr.contains("nothing lost"), "{stderr}");
    // Interval lines, as in Rust.
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("TID 0x") && l.contains("time spent in \"parse\"")),
        "{stderr}"
    );
    // The profile: go tool pprof reads it, and the sampled function is in it.
    let top = pprof_rows(&profile);
    assert!(
        top.iter().any(|r| r.2.contains("parse")),
        "parse not in the profile: {top:?}"
    );
    let bytes = std::fs::read(&capture).unwrap();
    assert!(
        bytes.starts_with(b"TSCAP\r\n\x1a") && bytes.len() > 1000,
        "{} bytes",
        bytes.len()
    );
}

#[test]
fn cpp_program_uses_raii_scopes_function_names_and_groups() {
    let dir = scratch("cpp");
    let exe = dir.join("apipp");
    compile(
        "g++",
        &["-Wall", "-Wextra", "-Werror", "-O2"],
        &[c_source("api.cpp")],
        &exe,
        &shared_lib_flags(),
    );
    let out = Command::new(&exe).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("total 780 caught 5 elapsed ok"), "{stdout}");
    // __PRETTY_FUNCTION__ "T shapes::Grid<T>::sum(int) const [with T = double]" → the name.
    assert_eq!(
        calls(&stderr, "shapes::Grid<T>::sum "),
        Some(40),
        "{stderr}"
    );
    assert_eq!(calls(&stderr, "store [group] "), Some(60), "{stderr}");
    // Half the calls left by an exception: the destructor closed them all.
    assert_eq!(calls(&stderr, "may_throw "), Some(10), "{stderr}");
    assert_eq!(calls(&stderr, "after "), Some(1), "{stderr}");
    assert!(stderr.contains("nothing lost"), "{stderr}");
}

#[test]
fn static_library_links_into_a_c_program() {
    let dir = scratch("static");
    let exe = dir.join("api-static");
    let archive = lib("libtickscope.a");
    compile(
        "gcc",
        &["-std=c90", "-pedantic", "-Werror", "-O2"],
        &[c_source("api.c"), archive],
        &exe,
        &["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s"],
    );
    let out = Command::new(&exe)
        .arg(dir.join("p.pb.gz"))
        .arg(dir.join("c.tscap"))
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("sampler stop 0"), "{stdout}");
    assert_eq!(calls(&stderr, "parse "), Some(40_300), "{stderr}");
    assert!(dir.join("p.pb.gz").exists());
}
