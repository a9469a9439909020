//! Integration tests of the `tickscope` crate: one binary, one module per area.

// Exit summaries of real processes on every exit path (the examples as child processes).
mod exit;
// `#[profile]` and `scope!` through the public API, and compile errors (trybuild).
mod macros;
