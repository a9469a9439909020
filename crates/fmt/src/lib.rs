//! What tickscope's in-process exit summary (crate `tickscope`) and the summary
//! `tickscope report` computes from a capture (crate `tickscope-timeline`) must print alike:
//! numbers, locations, the table layout, and the histogram buckets percentiles come from; and
//! pprof's units ([`units`]), which the profile views, the profile filters and the sampler's
//! own text print alike.
//!
//! One definition, so the two cannot drift apart. `tickscope-timeline` does not depend on
//! `tickscope` (it reads files; DESIGN.md), so this small crate, with no dependencies of its
//! own, sits under both.

#![forbid(unsafe_code)]

pub mod hist;
#[allow(missing_docs)]
pub mod pprof_fields;
pub mod units;

/// A duration in ns with three significant digits and a unit chosen for it: `812 ns`,
/// `12.3 µs`, `1.50 ms`, `2.04 s`; `-` for a value that is not one.
pub fn duration(ns: f64) -> String {
    if !ns.is_finite() || ns < 0.0 {
        return "-".to_owned();
    }
    // Each unit ends where rounding to three digits would print 1000 of it.
    let (v, unit) = if ns < 999.5 {
        return format!("{ns:.0} ns");
    } else if ns < 999.5e3 {
        (ns / 1e3, "µs")
    } else if ns < 999.5e6 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    if v < 9.995 {
        format!("{v:.2} {unit}")
    } else if v < 99.95 {
        format!("{v:.1} {unit}")
    } else {
        format!("{v:.0} {unit}")
    }
}

/// A rate in Hz as `2.995 GHz`.
pub fn hertz(hz: f64) -> String {
    if hz >= 1e9 {
        format!("{:.3} GHz", hz / 1e9)
    } else if hz >= 1e6 {
        format!("{:.3} MHz", hz / 1e6)
    } else {
        format!("{hz:.0} Hz")
    }
}

/// The last two components of a source path, with the line: `src/demo.rs:42` ("" without a
/// file).
pub fn location(file: &str, line: u64) -> String {
    if file.is_empty() {
        return String::new();
    }
    let mut parts = file.rsplit(['/', '\\']);
    let name = parts.next().unwrap_or(file);
    match parts.next() {
        Some(dir) if !dir.is_empty() => format!("{dir}/{name}:{line}"),
        _ => format!("{name}:{line}"),
    }
}

/// `n` with a singular or plural noun: `1 thread`, `3 threads`.
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Aligns rows of cells (the header is the first row) into text lines: columns two spaces
/// apart, the first `left` columns flush left, the others flush right, no trailing spaces.
pub fn align<S: AsRef<str>>(rows: &[Vec<S>], left: usize) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let width = |r: &Vec<S>, c: usize| r.get(c).map_or(0, |s| s.as_ref().chars().count());
    let widths: Vec<usize> = (0..cols)
        .map(|c| rows.iter().map(|r| width(r, c)).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        align_row(r, &widths, left, &mut out);
    }
    out
}

/// One row of [`align`] with the columns' `widths` known: appended to `out` with its newline.
pub fn align_row<S: AsRef<str>>(cells: &[S], widths: &[usize], left: usize, out: &mut String) {
    let start = out.len();
    for (c, cell) in cells.iter().enumerate() {
        let cell = cell.as_ref();
        let pad = widths[c].saturating_sub(cell.chars().count());
        if c > 0 {
            out.push_str("  ");
        }
        if c < left {
            out.push_str(cell);
            out.extend(std::iter::repeat(' ').take(pad));
        } else {
            out.extend(std::iter::repeat(' ').take(pad));
            out.push_str(cell);
        }
    }
    let end = out[start..].trim_end().len() + start;
    out.truncate(end);
    out.push('\n');
}

/// Appends `s` as a JSON string literal (quotes, backslashes and control characters
/// escaped).
pub fn json_string(o: &mut String, s: &str) {
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = std::fmt::Write::write_fmt(o, format_args!("\\u{:04x}", c as u32));
            }
            c => o.push(c),
        }
    }
    o.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_a_unit_and_three_significant_digits() {
        let cases = [
            (0.0, "0 ns"),
            (7.4, "7 ns"),
            (421.0, "421 ns"),
            (999.0, "999 ns"),
            (999.6, "1.00 µs"),
            (1_000.0, "1.00 µs"),
            (12_345.0, "12.3 µs"),
            (999_400.0, "999 µs"),
            (999_600.0, "1.00 ms"),
            (1_500_000.0, "1.50 ms"),
            (2_040_000_000.0, "2.04 s"),
            (4_000_000_000_000.0, "4000 s"),
        ];
        for (ns, want) in cases {
            assert_eq!(duration(ns), want, "{ns}");
        }
        assert_eq!(duration(f64::NAN), "-");
        assert_eq!(duration(-1.0), "-");
    }

    #[test]
    fn locations_keep_the_last_directory() {
        assert_eq!(location("crates/cli/src/demo.rs", 42), "src/demo.rs:42");
        assert_eq!(location("main.rs", 3), "main.rs:3");
        assert_eq!(location("", 0), "");
    }

    #[test]
    fn json_strings_escape_quotes_backslashes_and_controls() {
        let mut o = String::new();
        json_string(&mut o, "a\"b\\c\nd\u{1}é");
        assert_eq!(o, r#""a\"b\\c\nd\u0001é""#);
    }

    #[test]
    fn counts_rates_and_tables() {
        assert_eq!(count(1, "thread"), "1 thread");
        assert_eq!(count(3, "thread"), "3 threads");
        assert_eq!(hertz(2_995_000_000.0), "2.995 GHz");
        let rows = vec![
            vec!["name", "calls", "total"],
            vec!["parse", "12", "1.50 ms"],
            vec!["x", "1200", ""],
        ];
        assert_eq!(
            align(&rows, 1),
            "name   calls    total\nparse     12  1.50 ms\nx       1200\n"
        );
    }
}
