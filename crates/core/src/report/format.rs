//! Number formatting shared by the text reports.

/// A duration in ns with three significant digits and a unit chosen for it: `812 ns`,
/// `12.3 µs`, `1.50 ms`, `2.04 s`.
pub(crate) fn duration(ns: f64) -> String {
    if !ns.is_finite() || ns < 0.0 {
        return "-".to_owned();
    }
    let (v, unit) = if ns < 1e3 {
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
pub(crate) fn hertz(hz: f64) -> String {
    if hz >= 1e9 {
        format!("{:.3} GHz", hz / 1e9)
    } else if hz >= 1e6 {
        format!("{:.3} MHz", hz / 1e6)
    } else {
        format!("{hz:.0} Hz")
    }
}

/// The last two components of a source path, with the line: `src/demo.rs:42`.
pub(crate) fn location(file: &str, line: u32) -> String {
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
pub(crate) fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_a_unit_and_three_significant_digits() {
        let cases = [
            (0.0, "0 ns"),
            (7.4, "7 ns"),
            (999.0, "999 ns"),
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
    }

    #[test]
    fn locations_keep_the_last_directory() {
        assert_eq!(location("crates/cli/src/demo.rs", 42), "src/demo.rs:42");
        assert_eq!(location("main.rs", 3), "main.rs:3");
        assert_eq!(location("", 0), "");
    }
}
