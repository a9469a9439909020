//! `list`, `graph` and `diff` on a real Go CPU profile (google/pprof's test data), checked
//! against what `go tool pprof` 1.19 prints for the same file; bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tickscope() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tickscope"))
}

/// The profiles copied from google/pprof's test data (tests/data/pprof/README.txt).
fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/pprof")
}

fn sample() -> PathBuf {
    testdata().join("sample.cpu.pb.gz")
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tickscope-views-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ok(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn has_dot() -> bool {
    Command::new("dot").arg("-V").output().is_ok()
}

/// The sources of sample.cpu.pb.gz are not on this machine: the routine is listed with its
/// totals, one message naming the file and suggesting --source-path, and the sampled lines'
/// figures without text.
#[test]
fn list_without_sources_names_the_file_and_keeps_the_figures() {
    let text = ok(&tickscope()
        .args(["list", "busyLoop"])
        .arg(sample())
        .output()
        .unwrap());
    let file = "/usr/local/google/home/sanjay/go/src/github.com/google/pprof/internal/report/\
                testdata/sample/sample.go";
    assert!(
        text.starts_with(&format!(
            "Total: 1.76s\nROUTINE ======================== main.busyLoop in {file}\n     \
             150ms      1.76s (flat, cum)   100% of Total\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(" Error: source file {file} not found")),
        "{text}"
    );
    assert!(text.contains("--source-path"), "{text}");
    // `go tool pprof -list busyLoop sample.cpu.pb.gz`, with a 200-line stand-in for
    // sample.go found through -source_path/-trim_path, prints (lines 27-42, the others `.`):
    //          .      130ms     32:
    //       50ms       50ms     35:
    //       50ms      1.42s     36:
    //       50ms      160ms     37:
    let figures: Vec<&str> = text.lines().filter(|l| l.ends_with(':')).collect();
    assert_eq!(
        figures,
        [
            "         .      130ms     32:",
            "      50ms       50ms     35:",
            "      50ms      1.42s     36:",
            "      50ms      160ms     37:",
        ],
        "{text}"
    );
}

/// With the source found through --source-path (matched by trailing components), the text
/// is pprof's: lines 27 to 42, values on the sampled ones.
#[test]
fn list_reads_sources_found_under_source_path() {
    let d = dir("list");
    std::fs::create_dir_all(d.join("sample")).unwrap();
    let src: String = (1..=200).map(|i| format!("// line {i}\n")).collect();
    std::fs::write(d.join("sample/sample.go"), src).unwrap();
    let out = ok(&tickscope()
        .args(["list", "busyLoop", "--json", "--source-path"])
        .arg(&d)
        .arg(sample())
        .output()
        .unwrap());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let f = &v["functions"][0];
    assert_eq!(f["name"], "main.busyLoop");
    assert_eq!(f["source_found"], true, "{v}");
    let lines = f["lines"].as_array().unwrap();
    assert_eq!(lines.first().unwrap()["line"], 27);
    assert_eq!(lines.last().unwrap()["line"], 42);
    let line36 = lines.iter().find(|l| l["line"] == 36).unwrap();
    assert_eq!(line36["text"], "// line 36");
    assert_eq!(line36["flat"], 50_000_000);
    assert_eq!(line36["cum"], 1_420_000_000);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn graph_is_dot_that_graphviz_accepts() {
    let dot = ok(&tickscope().arg("graph").arg(sample()).output().unwrap());
    assert!(dot.starts_with("digraph \"sample.bin\" {\n"), "{dot}");
    assert!(dot.contains("tooltip=\"main.busyLoop (1.76s)\""), "{dot}");
    assert!(dot.contains("label=\"main\\nbusyLoop\\n0.15s (8.52%)\\nof 1.76s (100%)\""));
    // Byte for byte what `go tool pprof -dot` writes, when Go is here.
    match Command::new("go")
        .args(["tool", "pprof", "-dot"])
        .arg(sample())
        .output()
    {
        Ok(go) if go.status.success() => {
            assert_eq!(
                dot,
                String::from_utf8_lossy(&go.stdout),
                "differs from go tool pprof"
            );
        }
        _ => crate::support::skip_unless_ci(
            "go not installed: DOT not compared with go tool pprof -dot",
        ),
    }
    let json: serde_json::Value = serde_json::from_str(&ok(&tickscope()
        .args(["graph", "--json"])
        .arg(sample())
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(json["nodes"].as_array().unwrap().len(), 14);
    assert_eq!(json["edges"][0]["from"], "main.main");
    assert_eq!(json["edges"][0]["to"], "main.busyLoop");

    if !has_dot() {
        crate::support::skip_unless_ci("Graphviz `dot` not installed: SVG rendering not checked");
        return;
    }
    let d = dir("graph");
    let svg = d.join("g.svg");
    ok(&tickscope()
        .arg("graph")
        .arg(sample())
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap());
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("busyLoop"), "{svg}");
    let _ = std::fs::remove_dir_all(&d);
}

/// Without Graphviz, rendering fails with a message saying how to install it (status 2).
#[test]
fn graph_without_graphviz_says_how_to_install_it() {
    let d = dir("nodot");
    let out = tickscope()
        .arg("graph")
        .arg(sample())
        .arg("-o")
        .arg(d.join("g.svg"))
        .env("PATH", &d)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "Graphviz `dot` is not installed: install it with `sudo apt install graphviz`"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("-o x.dot"), "{stderr}");
    // The temporary file Graphviz would have written is gone.
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(&d);
}

/// A profile against itself: pprof's header, nothing changed.
#[test]
fn diff_against_itself_has_zero_deltas() {
    let text = ok(&tickscope()
        .arg("diff")
        .arg(sample())
        .arg(sample())
        .output()
        .unwrap());
    // `go tool pprof -top -diff_base sample.cpu.pb.gz sample.cpu.pb.gz` prints the same.
    assert_eq!(
        text,
        "File: sample.bin\nType: cpu\nTime: Sep 29, 2017 at 8:57pm (UTC)\n\
         Duration: 4s, Total samples = 1.76s (43.96%)\n\
         Showing nodes accounting for 0, 0% of 1.76s total\n      \
         flat  flat%   sum%        cum   cum%\n"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&tickscope()
        .args(["diff", "--json"])
        .arg(sample())
        .arg(sample())
        .output()
        .unwrap()))
    .unwrap();
    assert_eq!(json["view"], "diff");
    assert_eq!(json["total"], 1_760_000_000i64);
    assert!(json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["flat"] == 0 && r["cum"] == 0));
}

#[test]
fn diff_writes_a_differential_flame_graph() {
    let d = dir("diff");
    let svg = d.join("diff.svg");
    ok(&tickscope()
        .arg("diff")
        .arg(sample())
        .arg(sample())
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap());
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("<svg") && svg.contains("busyLoop"));
    let _ = std::fs::remove_dir_all(&d);
}

/// An output that is one of the inputs (by any name: a hard link, a symlink) is refused
/// before anything is written: one line naming both, status 2, the input unchanged.
#[test]
fn an_output_that_is_an_input_is_refused() {
    let d = dir("same");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    // Folded stacks: a profile whatever its name.
    let stacks = "main;work 10\nmain;idle 5\n";
    let (base, new) = (d.join("base.dot"), d.join("new.folded"));
    std::fs::write(&base, stacks).unwrap();
    std::fs::write(&new, stacks).unwrap();
    std::fs::hard_link(&new, d.join("hard.svg")).unwrap();
    std::os::unix::fs::symlink(&base, d.join("soft.dot")).unwrap();
    let (hard, soft) = (d.join("hard.svg"), d.join("soft.dot"));
    let runs: Vec<(Vec<&Path>, &Path, &Path)> = vec![
        (vec![Path::new("flamegraph"), &new], &new, &new),
        (vec![Path::new("flamegraph"), &new], &hard, &new),
        (vec![Path::new("graph"), &base], &base, &base),
        (vec![Path::new("graph"), &base], &soft, &base),
        (vec![Path::new("diff"), &base, &new], &base, &base),
        (vec![Path::new("diff"), &base, &new], &hard, &new),
    ];
    for (args, output, input) in runs {
        let out = tickscope()
            .args(&args)
            .arg("-o")
            .arg(output)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr,
            format!(
                "tickscope: error: refusing to write {}: it is the same file as the input {}\n",
                output.display(),
                input.display()
            ),
            "{args:?}"
        );
        for f in [&base, &new] {
            assert_eq!(std::fs::read_to_string(f).unwrap(), stacks, "{args:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A file that is not a profile is status 2, and the message names it.
#[test]
fn bad_files_are_status_2_naming_the_file() {
    let d = dir("bad");
    let bad = d.join("not-a-profile.pb.gz");
    std::fs::write(&bad, [0x1f, 0x8b, 0, 1, 2, 3]).unwrap();
    let missing = d.join("missing.pb.gz");
    let runs: Vec<(Vec<std::ffi::OsString>, &PathBuf)> = vec![
        (vec!["list".into(), "main".into(), bad.clone().into()], &bad),
        (vec!["graph".into(), missing.clone().into()], &missing),
        (
            vec!["diff".into(), bad.clone().into(), sample().into()],
            &bad,
        ),
        (
            vec!["diff".into(), sample().into(), missing.clone().into()],
            &missing,
        ),
    ];
    for (args, file) in runs {
        let out = tickscope().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&file.display().to_string()),
            "{args:?}: {stderr}"
        );
        // The OS error once, not as the message and again as its cause.
        assert!(
            stderr.matches("os error").count() <= 1,
            "{args:?}: {stderr}"
        );
    }
    // Profiles of different kinds cannot be compared: both are named.
    let heap = testdata().join("go.nomappings.crash.pb.gz");
    let out = tickscope()
        .arg("diff")
        .arg(&heap)
        .arg(sample())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot compare {} with {}: incompatible sample types",
            heap.display(),
            sample().display()
        )),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// A regex that matches no function is status 1, as grep's.
#[test]
fn list_without_a_match_is_status_1() {
    let out = tickscope()
        .args(["list", "no_such_function"])
        .arg(sample())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("no matches found for regexp: no_such_function"),
        "{stderr}"
    );
}
