//! `tickscope top` against `go tool pprof -top` on the same large profile, side by side in one
//! run, printed as a ratio:
//!
//! ```text
//! cargo bench -p tickscope-cli --bench top
//! ```
//!
//! - **speed**: the release `tickscope top` binary and `go tool pprof -top`, end to end (process
//!   start, reading, decompressing, parsing, the graph, printing), on
//!   tests/data/pprof/large.cpu.pb.gz (20430 samples, ~23k functions). Rounds are
//!   interleaved; the median of each is compared. Target ≥ 5x faster.
//! - **memory**: peak heap of the same work in this process (load, prepare, render `top`),
//!   against the profile's decompressed size. Target ≤ 3x.
//!
//! Both outputs' rows are also compared, so the speed is never bought with a different answer.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use tickscope_profile::views::{top_text, Options, Report, View};

#[path = "common/counting.rs"]
mod counting;
use counting::{LIVE, PEAK};

const ROUNDS: usize = 7;

fn main() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/pprof/large.cpu.pb.gz");
    let file = file
        .canonicalize()
        .expect("tests/data/pprof/large.cpu.pb.gz not found");
    let ours = PathBuf::from(env!("CARGO_BIN_EXE_tickscope"));
    let go_ok = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !go_ok {
        eprintln!("`go` not found: install Go (Debian: apt-get install golang-go) to compare");
        std::process::exit(1);
    }
    let run_ours = || run(Command::new(&ours).arg("top").arg(&file));
    let run_go = || {
        run(Command::new("go")
            .args(["tool", "pprof", "-top"])
            .arg(&file))
    };
    // Warm-up (page cache, Go's build cache for `go tool`), and the answers compared.
    let (a, b) = (run_ours().1, run_go().1);
    let rows = |t: &str| -> Vec<String> {
        t.lines()
            .skip_while(|l| !l.trim_start().starts_with("flat  flat%"))
            .map(|l| l.trim_end().to_string())
            .collect()
    };
    assert_eq!(
        rows(&a),
        rows(&b),
        "tickscope top and go tool pprof -top differ"
    );
    let (mut t_ours, mut t_go) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        t_ours.push(run_ours().0);
        t_go.push(run_go().0);
    }
    let (m_ours, m_go) = (median(&mut t_ours), median(&mut t_go));
    println!(
        "top on {} ({} rows), median of {ROUNDS} interleaved rounds:",
        file.display(),
        rows(&a).len().saturating_sub(1)
    );
    println!(
        "  tickscope top        {:8.1} ms",
        m_ours.as_secs_f64() * 1e3
    );
    println!("  go tool pprof -top   {:8.1} ms", m_go.as_secs_f64() * 1e3);
    println!(
        "  speed-up             {:8.2}x   (target >= 5)",
        m_go.as_secs_f64() / m_ours.as_secs_f64()
    );

    let mut raw = Vec::new();
    flate2::read::MultiGzDecoder::new(std::fs::File::open(&file).unwrap())
        .read_to_end(&mut raw)
        .unwrap();
    let decompressed = raw.len();
    drop(raw);
    let base = LIVE.load(Relaxed);
    PEAK.store(base, Relaxed);
    let profile = tickscope_profile::load(&file).unwrap();
    let mut report = Report::new(profile, View::Top, &Options::default()).unwrap();
    let text = top_text(&mut report, None);
    let peak = PEAK.load(Relaxed) - base;
    assert!(text.contains("time.Now"));
    println!(
        "  peak heap            {:8.1} MB = {:.2}x the decompressed profile ({:.1} MB; target <= 3)",
        peak as f64 / 1e6,
        peak as f64 / decompressed as f64,
        decompressed as f64 / 1e6
    );
}

fn run(cmd: &mut Command) -> (Duration, String) {
    let start = Instant::now();
    let out = cmd.output().unwrap();
    let took = start.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (took, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}
