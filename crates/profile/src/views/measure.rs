//! Units and number formatting exactly as `go tool pprof` prints them (its
//! `internal/measurement`): `7.12s`, `1.68MB`, `1400us`, ` 9.53%`, `0.017%`. They live in
//! `tickscope-fmt` ([`tickscope_fmt::units`]), one copy for the views, the filters and the
//! sampler.

pub use tickscope_fmt::units::{label, percentage, scale, scaled_label};
