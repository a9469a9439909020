//! The library from C and C++, and LD_PRELOAD on an unmodified program: each test builds a
//! program from `tests/c/` with the system's gcc/g++ against the `libtickscope.so` (or `.a`)
//! cargo built beside this test binary, runs it, and checks its output, its exit summary and
//! the profile it wrote (read back by the real `go tool pprof`).

mod capi;
mod heap;
mod preload;
pub mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// `target/<profile>/`, where cargo put libtickscope.so and libtickscope.a.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/tests-<hash>
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

pub fn lib(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    build_library();
    assert!(p.exists(), "{} is missing after the build", p.display());
    p
}

pub fn build_library() {
    support::build_library(&target_dir());
}

pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

pub fn c_source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

/// A fresh directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tickscope-preload-{}-{}-{test}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles with `compiler` and `args`; panics with the compiler's messages on failure.
pub fn compile<S: AsRef<std::ffi::OsStr>>(
    compiler: &str,
    args: &[&str],
    sources: &[PathBuf],
    out: &Path,
    extra: &[S],
) {
    let res = Command::new(compiler)
        .args(args)
        .arg("-I")
        .arg(include_dir())
        .args(sources)
        .arg("-o")
        .arg(out)
        .args(extra)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run {compiler} ({e}): install gcc and g++ (.ci/run does)")
        });
    assert!(
        res.status.success(),
        "{compiler} {args:?} failed:\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
}

pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Linker flags for libtickscope.so in the target directory, found again at run time.
pub fn shared_lib_flags() -> Vec<String> {
    build_library();
    let dir = target_dir().display().to_string();
    vec![
        "-L".into(),
        dir.clone(),
        "-ltickscope".into(),
        format!("-Wl,-rpath,{dir}"),
    ]
}

/// `go tool pprof -top` in milliseconds, nothing dropped: (flat ms, flat %, name).
pub fn pprof_rows(profile: &Path) -> Vec<(f64, f64, String)> {
    let out = Command::new("go")
        .args([
            "tool",
            "pprof",
            "-top",
            "-unit=ms",
            "-nodefraction=0",
            "-nodecount=1000",
        ])
        .arg(profile)
        .output()
        .expect("`go` not found: install Go (Debian: apt-get install golang-go; .ci/run does)");
    assert!(
        out.status.success(),
        "go tool pprof -top {} failed:\n{}",
        profile.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let ms = match *cols.first()? {
                "0" => 0.0,
                v => v.strip_suffix("ms")?.parse().ok()?,
            };
            let pct = cols.get(1)?.strip_suffix('%')?.parse().ok()?;
            Some((ms, pct, cols.get(5..)?.join(" ")))
        })
        .collect()
}
