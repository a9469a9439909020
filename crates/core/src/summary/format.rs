//! Number formatting shared by the text reports.

pub(crate) use tickscope_fmt::{count, duration, hertz};

/// The last two components of a source path, with the line: `src/demo.rs:42`.
pub(crate) fn location(file: &str, line: u32) -> String {
    tickscope_fmt::location(file, u64::from(line))
}
