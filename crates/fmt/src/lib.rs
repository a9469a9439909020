//! What tickscope's in-process exit summary (crate `tickscope`) and the summary
//! `tickscope report` computes from a capture (crate `tickscope-timeline`) must print alike:
//! numbers, locations, the table layout, and the histogram buckets percentiles come from; and
//! pprof's units ([`units`]), which the profile views, the profile filters and the sampler's
//! own text print alike. And what two crates must encode alike: the timeline capture format's
//! numbers ([`tscap`]: `tickscope` writes, `tickscope-timeline` reads). profile.proto's field
//! numbers are `tickscope-pprof`'s, with the one writer of pprof files.
//!
//! One definition, so the two cannot drift apart. `tickscope-timeline` does not depend on
//! `tickscope` (it reads files; DESIGN.md), so this small crate, with no dependencies of its
//! own, sits under both.

#![forbid(unsafe_code)]

pub mod hist;
pub mod protocol;
pub mod tscap;
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
    fn lives_table_puts_busy_beside_wall_and_a_kind_column_only_when_known() {
        assert_eq!(lives_table(&[]), "");
        let row = LivesRow {
            name: "fetch".into(),
            kind: Some("future"),
            lives: 3,
            cancelled: 1,
            entries: 7,
            busy_ns: 1500.0,
            self_ns: 1000.0,
            wall_ns: 3e6,
            wall: [Some(1e6), Some(2e6), Some(2e6)],
            entry: [Some(200.0), None, Some(900.0)],
        };
        let t = lives_table(std::slice::from_ref(&row));
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("futures and spans: busy"), "{t}");
        let cells = |l: &str| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(cells(lines[1])[..3], ["name", "kind", "calls"]);
        assert_eq!(
            cells(lines[2]),
            [
                "fetch", "future", "3", "1", "7", "1.50 µs", "1.00 µs", "3.00 ms", "1.00 ms",
                "2.00 ms", "2.00 ms", "200 ns", "-", "900 ns"
            ]
        );
        let t = lives_table(&[LivesRow { kind: None, ..row }]);
        assert_eq!(cells(t.lines().nth(1).unwrap())[..2], ["name", "calls"]);
    }

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

/// One row of the "futures and spans" table: a call site whose entries (a future's polls, a
/// span's enters) are timed as scopes and whose lives (first poll to ready or drop, creation
/// to close) as wall times. Durations in ns; `None` where nothing supports a figure.
#[derive(Clone, Debug, Default)]
pub struct LivesRow {
    /// The call site's name.
    pub name: String,
    /// `future` or `span`, where known (a capture does not say).
    pub kind: Option<&'static str>,
    /// Lives ended, ready or cancelled.
    pub lives: u64,
    /// Futures dropped before ready (in `lives`).
    pub cancelled: u64,
    /// Entries (polls, enters).
    pub entries: u64,
    /// Time entered.
    pub busy_ns: f64,
    /// Time entered and not in child scopes.
    pub self_ns: f64,
    /// The lives' wall time.
    pub wall_ns: f64,
    /// Wall time p50, p99 and max.
    pub wall: [Option<f64>; 3],
    /// Entry p50, p99 and max.
    pub entry: [Option<f64>; 3],
}

/// The "futures and spans" table, busy beside wall (either alone misleads: a future waiting
/// on a timer is long and idle), with its heading line: what the exit summary and `tickscope
/// report` print alike. Empty for no rows.
pub fn lives_table(rows: &[LivesRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let kinds = rows.iter().any(|r| r.kind.is_some());
    let opt = |v: Option<f64>| v.map_or("-".to_owned(), duration);
    let mut table: Vec<Vec<String>> = Vec::with_capacity(rows.len() + 1);
    let mut header = vec!["name"];
    if kinds {
        header.push("kind");
    }
    header.extend([
        "calls",
        "cancelled",
        "entries",
        "busy",
        "self busy",
        "wall",
        "wall p50",
        "wall p99",
        "wall max",
        "entry p50",
        "entry p99",
        "entry max",
    ]);
    table.push(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        let mut cells = vec![r.name.clone()];
        if kinds {
            cells.push(r.kind.unwrap_or("-").to_owned());
        }
        cells.extend([
            r.lives.to_string(),
            r.cancelled.to_string(),
            r.entries.to_string(),
            duration(r.busy_ns),
            duration(r.self_ns),
            duration(r.wall_ns),
        ]);
        cells.extend(r.wall.iter().chain(&r.entry).map(|v| opt(*v)));
        table.push(cells);
    }
    let mut out = String::from(
        "futures and spans: busy = time polled or entered (self: not in child scopes), wall = first poll → ready or dropped (future), created → closed (span)\n",
    );
    out.push_str(&align(&table, 1));
    out
}

/// One row of the allocations-by-scope table: a call site's allocations and their bytes,
/// inside it (total) and not inside its child scopes (self).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AllocsRow {
    /// The call site's name.
    pub name: String,
    /// Allocations inside its outermost calls.
    pub allocs: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Allocations not inside its child scopes.
    pub self_allocs: u64,
    /// Their bytes.
    pub self_bytes: u64,
}

/// The "allocations by scope" table, with its heading line: what the exit summary prints
/// where `tickscope::alloc::Profiled` counts allocations. Rows that allocated nothing are left
/// out; empty for none.
pub fn allocs_table(rows: &[AllocsRow]) -> String {
    let bytes = |b: u64| units::label(b.min(i64::MAX as u64) as i64, "bytes");
    let mut table = vec![[
        "name",
        "allocs",
        "bytes",
        "self allocs",
        "self bytes",
        "mean size",
    ]
    .map(String::from)
    .to_vec()];
    let mut rows: Vec<&AllocsRow> = rows.iter().filter(|r| r.allocs > 0).collect();
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.name.cmp(&b.name)));
    for r in &rows {
        table.push(vec![
            r.name.clone(),
            r.allocs.to_string(),
            bytes(r.bytes),
            r.self_allocs.to_string(),
            bytes(r.self_bytes),
            bytes(r.bytes / r.allocs.max(1)),
        ]);
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "allocations by scope (every one counted, on the thread that made it; self: not in child scopes; mean size: bytes per allocation):\n",
    );
    out.push_str(&align(&table, 1));
    out
}
