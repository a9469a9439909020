//! The viewer's tests: one binary, one module per area. The page itself is driven in
//! headless Chromium by the CLI's tests (`crates/cli/tests/viewer.rs`), which run the real
//! `tickscope view`.

// The timeline crate's test support: its capture encoder, written from the format's spec.
#[path = "../../timeline/tests/support/writer.rs"]
mod writer;

// The index and its window queries against the scopes a generated capture holds.
mod index;
// The HTTP server in-process: the token, bad requests, and its answers.
mod server;
// What others can make the viewer hold: the page's connections (cap, timeouts) and live
// captures (whose peer, cap, memory, timeouts).
mod limits;
// The file that opens the browser without the token in a command line.
mod redirect;

/// A small capture of two threads (the index tests' generator).
fn writer_capture() -> Vec<u8> {
    index::generated(1).0
}
