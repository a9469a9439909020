//! Number, name and JSON formatting shared by the renderers.

use std::fmt::Write;

pub(crate) use tickscope_fmt::{count, duration, hertz, json_string as json_str, location};

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
}
