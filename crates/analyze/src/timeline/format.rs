//! Number, name and JSON formatting shared by the renderers.

use std::fmt::Write;

/// A duration in ns with three significant digits and a unit chosen for it: `812 ns`,
/// `12.3 µs`, `1.50 ms`, `2.04 s` (as the in-process summary prints them).
pub(crate) fn duration(ns: f64) -> String {
    if !ns.is_finite() || ns < 0.0 {
        return "-".to_owned();
    }
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
pub(crate) fn hertz(hz: f64) -> String {
    if hz >= 1e9 {
        format!("{:.3} GHz", hz / 1e9)
    } else if hz >= 1e6 {
        format!("{:.3} MHz", hz / 1e6)
    } else {
        format!("{hz:.0} Hz")
    }
}

/// A count with a metric prefix: `950`, `12.3 k`, `4.56 M`.
pub(crate) fn count_si(n: f64) -> String {
    if n < 1e3 {
        format!("{n:.0}")
    } else if n < 1e6 {
        format!("{:.1} k", n / 1e3)
    } else if n < 1e9 {
        format!("{:.2} M", n / 1e6)
    } else {
        format!("{:.2} G", n / 1e9)
    }
}

/// The last two components of a source path, with the line: `src/demo.rs:42`.
pub(crate) fn location(file: &str, line: u64) -> String {
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

/// Appends `s` as a JSON string literal.
pub(crate) fn json_str(o: &mut String, s: &str) {
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
}

/// Appends integer ns as µs with exactly three decimals (`1234567` → `1234.567`): exact, so
/// intervals computed in integer ns nest in the output as they do in ns.
pub(crate) fn micros(o: &mut String, ns: u64) {
    let _ = write!(o, "{}.{:03}", ns / 1000, ns % 1000);
}

/// A name made safe for one line of folded stacks: no `;` (the separator) and no line break.
pub(crate) fn folded_name(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' => ' ',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_pick_a_unit_and_three_significant_digits() {
        let cases = [
            (0.0, "0 ns"),
            (421.0, "421 ns"),
            (999.0, "999 ns"),
            (1_000.0, "1.00 µs"),
            (29_800.0, "29.8 µs"),
            (999_400.0, "999 µs"),
            (999_600.0, "1.00 ms"),
            (5_730_000_000.0, "5.73 s"),
        ];
        for (ns, want) in cases {
            assert_eq!(duration(ns), want, "{ns}");
        }
        assert_eq!(duration(f64::NAN), "-");
    }

    #[test]
    fn micros_are_exact() {
        let mut o = String::new();
        micros(&mut o, 1_234_567);
        o.push(' ');
        micros(&mut o, 5);
        assert_eq!(o, "1234.567 0.005");
    }

    #[test]
    fn json_strings_escape_quotes_and_controls() {
        let mut o = String::new();
        json_str(&mut o, "a\"b\\c\nd\u{1}");
        assert_eq!(o, r#""a\"b\\c\nd\u0001""#);
    }

    #[test]
    fn locations_keep_the_last_directory() {
        assert_eq!(location("crates/cli/src/demo.rs", 42), "src/demo.rs:42");
        assert_eq!(location("main.rs", 3), "main.rs:3");
        assert_eq!(location("", 0), "");
    }
}
