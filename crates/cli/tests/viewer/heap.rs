//! Heap profiles in the viewer: the sample-type switch shows each of a heap profile's four
//! types (allocated and in use, objects and bytes) with the figures `tickscope top` and
//! `tickscope diff` print for it, in the profile's tab and in a diff of two heap profiles.

use std::path::Path;

use super::{browse, cell, dir, json, ok, shots, tickscope, view};

/// A heap profile of the demo (`threads` workers for 0.3 s, sampled every 64 KiB).
fn heap_profile(p: &Path, threads: &str) {
    heap_profile_at(p, threads, "65536");
}

/// A heap profile of the demo sampled every `rate` bytes (0: none sampled).
fn heap_profile_at(p: &Path, threads: &str, rate: &str) {
    ok(&tickscope()
        .args([
            "demo",
            "--seconds",
            "0.3",
            "--threads",
            threads,
            "--interval",
            "off",
        ])
        .env("TICKSCOPE_SUMMARY", "off")
        .env("TICKSCOPE_HEAP_RATE", rate)
        .env("TICKSCOPE_HEAPPROFILE", p)
        .output()
        .unwrap());
}

/// `tickscope ARGS --sample-index alloc_space --json`.
fn by_alloc_space(args: &[&Path], cmd: &str) -> serde_json::Value {
    json(
        &tickscope()
            .arg(cmd)
            .args(args)
            .args(["--sample-index", "alloc_space", "--json"])
            .output()
            .unwrap(),
    )
}

/// The page's rows against the command's: the same names and flat values, in order.
fn same_rows(page: &serde_json::Value, want: &serde_json::Value, what: &str) {
    let rows = page.as_array().unwrap();
    let w = want["rows"].as_array().unwrap();
    assert!(!w.is_empty(), "{what}: the command printed no rows: {want}");
    assert_eq!(rows.len(), w.len(), "{what}");
    for (g, w) in rows.iter().zip(w) {
        assert_eq!(g["name"]["value"], w["name"], "{what}");
        assert_eq!(cell(g, "flat"), w["flat"].as_f64(), "{what}: {}", w["name"]);
    }
}

#[test]
fn a_heap_profiles_sample_types_are_switched_and_show_what_top_and_diff_print() {
    let d = dir("heap");
    let (one, base, new) = (d.join("one.pb.gz"), d.join("a.pb.gz"), d.join("b.pb.gz"));
    heap_profile(&one, "1");
    heap_profile(&base, "1");
    heap_profile(&new, "2");
    let v = view(&[
        one.to_str().unwrap(),
        "--diff",
        base.to_str().unwrap(),
        new.to_str().unwrap(),
    ]);
    let out = shots("heap");
    // Sample type 1 of a heap profile: alloc_space (alloc_objects, alloc_space,
    // inuse_objects, inuse_space).
    let page = browse("check.mjs", &v.url, &out, &["--diff", "--si=1"]);
    // Shown first: the profile's default, as `top` without --sample-index (Go's: in use).
    assert_eq!(page["profile_default_type"], "inuse_space", "{page}");
    assert_eq!(page["diff_default_type"], "inuse_space", "{page}");
    assert_eq!(page["profile_sample_type"], "alloc_space", "{page}");
    assert_eq!(page["diff_sample_type"], "alloc_space", "{page}");
    let top = by_alloc_space(&[&one], "top");
    same_rows(&page["top"], &top, "top --sample-index alloc_space");
    assert_eq!(page["flame_total"].as_f64(), top["total"].as_f64());
    // The status line: the total of the type shown, in pprof's units (1 kB = 1,024 B).
    let status = page["profile_status"].as_str().unwrap();
    let total = top["total"].as_f64().unwrap();
    let shown = status
        .strip_suffix(" alloc_space")
        .unwrap_or_else(|| panic!("{status:?}"));
    let (num, unit) = shown.split_at(shown.find(|c: char| c.is_ascii_alphabetic()).unwrap());
    let scale = match unit {
        "GB" => 2f64.powi(30),
        "MB" => 2f64.powi(20),
        "kB" => 2f64.powi(10),
        _ => 1.0,
    };
    assert!(
        (num.parse::<f64>().unwrap() - total / scale).abs() <= 0.0051,
        "{status:?} for {total} bytes"
    );
    let diff = by_alloc_space(&[&base, &new], "diff");
    same_rows(&page["diff_rows"], &diff, "diff --sample-index alloc_space");
    assert!(out.join("profile-flame-si.png").exists());
    drop(v);
    let _ = std::fs::remove_dir_all(&d);
}

/// A profile with nothing of the type shown says so over its flame graph, and its status line
/// gives the total (zero), where the page was blank.
#[test]
fn an_empty_profile_says_so() {
    let d = dir("heap-empty");
    let empty = d.join("empty.pb.gz");
    heap_profile_at(&empty, "1", "0");
    let v = view(&[empty.to_str().unwrap()]);
    let out = shots("heap-empty");
    let page = browse("check.mjs", &v.url, &out, &[]);
    assert_eq!(
        page["profile_empty"], "No inuse_space in this profile: nothing to draw.",
        "{page}"
    );
    assert_eq!(page["profile_status"], "0B inuse_space", "{page}");
    assert_eq!(
        page["top_empty"], "No inuse_space in this profile: nothing to list.",
        "{page}"
    );
    drop(v);
    let _ = std::fs::remove_dir_all(&d);
}
