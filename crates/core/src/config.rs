//! Configuration, as data: defaults, the [`Config`] builder, and parsing the `TICKSCOPE_*`
//! environment variables. Applying settings (first use, `Config::install`) is
//! [`crate::runtime`]'s.
//!
//! Nothing needs configuring: the first scope a program enters reads the environment, registers
//! the exit summary with `atexit` and, if asked, starts the interval reporter. [`Config`]
//! changes the settings from code at any time. The environment is applied last and wins, so a
//! deployed program can be re-tuned without a rebuild.
//!
//! | variable | values | default |
//! |---|---|---|
//! | `TICKSCOPE_INTERVAL` | a duration (`1s`, `250ms`, `1.5s`, `2m`; 10 ms at least) or `off` | `off` |
//! | `TICKSCOPE_SUMMARY` | `off`, `text`, `json`, each optionally `:PATH` | `text` (stderr) |
//! | `TICKSCOPE_PER_THREAD` | `0`/`1` (also `false`/`true`, `off`/`on`) | `0` |
//! | `TICKSCOPE_ENABLED` | `0`/`1` | `1` |
//! | `TICKSCOPE_CLOCK` | `auto`, `tsc` (or `cntvct`), `monotonic` | `auto` |
//!
//! A malformed value prints one warning naming the variable and what it expects, and the
//! default is used.
//!
//! In a setuid or setgid program (or one with file capabilities: the kernel's `AT_SECURE`,
//! which glibc's `secure_getenv` checks), every `TICKSCOPE_*` variable is ignored, with one
//! warning saying why: they name files to write and sockets to open, and the user who sets
//! them must not do that with the program's privileges. [`Config`] from code still applies.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use crate::sys::env::env_var;
use crate::sys::stderr::warn_malformed;

/// The names of the settings in the table above, as the library reads them.
pub(crate) mod var {
    pub const INTERVAL: &str = "TICKSCOPE_INTERVAL";
    pub const SUMMARY: &str = "TICKSCOPE_SUMMARY";
    pub const PER_THREAD: &str = "TICKSCOPE_PER_THREAD";
    pub const ENABLED: &str = "TICKSCOPE_ENABLED";
    pub const CLOCK: &str = "TICKSCOPE_CLOCK";
    #[cfg(feature = "sampler")]
    pub const SCOPE_ALLOCS: &str = "TICKSCOPE_SCOPE_ALLOCS";
    #[cfg(feature = "capture")]
    pub const CAPTURE: &str = "TICKSCOPE_CAPTURE";
    #[cfg(feature = "capture")]
    pub const CAPTURE_FULL: &str = "TICKSCOPE_CAPTURE_FULL";
    #[cfg(feature = "capture")]
    pub const CAPTURE_MEMORY: &str = "TICKSCOPE_CAPTURE_MEMORY";
}
use std::time::Duration;

/// Where report text goes.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Output {
    /// Standard error (the default).
    #[default]
    Stderr,
    /// A file, created (truncated) when the summary is written. Interval lines sent to a file
    /// are appended.
    File(PathBuf),
    /// A function receiving each line (interval reports) or the whole text (summaries).
    Callback(Arc<dyn Fn(&str) + Send + Sync>),
    /// The `log` crate, at `info` level, target `tickscope` (feature `log`).
    #[cfg(feature = "log")]
    Log,
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Output::Stderr => f.write_str("Stderr"),
            Output::File(p) => f.debug_tuple("File").field(p).finish(),
            Output::Callback(_) => f.write_str("Callback(..)"),
            #[cfg(feature = "log")]
            Output::Log => f.write_str("Log"),
        }
    }
}

/// The exit summary's format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SummaryFormat {
    /// No summary at exit.
    Off,
    /// A table for people (the default).
    #[default]
    Text,
    /// One JSON document for scripts.
    Json,
}

/// The settings in force.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub interval: Option<Duration>,
    pub summary: SummaryFormat,
    pub summary_output: Output,
    pub line_output: Output,
    pub per_thread: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            interval: None,
            summary: SummaryFormat::Text,
            summary_output: Output::Stderr,
            line_output: Output::Stderr,
            per_thread: false,
        }
    }
}

static SETTINGS: Mutex<Option<Settings>> = Mutex::new(None);

/// The settings now, as last set (the defaults before first use: see
/// [`crate::runtime::settings`], which initialises first).
pub(crate) fn current() -> Settings {
    lock().clone().unwrap_or_default()
}

/// The settings store.
pub(crate) fn lock() -> std::sync::MutexGuard<'static, Option<Settings>> {
    SETTINGS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The well-formed `TICKSCOPE_*` values, read once (malformed ones warned about then).
#[derive(Debug, Default)]
pub(crate) struct Env {
    interval: Option<Option<Duration>>,
    summary: Option<(SummaryFormat, Option<PathBuf>)>,
    per_thread: Option<bool>,
    pub enabled: Option<bool>,
    /// `TICKSCOPE_SCOPE_ALLOCS`: scopes count allocations where `alloc::Profiled` is the
    /// global allocator (on unless `0`).
    #[cfg(feature = "sampler")]
    pub scope_allocs: Option<bool>,
}

/// The process's environment overrides.
pub(crate) fn env() -> &'static Env {
    static ENV: OnceLock<Env> = OnceLock::new();
    ENV.get_or_init(|| Env::read(env_var))
}

/// Parses variable `var` with `parse`, warning once if it is set but malformed.
pub(crate) fn value<T>(
    get: &impl Fn(&str) -> Option<String>,
    var: &str,
    parse: impl Fn(&str) -> Option<T>,
    expected: &str,
) -> Option<T> {
    let v = get(var)?;
    let parsed = parse(&v);
    if parsed.is_none() {
        warn_malformed(var, &v, expected);
    }
    parsed
}

impl Env {
    fn read(get: impl Fn(&str) -> Option<String>) -> Env {
        Env {
            interval: value(
                &get,
                var::INTERVAL,
                parse_interval,
                "a duration such as 1s, 500ms, 1.5s or 2m, or off",
            ),
            summary: value(
                &get,
                var::SUMMARY,
                parse_summary,
                "off, text or json, optionally :PATH",
            ),
            per_thread: value(&get, var::PER_THREAD, parse_bool, "0 or 1"),
            enabled: value(&get, var::ENABLED, parse_bool, "0 or 1"),
            #[cfg(feature = "sampler")]
            scope_allocs: value(&get, var::SCOPE_ALLOCS, parse_bool, "0 or 1"),
        }
    }

    /// Applies the overrides to `s`.
    pub(crate) fn apply(&self, s: &mut Settings) {
        if let Some(i) = self.interval {
            s.interval = i;
        }
        if let Some((format, path)) = &self.summary {
            s.summary = *format;
            if let Some(p) = path {
                s.summary_output = Output::File(p.clone());
            }
        }
        if let Some(b) = self.per_thread {
            s.per_thread = b;
        }
    }
}

/// Parses an interval as `TICKSCOPE_INTERVAL` takes it: `off` (or `0`) → `Some(None)`; a
/// duration with a unit (`1s`, `250ms`, `1.5s`, `2m`, `500us`) → `Some(Some(d))`; anything
/// else → `None`.
pub fn parse_interval(v: &str) -> Option<Option<Duration>> {
    let v = v.trim();
    if v.eq_ignore_ascii_case("off") || v == "0" {
        return Some(None);
    }
    parse_duration(v).map(Some)
}

/// Parses a size: `4096`, `64K`, `256M`, `1G` (also `KiB`/`MiB`/`GiB`; powers of 1024).
#[cfg(feature = "capture")]
pub(crate) fn parse_size(v: &str) -> Option<u64> {
    let t = v.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    num.parse::<u64>()
        .ok()?
        .checked_mul(1 << shift)
        .filter(|&n| n > 0)
}

/// Parses `1s`, `250ms`, `1.5s`, `2m`, `500us`/`500µs`, `100ns`. A unit is required.
pub(crate) fn parse_duration(v: &str) -> Option<Duration> {
    let split = v.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = v.split_at(split);
    let n: f64 = num.parse().ok()?;
    let secs = match unit.trim() {
        "ns" => n / 1e9,
        "us" | "µs" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return None,
    };
    if !secs.is_finite() || secs <= 0.0 || secs > 1e9 {
        return None;
    }
    Some(Duration::from_secs_f64(secs))
}

fn parse_summary(v: &str) -> Option<(SummaryFormat, Option<PathBuf>)> {
    let (kind, path) = match v.split_once(':') {
        Some((k, p)) if !p.is_empty() => (k, Some(PathBuf::from(p))),
        Some(_) => return None,
        None => (v, None),
    };
    let format = match kind.trim() {
        "off" | "0" => SummaryFormat::Off,
        "text" => SummaryFormat::Text,
        "json" => SummaryFormat::Json,
        _ => return None,
    };
    Some((format, path))
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.trim() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

/// Changes tickscope's settings from code ([`Config::install`]). Unset options keep their
/// current value; the `TICKSCOPE_*` variables are applied on top and win.
///
/// ```no_run
/// use std::time::Duration;
/// tickscope::Config::new()
///     .interval(Some(Duration::from_secs(1)))
///     .summary(tickscope::SummaryFormat::Json)
///     .summary_output(tickscope::Output::File("profile.json".into()))
///     .install();
/// ```
#[derive(Clone, Debug, Default)]
#[must_use = "a Config does nothing until install() is called"]
pub struct Config {
    pub(crate) interval: Option<Option<Duration>>,
    pub(crate) summary: Option<SummaryFormat>,
    pub(crate) summary_output: Option<Output>,
    pub(crate) line_output: Option<Output>,
    pub(crate) per_thread: Option<bool>,
}

impl Config {
    /// A builder that changes nothing yet.
    pub fn new() -> Config {
        Config::default()
    }

    /// Print a line per thread and active scope every `interval` (`None`: off); 10 ms at
    /// least (a shorter one is raised to that, with a warning).
    pub fn interval(mut self, interval: Option<Duration>) -> Config {
        self.interval = Some(interval);
        self
    }

    /// The exit summary's format.
    pub fn summary(mut self, format: SummaryFormat) -> Config {
        self.summary = Some(format);
        self
    }

    /// Where the summary (exit and [`report`](crate::report())) goes.
    pub fn summary_output(mut self, output: Output) -> Config {
        self.summary_output = Some(output);
        self
    }

    /// Where interval lines go.
    pub fn line_output(mut self, output: Output) -> Config {
        self.line_output = Some(output);
        self
    }

    /// Both outputs at once.
    pub fn output(self, output: Output) -> Config {
        self.summary_output(output.clone()).line_output(output)
    }

    /// Add a per-thread breakdown to the summary.
    pub fn per_thread(mut self, on: bool) -> Config {
        self.per_thread = Some(on);
        self
    }

    // `install`, which applies them, is in `runtime.rs`: the settings are data here.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_only() {
        let ok = [
            ("1s", 1_000_000_000),
            ("250ms", 250_000_000),
            ("1.5s", 1_500_000_000),
            ("2m", 120_000_000_000),
            ("500us", 500_000),
            ("10µs", 10_000),
        ];
        for (s, ns) in ok {
            assert_eq!(parse_duration(s), Some(Duration::from_nanos(ns)), "{s}");
        }
        for bad in ["", "1", "s", "1 parsec", "-1s", "1e400s", "abc", "0s"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
        assert_eq!(parse_interval("off"), Some(None));
        assert_eq!(parse_interval("1s"), Some(Some(Duration::from_secs(1))));
        assert_eq!(parse_interval("soon"), None);
    }

    #[test]
    fn summary_values_parse_format_and_optional_path() {
        assert_eq!(parse_summary("off"), Some((SummaryFormat::Off, None)));
        assert_eq!(parse_summary("text"), Some((SummaryFormat::Text, None)));
        assert_eq!(
            parse_summary("json:/tmp/x.json"),
            Some((SummaryFormat::Json, Some("/tmp/x.json".into())))
        );
        assert_eq!(parse_summary("json:"), None);
        assert_eq!(parse_summary("xml"), None);
    }

    #[test]
    fn malformed_variables_keep_the_defaults() {
        let mut s = Settings::default();
        let env = |k: &str| match k {
            "TICKSCOPE_INTERVAL" => Some("fast".to_string()),
            "TICKSCOPE_SUMMARY" => Some("json:out.json".to_string()),
            "TICKSCOPE_PER_THREAD" => Some("maybe".to_string()),
            _ => None,
        };
        let env = Env::read(env);
        assert_eq!(env.enabled, None);
        env.apply(&mut s);
        assert_eq!(s.interval, None, "malformed interval keeps the default");
        assert!(!s.per_thread, "malformed bool keeps the default");
        assert_eq!(
            s.summary,
            SummaryFormat::Json,
            "well-formed values still apply"
        );
        assert!(matches!(s.summary_output, Output::File(ref p) if p.as_os_str() == "out.json"));
    }
}
