//! What the profile views (`top`, `peek`, `tree`, `list`, `graph`, `flamegraph`, `diff`) share:
//! the file argument, pprof's options and filters, loading with a progress line, and output.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use tickscope_profile::filter::FilterSpec;
use tickscope_profile::views::{Granularity, Options, Report, Sort, View};
use tickscope_profile::{self as profile, Profile};

/// Options every profile view takes (pprof's names, with `--` instead of `-`).
#[derive(clap::Args, Clone)]
pub struct Common {
    /// The profile: pprof protobuf (gzip or raw), gperftools CPU or heap, a legacy text
    /// profile, or folded stacks. The format is found from the content. Several profiles of
    /// the same kind (the processes of one `record`, say) are merged into one, as `go tool
    /// pprof` merges the files it is given.
    #[arg(value_name = "FILE", required = true, num_args = 1..)]
    pub inputs: Vec<PathBuf>,
    /// Which sample value to show: an index or a type name (`cpu`, `alloc_space`, ...).
    #[arg(long, value_name = "INDEX|TYPE")]
    pub sample_index: Option<String>,
    /// Output unit: `minimum` (default), `auto`, or a unit such as `ms`, `s`, `kB`, `MB`.
    #[arg(long, default_value = "minimum")]
    pub unit: String,
    /// One node per function (the default).
    #[arg(long, group = "granularity")]
    pub functions: bool,
    /// One node per source file.
    #[arg(long, group = "granularity")]
    pub files: bool,
    /// One node per source line.
    #[arg(long, group = "granularity")]
    pub lines: bool,
    /// One node per instruction address.
    #[arg(long, group = "granularity")]
    pub addresses: bool,
    /// Attribute inlined functions to their callers.
    #[arg(long)]
    pub noinlines: bool,
    /// Show at most this many nodes.
    #[arg(long, value_name = "N")]
    pub nodecount: Option<usize>,
    /// Hide nodes below this fraction of the total (default 0.005).
    #[arg(long, value_name = "F")]
    pub nodefraction: Option<f64>,
    /// Hide edges below this fraction of the total (default 0.001).
    #[arg(long, value_name = "F")]
    pub edgefraction: Option<f64>,
    /// Only samples with a frame matching this regex.
    #[arg(long, value_name = "REGEX")]
    pub focus: Option<String>,
    /// Drop samples with a frame matching this regex.
    #[arg(long, value_name = "REGEX")]
    pub ignore: Option<String>,
    /// Remove frames matching this regex (their time goes to the caller).
    #[arg(long, value_name = "REGEX")]
    pub hide: Option<String>,
    /// Keep only frames matching this regex.
    #[arg(long, value_name = "REGEX")]
    pub show: Option<String>,
    /// Drop frames above the first one matching this regex.
    #[arg(long, value_name = "REGEX")]
    pub show_from: Option<String>,
    /// Only samples with matching tags: `key=value`, `key=LOW:HIGH` (numeric, with units).
    #[arg(long, value_name = "TAGS")]
    pub tagfocus: Option<String>,
    /// Drop samples with matching tags.
    #[arg(long, value_name = "TAGS")]
    pub tagignore: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Source path prefixes to remove (`:`-separated).
    #[arg(long, value_name = "PATHS")]
    pub trim_path: Option<String>,
    /// Directories to search for sources (`:`-separated).
    #[arg(long, value_name = "DIRS")]
    pub source_path: Option<String>,
    /// Read a gzip-compressed profile that decompresses to up to SIZE bytes (`K`, `M`, `G`
    /// suffixes), whatever its compression ratio. By default one may decompress to 100 times
    /// its size (at least 64 MiB) and at most 4 GiB: more is a gzip bomb, not a profile.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_decompressed: Option<u64>,
}

/// `4096`, `64K`, `512M`, `8G` (powers of 1024).
fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'K' | 'k')) => (&t[..i], 10),
        Some((i, 'M' | 'm')) => (&t[..i], 20),
        Some((i, 'G' | 'g')) => (&t[..i], 30),
        _ => (t, 0),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{s:?} is not a size (bytes, or with a K, M or G suffix)"))
}

impl Common {
    /// The analysis options these flags give (`sort` from the view's own flag).
    pub fn options(&self, sort: Sort) -> Options {
        let granularity = if self.files {
            Granularity::Files
        } else if self.lines {
            Granularity::Lines
        } else if self.addresses {
            Granularity::Addresses
        } else {
            Granularity::Functions
        };
        Options {
            sample_index: self.sample_index.clone(),
            granularity,
            inlines: !self.noinlines,
            node_count: self.nodecount,
            node_fraction: self.nodefraction,
            edge_fraction: self.edgefraction,
            sort,
            unit: self.unit.clone(),
            filters: FilterSpec {
                focus: self.focus.clone(),
                ignore: self.ignore.clone(),
                hide: self.hide.clone(),
                show: self.show.clone(),
                show_from: self.show_from.clone(),
                tagfocus: self.tagfocus.clone(),
                tagignore: self.tagignore.clone(),
            },
            trim_path: self.trim_path.clone().unwrap_or_default(),
            source_path: self.source_path.clone().unwrap_or_default(),
        }
    }

    /// How much the profile may decompress to.
    pub fn limits(&self) -> profile::Limits {
        profile::Limits {
            max_decompressed: self.max_decompressed,
        }
    }

    /// Loads the files (merged into one profile when there are several) and prepares them
    /// for `view`.
    pub fn report(&self, view: View, sort: Sort) -> Result<Report> {
        let profile = load_all(&self.inputs, self.limits())?;
        prepare(profile, &self.name(), view, &self.options(sort))
    }

    /// The input files, as `out::refuse_inputs` takes them.
    pub fn input_paths(&self) -> Vec<&Path> {
        self.inputs.iter().map(PathBuf::as_path).collect()
    }

    /// The files as errors name them: the file, or the first and how many more.
    pub fn name(&self) -> String {
        files_name(&self.inputs)
    }
}

/// `files` as errors name them: the file, or the first and how many more.
pub fn files_name(files: &[PathBuf]) -> String {
    match files {
        [one] => one.display().to_string(),
        [first, rest @ ..] => format!("{} (and {} more)", first.display(), rest.len()),
        [] => String::new(),
    }
}

/// Loads `files` and merges them into one profile when there are several.
pub fn load_all(files: &[PathBuf], limits: profile::Limits) -> Result<Profile> {
    let mut profiles = Vec::with_capacity(files.len());
    for f in files {
        profiles.push(load(f, limits)?);
    }
    if profiles.len() == 1 {
        return Ok(profiles.pop().expect("one"));
    }
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    tickscope_profile::views::merge(profiles, &names).map_err(|e| anyhow::anyhow!("{e}"))
}

/// Prepares a loaded profile (`name`: its file or files, for errors); warnings go to stderr.
pub fn prepare(profile: Profile, name: &str, view: View, options: &Options) -> Result<Report> {
    let report = Report::new(profile, view, options).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    for w in &report.warnings {
        say!("tickscope: warning: {w}");
    }
    Ok(report)
}

/// Loads a profile, with a progress line on stderr when loading takes over half a second and
/// stderr is a terminal.
pub fn load(path: &Path, limits: profile::Limits) -> Result<Profile> {
    let progress = std::io::stderr()
        .is_terminal()
        .then(|| Progress::start(path));
    let result = profile::load_with(path, limits);
    if let Some(p) = progress {
        p.finish();
    }
    let mut profile = result.map_err(not_a_capture)?;
    // Addresses without names are named from the binaries when they are on this machine
    // (as pprof's local symbolisation); otherwise they show as `[binary]` or addresses.
    if profile
        .locations
        .iter()
        .any(|l| profile.lines(l).is_empty())
    {
        for w in profile::symbolize::symbolize(&mut profile) {
            say!("tickscope: note: {w}");
        }
    }
    Ok(profile)
}

/// A timeline capture given to a profile command is said as such, rather than "not a
/// profile": the one place that tells the two kinds of file apart (the profile and timeline
/// crates know nothing of each other). Judged from the bytes the reader saw, so a pipe is
/// read once.
pub fn not_a_capture(e: profile::Error) -> anyhow::Error {
    match e.kind() {
        profile::ErrorKind::Unrecognized { head }
            if head.starts_with(&tickscope_timeline::tscap::MAGIC) =>
        {
            anyhow::anyhow!(
                "{}: a tickscope timeline capture, not a profile: read it with `tickscope report`, \
                 or make one with `tickscope convert --to folded`",
                e.path()
            )
        }
        _ => e.into(),
    }
}

/// A spinner line with elapsed time, drawn by a thread after half a second.
struct Progress {
    done: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Progress {
    fn start(path: &Path) -> Progress {
        let (done, rx) = std::sync::mpsc::channel::<()>();
        let name = path.display().to_string();
        let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let thread = std::thread::spawn(move || {
            let start = Instant::now();
            if rx.recv_timeout(Duration::from_millis(500)).is_ok() {
                return;
            }
            let frames = ['|', '/', '-', '\\'];
            let mut i = 0;
            loop {
                say_part!(
                    "\r{} loading {name} ({:.1} MB) … {:.1}s ",
                    frames[i % 4],
                    size as f64 / 1e6,
                    start.elapsed().as_secs_f64()
                );
                i += 1;
                if rx.recv_timeout(Duration::from_millis(100)).is_ok() {
                    say_part!("\r\x1b[2K");
                    return;
                }
            }
        });
        Progress { done, thread }
    }

    fn finish(self) {
        let _ = self.done.send(());
        let _ = self.thread.join();
    }
}

/// Width names may take on a terminal (`COLUMNS`, else 120); `None` when stdout is not a
/// terminal (plain text, names never cut).
pub fn name_width(used: usize) -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let cols = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(120);
    Some(cols.saturating_sub(used).max(20))
}

/// Prints JSON (pretty) to stdout.
pub fn print_json(v: &serde_json::Value) -> Result<()> {
    let mut s = serde_json::to_string_pretty(v)?;
    s.push('\n');
    super::print(s.as_bytes())
}

/// Asked-for data is absent (no node matches a regex): exit status 1, not 2.
#[derive(Debug)]
pub struct NotFound(pub String);

impl std::fmt::Display for NotFound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotFound {}

/// Compiles a regex argument, naming it in the error.
pub fn regex(what: &str, rx: &str) -> Result<regex::Regex> {
    regex::Regex::new(rx).map_err(|e| anyhow::anyhow!("{what}: bad regular expression {rx:?}: {e}"))
}
