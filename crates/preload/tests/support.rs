//! What the preload tests and the CLI's `record` tests share (the CLI's tests include this
//! file by path): building libtickscope.so, and the C workload with a known CPU split.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `cargo test` builds no cdylib or staticlib (no test links an rlib of the preload crate),
/// so the tests build libtickscope.so and .a themselves, once, into `target_dir` (the
/// `target/<profile>` directory the test binary runs from).
pub fn build_library(target_dir: &Path) {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let mut c = Command::new(env!("CARGO"));
        c.args(["build", "--quiet", "-p", "tickscope-preload"]);
        if target_dir.file_name().is_some_and(|n| n == "release") {
            c.arg("--release");
        }
        let out = c.output().expect("cannot run cargo");
        assert!(
            out.status.success(),
            "cargo build -p tickscope-preload failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

/// `tests/c/workload.c` (work_a 40%, work_b 25%, work_c 20%, work_d 10%, work_e 5% of its
/// CPU time, over three threads), built -O2 with or without frame pointers into `exe`.
pub fn build_workload(exe: &Path, frame_pointers: bool) {
    // Both crates using this file sit in crates/.
    let src: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../preload/tests/c/workload.c");
    let flag = match frame_pointers {
        true => "-fno-omit-frame-pointer",
        false => "-fomit-frame-pointer",
    };
    let out = Command::new("gcc")
        .args(["-O2", flag, "-pthread"])
        .arg(&src)
        .arg("-o")
        .arg(exe)
        .output()
        .expect("gcc not found: install gcc (.ci/run does)");
    assert!(
        out.status.success(),
        "gcc {} failed:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}
