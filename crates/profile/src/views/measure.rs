//! Units and number formatting exactly as `go tool pprof` prints them (its
//! `internal/measurement`): `7.12s`, `1.68MB`, `1400us`, ` 9.53%`, `0.017%`.

/// A family of units that convert into each other.
struct UnitType {
    units: &'static [(&'static str, &'static [&'static str], f64)],
    default: (&'static str, f64),
}

const UNIT_TYPES: [UnitType; 3] = [
    UnitType {
        units: &[
            ("B", &["b", "byte"], 1.0),
            ("kB", &["kb", "kbyte", "kilobyte"], 1024.0),
            ("MB", &["mb", "mbyte", "megabyte"], 1048576.0),
            ("GB", &["gb", "gbyte", "gigabyte"], 1073741824.0),
            ("TB", &["tb", "tbyte", "terabyte"], 1099511627776.0),
            ("PB", &["pb", "pbyte", "petabyte"], 1125899906842624.0),
        ],
        default: ("B", 1.0),
    },
    UnitType {
        units: &[
            ("ns", &["ns", "nanosecond"], 1.0),
            ("us", &["μs", "us", "microsecond"], 1e3),
            ("ms", &["ms", "millisecond"], 1e6),
            ("s", &["s", "sec", "second"], 1e9),
            ("hrs", &["hour", "hr"], 3600e9),
        ],
        default: ("s", 1e9),
    },
    UnitType {
        units: &[
            ("n*GCU", &["nanogcu"], 1e-9),
            ("u*GCU", &["microgcu"], 1e-6),
            ("m*GCU", &["milligcu"], 1e-3),
            ("GCU", &["gcu"], 1.0),
            ("k*GCU", &["kilogcu"], 1e3),
            ("M*GCU", &["megagcu"], 1e6),
            ("G*GCU", &["gigagcu"], 1e9),
            ("T*GCU", &["teragcu"], 1e12),
            ("P*GCU", &["petagcu"], 1e15),
        ],
        default: ("GCU", 1.0),
    },
];

impl UnitType {
    /// The unit an alias names: lower-cased, a plural `s` dropped from names over 2 letters.
    fn sniff(&self, unit: &str) -> Option<(&'static str, f64)> {
        let lower = unit.to_lowercase();
        let unit = if lower.chars().count() > 2 {
            lower.strip_suffix('s').unwrap_or(&lower)
        } else {
            &lower
        };
        self.units
            .iter()
            .find(|(_, aliases, _)| aliases.contains(&unit))
            .map(|&(name, _, factor)| (name, factor))
    }

    fn auto_scale(&self, value: f64) -> Option<(f64, &'static str)> {
        let mut best: Option<(f64, &'static str)> = None;
        for &(name, _, factor) in self.units {
            if factor >= best.map_or(0.0, |b| b.0) && value / factor >= 1.0 {
                best = Some((factor, name));
            }
        }
        best.map(|(f, name)| (value / f, name))
    }

    fn convert(&self, value: i64, from: &str, to: &str) -> Option<(f64, String)> {
        let (_, from_factor) = self.sniff(from)?;
        let v = value as f64 * from_factor;
        if to == "minimum" || to == "auto" {
            if let Some((v, u)) = self.auto_scale(v) {
                return Some((v, u.to_string()));
            }
            return Some((v / self.default.1, self.default.0.to_string()));
        }
        match self.sniff(to) {
            Some((name, factor)) => Some((v / factor, name.to_string())),
            None => Some((v / self.default.1, self.default.0.to_string())),
        }
    }
}

/// Converts `value` in `from` units to `to` units (`"minimum"`/`"auto"`: the largest unit
/// that keeps the value at least 1); returns the value and the unit's printed name ("" for
/// counts).
pub fn scale(value: i64, from: &str, to: &str) -> (f64, String) {
    if value < 0 && value != i64::MIN {
        let (v, u) = scale(-value, from, to);
        return (-v, u);
    }
    for ut in &UNIT_TYPES {
        if let Some(r) = ut.convert(value, from, to) {
            return r;
        }
    }
    match to {
        "count" | "sample" | "unit" | "minimum" | "auto" => (value as f64, String::new()),
        _ => (value as f64, to.to_string()),
    }
}

/// `value` (in `from` units) printed in `to` units with two decimals, trailing `.00`
/// dropped: `7.12s`, `170MB`, `0`.
pub fn scaled_label(value: i64, from: &str, to: &str) -> String {
    let (v, u) = scale(value, from, to);
    let s = format!("{v:.2}");
    let s = s.strip_suffix(".00").unwrap_or(&s);
    if s == "0" || s == "-0" {
        return "0".into();
    }
    format!("{s}{u}")
}

/// `value` in `unit`, automatically scaled (pprof's `measurement.Label`).
pub fn label(value: i64, unit: &str) -> String {
    scaled_label(value, unit, "auto")
}

/// `value` as a percentage of `total`, six characters wide as pprof prints it: `  100%`,
/// ` 9.53%`, `0.017%`, `3.2e-05%`.
pub fn percentage(value: i64, total: i64) -> String {
    let ratio = if total != 0 {
        (value as f64 / total as f64).abs() * 100.0
    } else {
        0.0
    };
    if (99.95..=100.05).contains(&ratio) {
        "  100%".into()
    } else if ratio >= 1.0 {
        format!("{ratio:5.2}%")
    } else {
        format!("{:>5}%", go_g2(ratio))
    }
}

/// Go's `%.2g`: two significant digits, exponent form below 1e-4, trailing zeros dropped.
fn go_g2(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    // Rust's `{:.1e}` rounds to two significant digits correctly: "3.2e-5", "1.0e0".
    let e = format!("{v:.1e}");
    let (mantissa, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..2).contains(&exp) {
        let m = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{m}e{sign}{:02}", exp.abs());
    }
    let decimals = (1 - exp).max(0) as usize;
    trim_zeros(&format!("{v:.decimals$}")).to_string()
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_match_pprof() {
        assert_eq!(scaled_label(7_120_000_000, "nanoseconds", "s"), "7.12s");
        assert_eq!(scaled_label(40_000_000, "nanoseconds", "s"), "0.04s");
        assert_eq!(scaled_label(0, "nanoseconds", "s"), "0");
        assert_eq!(scaled_label(1_400_000, "nanoseconds", "us"), "1400us");
        assert_eq!(scaled_label(170 << 20, "bytes", "MB"), "170MB");
        assert_eq!(scaled_label(7, "count", "minimum"), "7");
        assert_eq!(label(240_360_000_000, "nanoseconds"), "240.36s");
        assert_eq!(label(16_488_000_000_000, "nanoseconds"), "4.58hrs");
        assert_eq!(scale(1_000, "microseconds", "minimum").1, "ms");
    }

    #[test]
    fn percentages_match_pprof() {
        assert_eq!(percentage(100, 100), "  100%");
        assert_eq!(percentage(953, 10000), " 9.53%");
        assert_eq!(percentage(17, 100_000), "0.017%");
        assert_eq!(percentage(32, 100_000_000), "3.2e-05%");
        assert_eq!(percentage(0, 100), "    0%");
        assert_eq!(percentage(5, 1000), "  0.5%");
        assert_eq!(percentage(9990, 1_000_000), "    1%");
    }
}
