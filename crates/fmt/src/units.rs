//! Units and number formatting exactly as `go tool pprof` prints them (its
//! `internal/measurement`): `7.12s`, `1.68MB`, `1400us`, ` 9.53%`, `0.017%`. One copy for the
//! profile views, the profile filters (`--tagfocus 1ms:`) and the sampler's own text.

/// A unit: its printed name, the names it is known by, and its size in the base unit.
struct Unit {
    name: &'static str,
    aliases: &'static [&'static str],
    factor: f64,
}

/// Units of one kind (memory, time, GCU) and the one used when a target unit is unknown.
struct UnitType {
    units: &'static [Unit],
    default: (&'static str, f64),
}

const fn unit(name: &'static str, aliases: &'static [&'static str], factor: f64) -> Unit {
    Unit {
        name,
        aliases,
        factor,
    }
}

static UNIT_TYPES: [UnitType; 3] = [
    UnitType {
        units: &[
            unit("B", &["b", "byte"], 1.0),
            unit("kB", &["kb", "kbyte", "kilobyte"], (1u64 << 10) as f64),
            unit("MB", &["mb", "mbyte", "megabyte"], (1u64 << 20) as f64),
            unit("GB", &["gb", "gbyte", "gigabyte"], (1u64 << 30) as f64),
            unit("TB", &["tb", "tbyte", "terabyte"], (1u64 << 40) as f64),
            unit("PB", &["pb", "pbyte", "petabyte"], (1u64 << 50) as f64),
        ],
        default: ("B", 1.0),
    },
    UnitType {
        units: &[
            unit("ns", &["ns", "nanosecond"], 1.0),
            unit("us", &["μs", "us", "microsecond"], 1e3),
            unit("ms", &["ms", "millisecond"], 1e6),
            unit("s", &["s", "sec", "second"], 1e9),
            unit("hrs", &["hour", "hr"], 3600e9),
        ],
        default: ("s", 1e9),
    },
    UnitType {
        units: &[
            unit("n*GCU", &["nanogcu"], 1e-9),
            unit("u*GCU", &["microgcu"], 1e-6),
            unit("m*GCU", &["milligcu"], 1e-3),
            unit("GCU", &["gcu"], 1.0),
            unit("k*GCU", &["kilogcu"], 1e3),
            unit("M*GCU", &["megagcu"], 1e6),
            unit("G*GCU", &["gigagcu"], 1e9),
            unit("T*GCU", &["teragcu"], 1e12),
            unit("P*GCU", &["petagcu"], 1e15),
        ],
        default: ("GCU", 1.0),
    },
];

impl UnitType {
    /// pprof's `sniffUnit`: lower case, one plural `s` dropped from names over two *bytes*
    /// (Go's `len`), so `μs` (three bytes) becomes `μ` and is not a unit, as in pprof.
    fn sniff(&self, unit: &str) -> Option<&'static Unit> {
        let lower = unit.to_lowercase();
        let name = if lower.len() > 2 {
            lower.strip_suffix('s').unwrap_or(&lower)
        } else {
            &lower
        };
        self.units.iter().find(|u| u.aliases.contains(&name))
    }

    /// pprof's `convertUnit`; `None` when `from` is not of this kind.
    fn convert<'a>(&self, value: i64, from: &str, to: &'a str) -> Option<(f64, &'a str)> {
        let from = self.sniff(from)?;
        let v = value as f64 * from.factor;
        if to == "minimum" || to == "auto" {
            // pprof's autoScale: the largest unit the value is at least one of.
            let mut best: Option<&Unit> = None;
            for u in self.units {
                if u.factor >= best.map_or(0.0, |b| b.factor) && v / u.factor >= 1.0 {
                    best = Some(u);
                }
            }
            return Some(match best {
                Some(u) => (v / u.factor, u.name),
                None => (v / self.default.1, self.default.0),
            });
        }
        Some(match self.sniff(to) {
            Some(u) => (v / u.factor, u.name),
            None => (v / self.default.1, self.default.0),
        })
    }
}

/// pprof's `measurement.Scale`: `value` in `from` units converted to `to` (`"minimum"` or
/// `"auto"`: the largest unit that keeps the value at least 1), and the unit it is then in
/// (empty for the uninteresting `count`, `sample`, ...; `to` when `from` is unknown).
pub fn scale<'a>(value: i64, from: &str, to: &'a str) -> (f64, &'a str) {
    // pprof scales the magnitude of a negative value and negates the result, which is what
    // IEEE arithmetic gives directly.
    for t in &UNIT_TYPES {
        if let Some(r) = t.convert(value, from, to) {
            return r;
        }
    }
    match to {
        "count" | "sample" | "unit" | "minimum" | "auto" => (value as f64, ""),
        _ => (value as f64, to),
    }
}

/// `value` (in `from` units) printed in `to` units with two decimals, trailing `.00`
/// dropped: `7.12s`, `170MB`, `1.50ms`, `0` (pprof's `ScaledLabel`).
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
        assert_eq!(label(1_500_000, "nanoseconds"), "1.50ms");
        assert_eq!(scale(1_000, "microseconds", "minimum").1, "ms");
    }

    #[test]
    fn units_convert_as_pprof_sniffs_them() {
        assert_eq!(scale(1536, "bytes", "kB"), (1.5, "kB"));
        assert_eq!(scale(-3, "seconds", "ms"), (-3000.0, "ms"));
        assert_eq!(scale(7, "count", "count"), (7.0, ""));
        assert_eq!(scale(7, "widgets", "kB"), (7.0, "kB"));
        assert_eq!(scale(1536, "bytes", "auto"), (1.5, "kB"));
        // A plural "s" goes from names over two bytes, as Go's len counts: "us" stays,
        // "μs" (three bytes) loses it and is no unit, in the filters and the views alike.
        assert_eq!(scale(2, "us", "ns"), (2000.0, "ns"));
        assert_eq!(scale(2, "μs", "ns"), (2.0, "ns"));
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
