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

/// `ns` on the grid times are written in: units of 1/1024 µs (0.977 ns), rounded to the
/// nearest. Rounding keeps order (`a <= b` gives `grid(a) <= grid(b)`), so intervals
/// computed in integer ns nest on the grid as they do in ns.
pub(crate) fn grid(ns: u64) -> u64 {
    ((ns as u128 * 128 + 62) / 125) as u64
}

/// Appends a time on the [`grid`] as µs, exactly (`9216` → `9`, `1` → `0.0009765625`).
///
/// Readers add `ts` and `dur` in binary floating point (speedscope, the Perfetto UI): three
/// decimals of µs (`513.436 + 0.090`) are no binary fraction, and such a sum came out a
/// hair past its parent's end (`513.5260000000001` against `513.526`), which speedscope
/// takes for slices that do not nest. A multiple of 1/1024 µs below 2^43 µs (100 days) is
/// a double exactly, and so is the sum of two: the end a reader computes is the one
/// written, and nesting survives.
pub(crate) fn micros(o: &mut String, units: u64) {
    let (whole, part) = (units / 1024, units % 1024);
    match part {
        0 => {
            let _ = write!(o, "{whole}");
        }
        // part / 1024 = part * 9765625 / 10^10: ten decimals at most.
        _ => {
            let digits = format!("{:010}", part * 9_765_625);
            let _ = write!(o, "{whole}.{}", digits.trim_end_matches('0'));
        }
    }
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
    fn times_on_the_grid_are_exact_binary_fractions_whose_sums_nest() {
        assert_eq!(
            (grid(0), grid(1000), grid(9000), grid(1)),
            (0, 1024, 9216, 1)
        );
        let mut o = String::new();
        for units in [9216, 1, 1024 * 513 + 446, 3] {
            micros(&mut o, units);
            o.push(' ');
        }
        assert_eq!(o, "9 0.0009765625 513.435546875 0.0029296875 ");
        // Written and read back as a reader does (f64), every start + duration is exactly
        // the end's own value: a child never ends past its parent. With three decimals,
        // 513.436 + 0.090 is 513.5260000000001 against the parent's 513.526.
        let f = |units: u64| {
            let mut s = String::new();
            micros(&mut s, units);
            s.parse::<f64>().unwrap()
        };
        for (begin, end) in [
            (513_436u64, 513_526u64),
            (642_228, 642_278),
            (1, 999_999_999_999),
        ] {
            let (b, e) = (grid(begin), grid(end));
            assert_eq!(f(b) + f(e - b), f(e), "{begin}..{end} ns");
            assert_eq!(f(e), e as f64 / 1024.0);
        }
        // Order kept, and ns back by rounding: |grid(ns) / 1.024 - ns| <= 0.49.
        for ns in [
            0u64,
            1,
            2,
            62,
            63,
            124,
            125,
            999,
            1_234_567,
            u32::MAX as u64,
        ] {
            assert!(grid(ns) <= grid(ns + 1));
            assert_eq!((f(grid(ns)) * 1000.0).round() as u64, ns);
        }
    }

    #[test]
    fn json_strings_escape_quotes_and_controls() {
        let mut o = String::new();
        json_str(&mut o, "a\"b\\c\nd\u{1}");
        assert_eq!(o, r#""a\"b\\c\nd\u0001""#);
    }
}
