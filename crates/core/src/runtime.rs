//! The process lifecycle: first-use initialisation, the exit hook, and applying settings.
//!
//! Nothing needs a setup call: the first scope a thread registers, the first call site, or a
//! capture's start calls [`ensure_init`], which reads the environment once, registers the exit
//! summary with `atexit`, starts the interval reporter if one is configured, and starts the
//! capture `TICKSCOPE_CAPTURE` names.
//!
//! **The one upward edge.** This module uses the others (config, report, capture, the
//! switches); the scopes' registry, call sites and the capture's start call back up into
//! [`ensure_init`], as tracing-core's call sites call its dispatcher. No other module of the
//! crate calls into this one, but the public API's implementation (`imp`).

use std::sync::{Once, OnceLock};

use crate::config::{self, Config, Settings};

static INIT: Once = Once::new();
/// The process that registered the exit summary (a fork child inherits the hook).
static INIT_PID: OnceLock<u32> = OnceLock::new();

/// First-use initialisation: read the environment, register the exit summary, start the
/// interval reporter if one is configured. Cheap after the first call (one atomic load).
pub(crate) fn ensure_init() {
    INIT.call_once(|| {
        crate::sys::clock::first_use_ns();
        #[cfg(feature = "sampler")]
        crate::sampler_library::install();
        let _ = INIT_PID.set(std::process::id());
        let mut s = Settings::default();
        let env = config::env();
        env.apply(&mut s);
        *config::lock() = Some(s.clone());
        if let Some(on) = env.enabled {
            crate::state::set_enabled(on);
        }
        if !crate::sys::process::at_exit(on_process_exit) {
            crate::sys::stderr::warn(
                "could not register the exit summary with atexit; call tickscope::report()",
            );
        }
        crate::summary::interval::configure(s.interval, s.line_output);
        // `tickscope::alloc::Profiled` is the global allocator when an allocation went
        // through it (this one, at least): scopes count theirs from now on, unless
        // `TICKSCOPE_SCOPE_ALLOCS=0`.
        #[cfg(feature = "sampler")]
        {
            std::hint::black_box(Box::new(0u8));
            if tickscope_sampler::heap::installed() && env.scope_allocs != Some(false) {
                crate::state::set_allocs();
            }
        }
        #[cfg(feature = "capture")]
        start_capture_from_env();
        #[cfg(feature = "http")]
        crate::http::serve_from_env();
        #[cfg(feature = "push")]
        crate::push::push_from_env();
    });
}

/// The settings now, initialising from the environment on first use.
pub(crate) fn settings() -> Settings {
    ensure_init();
    config::current()
}

/// `TICKSCOPE_CAPTURE` (with `TICKSCOPE_CAPTURE_FULL` and `TICKSCOPE_CAPTURE_MEMORY`): a
/// capture started at first use.
#[cfg(feature = "capture")]
fn start_capture_from_env() {
    let get = crate::sys::env::env_var;
    let sink = config::value(
        &get,
        config::var::CAPTURE,
        crate::capture::Sink::parse,
        "a file path, tcp://HOST:PORT or flight:DURATION[:PATH]",
    );
    let full = config::value(
        &get,
        config::var::CAPTURE_FULL,
        |v| match v {
            "drop" => Some(crate::capture::Full::Drop),
            "block" => Some(crate::capture::Full::Block),
            _ => None,
        },
        "drop or block",
    );
    let memory = config::value(
        &get,
        config::var::CAPTURE_MEMORY,
        config::parse_size,
        "a size: bytes, or with a K, M or G suffix (powers of 1024)",
    );
    if let Some(sink) = sink {
        crate::capture::start_from_env(sink, full, memory);
    }
}

/// Registered with `atexit` on first use: prints the exit summary once. Catches every panic
/// (nothing may unwind into libc).
extern "C" fn on_process_exit() {
    let _ = std::panic::catch_unwind(|| {
        // A forked child inherits the handler and its parent's figures: the summary is the
        // parent's to print.
        if INIT_PID.get().is_some_and(|&pid| pid != std::process::id()) {
            return;
        }
        // The last window pushed first: what it drops is in the summary.
        #[cfg(feature = "push")]
        crate::push::at_exit();
        crate::summary::exit_summary(&config::current());
        #[cfg(feature = "http")]
        crate::http::at_exit();
    });
}

impl Config {
    /// Applies the settings (then the environment, which wins).
    pub fn install(self) {
        if !crate::COMPILED_IN {
            return;
        }
        ensure_init();
        let s = {
            let mut g = config::lock();
            let s = g.get_or_insert_with(Settings::default);
            if let Some(v) = self.interval {
                s.interval = v;
            }
            if let Some(v) = self.summary {
                s.summary = v;
            }
            if let Some(v) = self.summary_output {
                s.summary_output = v;
            }
            if let Some(v) = self.line_output {
                s.line_output = v;
            }
            if let Some(v) = self.per_thread {
                s.per_thread = v;
            }
            config::env().apply(s);
            s.clone()
        };
        crate::summary::interval::configure(s.interval, s.line_output);
    }
}
