//! tickscope: an in-process profiler for Rust — exact scope timings at a few nanoseconds each,
//! with no setup call.
//!
//! Put [`scope!`] (or [`#[profile]`](macro@profile)) in the code to measure. Each thread keeps
//! its own counters with no lock and no shared write; at process exit a table of every scope
//! appears on stderr by itself: calls, total, self, mean, min, p50, p99, max, share of wall
//! time and clock errors. [`Config`] or `TICKSCOPE_*` variables add per-thread interval lines
//! (`TID 0x1a2b time spent in "parse": 7/1001 ms 0.7% 6481x`), JSON, files and more.
//!
//! The clock is the CPU's counter, calibrated against `CLOCK_MONOTONIC` and guarded against
//! jumps ([`now`], [`Timer`]).
//!
//! ```
//! #[tickscope::profile]
//! fn parse(input: &str) -> usize {
//!     input.split(',').count()
//! }
//!
//! fn alloc_block() {
//!     tickscope::scope!(group = "alloc"); // every function of an API in one row
//! }
//!
//! fn main() {
//!     tickscope::scope!("main loop");
//!     for _ in 0..1000 {
//!         parse("a,b,c");
//!         alloc_block();
//!     }
//! } // the exit summary prints itself
//! ```
//!
//! # Main types
//! - [`scope!`] and [`#[profile]`](macro@profile): open a scope until the end of the block.
//! - [`Scope`]: the guard (`!Send`); [`set_enabled`] switches recording at run time.
//! - [`report`], [`report_string`]: a summary on demand; [`Config`] for settings.
//! - [`Timer`], [`now`], [`ticks_per_second`], [`system_time_ms`]: the clock.
//! - [`sampler::Sampler`]: the sampling CPU profiler; its samples carry the open scopes as
//!   pprof labels.
//! - [`alloc::Profiled`]: a global allocator that samples allocations into heap profiles.
//! - [`capture::Capture`]: the timeline (every scope begin and end, frame marks, counters,
//!   messages) to a file, a TCP listener or a flight recorder; also `TICKSCOPE_CAPTURE=FILE`.
//!   The same shape as the sampler: a builder whose `start()` returns a handle, whose
//!   `stop()` returns what was collected; dropping the handle stops it.
//!
//! # Semantics
//! - **total** is inclusive time; **self** excludes time in child scopes.
//! - A scope (or group) entered again while it is open on the same thread — recursion, or an
//!   API calling its own public function — counts the call, but its time is added once, at
//!   the outermost exit. `mean`, `min`, `max` and percentiles describe outermost calls.
//! - Percentiles come from a log-linear histogram: within 1% of the exact value.
//! - A thread that exits is folded into the totals; nothing it recorded is lost. Whatever
//!   cannot be recorded (nesting deeper than 4096, a scope opened during thread teardown) is
//!   counted and shown in the report.
//!
//! # Features
//! | feature | default | what it does |
//! |---|---|---|
//! | `enabled` | yes | Scopes record. Without it (`default-features = false`) the macros expand to nothing: zero cost. |
//! | `log` | no | `Output::Log` sends report lines to the `log` crate. |
//! | `sampler` | yes | [`sampler`]: the CPU profiler, pprof output, in-process symbolisation (crate `tickscope-sampler`: `addr2line`, `object`, `framehop`, `flate2`). |
//! | `capture` | yes | [`capture`]: the timeline of every scope begin/end, [`frame!`], [`plot!`] and [`message!`], streamed to a `.tscap` file, a TCP listener or a flight recorder (`lz4_flex`, `crc32fast`). |
//! | `tracing` | no | `tracing::Layer`: `tracing` spans as call sites (`tracing-core`, `tracing-subscriber` with the registry only). |
//! | `http` | no | [`http`]: the pull endpoint `go tool pprof`, Grafana Alloy and the OpenTelemetry Collector scrape (`/debug/pprof/profile`, `/heap`, `/allocs`, the scopes' summary), behind a token; `TICKSCOPE_HTTP=127.0.0.1:6060` (`httparse`). |
//! | `push` | no | [`push`]: the CPU profile sent to Grafana Pyroscope every interval (its Push API), every window exact, retried as Alloy does, losses counted; `TICKSCOPE_PUSH=http://HOST:4040` (`flate2`). |
//! | `flamegraph` | no | `Profile::flamegraph_svg` through `inferno`. |
//!
//! # Overhead
//! One scope (enter + exit) is two counter reads plus a few loads and stores to thread-local
//! memory: **about 25.7 ns on a 2-core x86_64 VM where one `rdtsc` alone costs ~10 ns, i.e.
//! 1.29 × the floor of two counter reads and a thread-local add** (the goal is 1.25 ×). Measure it on your
//! machine with `cargo bench -p tickscope --bench overhead`; every exit summary also prints the
//! figure measured in that process. A runtime-disabled scope costs one load and a branch.
//! Memory: ~26 KiB per thread that enters a scope, plus ~11.5 KiB per call site it touches
//! (mostly the percentile histogram), and 8 bytes of TLS per call site in every thread.
//!
//! # Async
//! `#[profile]` on an `async fn`, or [`future::FutureExt::profiled`] on any future, measures
//! each poll as a scope on the thread that runs it (busy time) and the future's first poll
//! to ready as its wall time, counting cancellations (dropped before ready) apart; the exit
//! summary shows busy and wall side by side. A future may move between threads: each poll
//! is counted where it ran, the wall time once. `scope!` itself stays thread-local: a scope
//! held across `.await` is refused by the borrow checker (its guard is not `Send`).
//!
//! # `tracing`
//! With the `tracing` feature, `tickscope::tracing::Layer` turns every `tracing` span into a
//! call site: its entries are scopes (busy time), its life from creation to close its wall
//! time; events become capture messages. See `tickscope::tracing` (feature-gated).

#![deny(missing_docs)]
// `unsafe` lives only in the two lock-free structures that allow it (`scope::hist`,
// `capture::ring`: docs/decisions/0032); the platform's is `tickscope-sys`'s. Everywhere
// else it is an error.
#![deny(unsafe_code)]
#![cfg_attr(not(feature = "enabled"), allow(dead_code, unused_imports))]

#[cfg(feature = "capture")]
pub mod capture;
pub mod clock;
mod config;
pub mod future;
mod life;
mod own;
mod runtime;
// The sampler is its own crate (`tickscope-sampler`), below this one; this crate gives it
// the clock, the open scopes and the running capture (`sampler_library`).
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "push")]
pub mod push;
#[cfg(feature = "sampler")]
pub use tickscope_sampler as sampler;
/// Sampled heap profiles: [`alloc::Profiled`], a global allocator over any other that samples
/// where the program allocates and what it still holds, written as Go's heap profiles
/// (`TICKSCOPE_HEAPPROFILE=heap.pb.gz` at exit, [`alloc::profile`] on demand). See
/// `docs/guide/memory.md`.
///
/// ```
/// #[global_allocator]
/// static A: tickscope::alloc::Profiled<std::alloc::System> =
///     tickscope::alloc::Profiled::new(std::alloc::System);
/// ```
#[cfg(feature = "sampler")]
pub mod alloc {
    #[doc(hidden)]
    pub use tickscope_sampler::heap::{note_allocated, note_freed, write_at_exit_to};
    pub use tickscope_sampler::heap::{profile, HeapProfile, Profiled, DEFAULT_RATE};
}
#[cfg(feature = "sampler")]
#[doc(hidden)]
pub mod sampler_library;
mod scope;
mod state;
mod summary;
// The capture names its CPU samples' stacks with the sampler's symboliser.
#[cfg(all(feature = "sampler", feature = "capture"))]
use tickscope_sampler::symbolize;
// The platform layer: every libc call of the library's own, wrapped once (crate
// `tickscope-sys`).
use tickscope_sys as sys;
#[cfg(feature = "tracing")]
pub mod tracing;

#[cfg_attr(feature = "enabled", path = "imp/enabled.rs")]
#[cfg_attr(not(feature = "enabled"), path = "imp/disabled.rs")]
mod imp;

pub use clock::{now, system_time_ms, ticks_per_second, ClockSource, Ticks, Timer};
pub use config::{parse_interval, Config, Output, SummaryFormat};
pub use imp::{is_enabled, report, report_string, set_enabled, thread_bytes, Scope, COMPILED_IN};

/// Measures a function: the same as putting [`scope!()`](scope) at the top of its body.
///
/// `#[profile]` names the scope after the function (`Type::method` for methods);
/// `#[profile(name = "parse")]` names it; `#[profile(group = "alloc")]` adds it to a group.
/// On an `async fn` it measures the future the call returns, as
/// [`future::FutureExt::profiled`] does: each poll a scope, first poll to ready its wall
/// time. Refused on `const fn`, with a message saying why.
pub use tickscope_macros::profile;

/// Opens a scope that lasts until the end of the enclosing block.
///
/// - `scope!()` is named after the enclosing function (`Type::method` for methods);
/// - `scope!("name")` names it;
/// - `scope!(group = "alloc")` adds this call site to the group `alloc`: every call site of a
///   group is one row, and re-entering a group while it is open counts the call but not the
///   time twice — the API-profiler idea: put it in every public function of an API.
///
/// ```
/// fn parse(input: &str) -> usize {
///     tickscope::scope!(); // "parse", until the end of the function
///     let n = {
///         tickscope::scope!("split"); // a child of "parse": its time is not parse's self time
///         input.split(',').count()
///     };
///     n
/// }
/// assert_eq!(parse("a,b"), 2);
/// // At exit, the table of every scope appears on stderr (or `tickscope::report()` now).
/// ```
///
/// Without the `enabled` feature the macro expands to nothing.
#[cfg(feature = "enabled")]
#[macro_export]
macro_rules! scope {
    () => {
        let __tickscope_scope =
            $crate::__tickscope_enter!($crate::__tickscope_function_name!(), Scope);
    };
    (group = $group:expr $(,)?) => {
        let __tickscope_scope =
            $crate::__tickscope_enter!($crate::__private::Name::Static($group), Group);
    };
    ($name:expr $(,)?) => {
        let __tickscope_scope =
            $crate::__tickscope_enter!($crate::__private::Name::Static($name), Scope);
    };
}

/// The call site's static, its per-thread slot cache, and the guard: what every form of
/// [`scope!`] expands to. Not a stable API.
#[cfg(feature = "enabled")]
#[doc(hidden)]
#[macro_export]
macro_rules! __tickscope_enter {
    ($name:expr, $kind:ident) => {
        $crate::__private::enter_cached($crate::__tickscope_site!(Callsite, $name, $kind), {
            ::std::thread_local! {
                static __TICKSCOPE_SLOT: $crate::__private::SlotCache =
                    const { $crate::__private::SlotCache::new() };
            }
            &__TICKSCOPE_SLOT
        })
    };
}

/// A call site's static (`Callsite` for a scope, `AsyncSite` for a future) named `$name`,
/// of kind `$kind`, at the place the macro was used. Not a stable API.
#[doc(hidden)]
#[macro_export]
macro_rules! __tickscope_site {
    ($ty:ident, $name:expr, $kind:ident) => {{
        static __TICKSCOPE_CALLSITE: $crate::__private::$ty = $crate::__private::$ty::new(
            $name,
            $crate::__private::Kind::$kind,
            file!(),
            line!(),
            module_path!(),
        );
        &__TICKSCOPE_CALLSITE
    }};
}

/// The name of the function the macro is used in, resolved at registration. Not a stable
/// API.
#[doc(hidden)]
#[macro_export]
macro_rules! __tickscope_function_name {
    () => {
        $crate::__private::Name::Function({
            fn __tickscope_name() -> &'static str {
                fn f() {}
                $crate::__private::type_name_of(f)
            }
            __tickscope_name
        })
    };
}

/// `future` measured as a future call site: what `#[profile]` puts around an `async fn`'s
/// body. Not a stable API.
#[doc(hidden)]
#[macro_export]
macro_rules! __tickscope_profiled {
    ((), $fut:expr) => {
        $crate::__tickscope_profiled!(@site $crate::__tickscope_function_name!(), Scope, $fut)
    };
    ((group = $group:expr), $fut:expr) => {
        $crate::__tickscope_profiled!(@site $crate::__private::Name::Static($group), Group, $fut)
    };
    (($name:expr), $fut:expr) => {
        $crate::__tickscope_profiled!(@site $crate::__private::Name::Static($name), Scope, $fut)
    };
    (@site $name:expr, $kind:ident, $fut:expr) => {
        $crate::__private::profiled_at($crate::__tickscope_site!(AsyncSite, $name, $kind), $fut)
    };
}

/// Opens a scope that lasts until the end of the enclosing block.
///
/// The `enabled` feature is off: this expands to nothing.
#[cfg(not(feature = "enabled"))]
#[macro_export]
macro_rules! scope {
    ($($anything:tt)*) => {};
}

/// Marks the end of a frame (of a game loop, a request, a batch) in the running capture:
/// `frame!()` for the default frame kind, `frame!("render")` for a named one. `tickscope
/// report` then gives frame-time statistics (min, mean, p99, max). Costs one load and a branch
/// when no capture runs; expands to nothing without the `capture` and `enabled` features.
#[cfg(all(feature = "enabled", feature = "capture"))]
#[macro_export]
macro_rules! frame {
    () => {
        $crate::frame!("frame")
    };
    ($name:expr $(,)?) => {{
        static __TICKSCOPE_MARKER: $crate::__private::Marker =
            $crate::__private::Marker::frame($name);
        $crate::__private::frame(&__TICKSCOPE_MARKER);
    }};
}

/// Records a counter's value in the running capture: `plot!("queue", len as f64)`. Each name
/// is one counter track on the timeline. The value expression is evaluated only while a
/// capture runs; expands to nothing without the `capture` and `enabled` features.
#[cfg(all(feature = "enabled", feature = "capture"))]
#[macro_export]
macro_rules! plot {
    ($name:expr, $value:expr $(,)?) => {{
        static __TICKSCOPE_MARKER: $crate::__private::Marker =
            $crate::__private::Marker::counter($name);
        if $crate::__private::capturing() {
            $crate::__private::plot(&__TICKSCOPE_MARKER, ($value) as f64);
        }
    }};
}

/// Records a message in the running capture, formatted like `format!`
/// (`message!("loaded {} items", n)`), into a stack buffer: no allocation; messages longer than
/// `MAX_MESSAGE` (1024) bytes are cut. The arguments are evaluated only while a capture
/// runs; expands to nothing without the `capture` and `enabled` features.
#[cfg(all(feature = "enabled", feature = "capture"))]
#[macro_export]
macro_rules! message {
    ($($arg:tt)+) => {
        if $crate::__private::capturing() {
            $crate::__private::message(::std::format_args!($($arg)+));
        }
    };
}

/// Marks a frame (compiled out: expands to nothing).
#[cfg(not(all(feature = "enabled", feature = "capture")))]
#[macro_export]
macro_rules! frame {
    ($($anything:tt)*) => {};
}

/// Records a counter (compiled out: expands to nothing).
#[cfg(not(all(feature = "enabled", feature = "capture")))]
#[macro_export]
macro_rules! plot {
    ($($anything:tt)*) => {};
}

/// Records a message (compiled out: expands to nothing).
#[cfg(not(all(feature = "enabled", feature = "capture")))]
#[macro_export]
macro_rules! message {
    ($($anything:tt)*) => {};
}

/// What the macros expand to (and the preload library's C API, which makes call sites at run
/// time as the macros do at compile time): nothing else. **Not a stable API**: it may change
/// in any release.
#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "capture")]
    pub use crate::capture::{frame, message, plot, Marker};
    pub use crate::future::{profiled_at, AsyncSite};
    pub use crate::imp::capturing;
    pub use crate::imp::{enter, enter_cached};
    pub use crate::scope::callsite::{type_name_of, Callsite, Kind, Name};
    pub use crate::scope::SlotCache;
}
