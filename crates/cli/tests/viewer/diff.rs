//! A diff of two profiles in the viewer: diff's table and both totals, frames found only in
//! the base drawn, the widths and the normalisation chosen.

use std::path::Path;

use super::{browse, cell, dir, json, ok, samples_of, shots, thousands, tickscope, view};

#[test]
fn a_diff_of_two_profiles_is_diffs_table_and_both_totals() {
    let d = dir("diff");
    let (a, b) = (d.join("a.pb.gz"), d.join("b.pb.gz"));
    for (p, threads) in [(&a, "1"), (&b, "2")] {
        ok(&tickscope()
            .args([
                "demo",
                "--seconds",
                "0.3",
                "--threads",
                threads,
                "--interval",
                "off",
                "--cpuprofile",
            ])
            .arg(p)
            .env("TICKSCOPE_SUMMARY", "off")
            .output()
            .unwrap());
    }
    let v = view(&["--diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    let out = shots("diff");
    let page = browse("check.mjs", &v.url, &out, &["--diff"]);
    let want = json(
        &tickscope()
            .arg("diff")
            .arg(&a)
            .arg(&b)
            .arg("--json")
            .output()
            .unwrap(),
    );
    let rows = page["diff_rows"].as_array().unwrap();
    let w = want["rows"].as_array().unwrap();
    assert_eq!(rows.len(), w.len());
    for (g, w) in rows.iter().zip(w) {
        assert_eq!(g["name"]["value"], w["name"]);
        assert_eq!(cell(g, "flat"), w["flat"].as_f64());
    }
    let total = |p: &Path| {
        json(
            &tickscope()
                .arg("top")
                .arg(p)
                .arg("--json")
                .output()
                .unwrap(),
        )["total"]
            .as_f64()
    };
    assert_eq!(page["diff_total"]["new"].as_f64(), total(&b));
    assert_eq!(page["diff_total"]["base"].as_f64(), total(&a));
    // The diff's status: both profiles' samples, base first (not the profile tab's).
    let status = page["diff_status"].as_str().unwrap();
    let (sa, sb) = (thousands(samples_of(&a)), thousands(samples_of(&b)));
    assert!(
        status.starts_with(&format!("{sa} samples")) && status.contains(&format!("→ {sb} samples")),
        "{status:?}, want {sa} → {sb} samples"
    );
    assert!(out.join("diff.png").exists());
    // Frames found only in the base are drawn (they were dropped): by default a frame is as
    // wide as both profiles' time together; as wide as the new profile, they vanish.
    let only = &page["diff_base_only"];
    assert!(only["both"]["n"].as_u64() > Some(0), "{only}");
    assert!(only["both"]["width"].as_f64() > Some(0.0), "{only}");
    assert!(only["both"]["drawn"].as_u64() > Some(0), "{only}");
    assert_eq!(only["new"]["width"].as_f64(), Some(0.0), "{only}");
    assert_eq!(
        only["both"]["root"].as_f64(),
        Some(total(&a).unwrap() + total(&b).unwrap()),
        "{only}"
    );
    // The two profiles have their own tabs beside the diff's.
    assert_eq!(
        page["tabs"],
        serde_json::json!(["Profile: a.pb.gz", "Profile: b.pb.gz", "Diff"]),
        "{page}"
    );
    // Normalised: the base scaled to the new profile's total.
    let norm = &page["diff_normalised"];
    let (b, n) = (
        norm["base_root"].as_f64().unwrap(),
        norm["new_root"].as_f64().unwrap(),
    );
    assert!((b - n).abs() <= n.abs() * 1e-9, "{norm}");
    drop(v);
    let _ = std::fs::remove_dir_all(&d);
}
