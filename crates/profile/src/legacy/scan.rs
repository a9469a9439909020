//! Reading the text of a legacy profile as pprof's Go code reads it: lines, regexes compiled
//! once, Go's `strconv` number rules, address lists, and [`Scan`], the hand-written matcher
//! that gives what the regexes give on the lines that matter most.

use std::borrow::Cow;
use std::sync::OnceLock;

use regex::Regex;

/// A regex compiled once; the patterns are the readers' constants.
pub(super) fn regex(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("constant pattern compiles"))
}

/// A capture group's text ("" when it did not take part, as in Go).
pub(super) fn group<'t>(c: &regex::Captures<'t>, i: usize) -> &'t str {
    c.get(i).map_or("", |m| m.as_str())
}

/// Go's `bufio.Scanner` with `ScanLines`: lines split at `\n`, a trailing `\r` dropped, a last
/// line without `\n` kept; after the last line, the current text is empty.
pub(super) struct Lines<'a> {
    pub(super) data: &'a [u8],
    pub(super) pos: usize,
    pub(super) token: &'a [u8],
    /// 1-based number of the current line (0 before the first).
    pub(super) number: usize,
}

impl<'a> Lines<'a> {
    pub(super) fn new(data: &'a [u8]) -> Lines<'a> {
        Lines {
            data,
            pos: 0,
            token: &[],
            number: 0,
        }
    }

    /// Advances to the next line; false (and the text empty) at the end.
    pub(super) fn scan(&mut self) -> bool {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        if rest.is_empty() {
            self.token = &[];
            return false;
        }
        let mut end = 0;
        while end < rest.len() && rest[end] != b'\n' {
            end += 1;
        }
        let line = &rest[..end];
        self.token = line.strip_suffix(b"\r").unwrap_or(line);
        self.pos += (end + 1).min(rest.len());
        self.number += 1;
        true
    }

    /// The current line as text (invalid UTF-8 replaced, which Go's regexps treat alike).
    pub(super) fn text(&self) -> Cow<'a, str> {
        String::from_utf8_lossy(self.token)
    }

    /// The current line's number.
    pub(super) fn line_number(&self) -> usize {
        self.number
    }
}

/// Text from the file as quoted in an error message: at most 40 characters.
pub(super) fn excerpt(s: &str) -> Cow<'_, str> {
    match s.char_indices().nth(40) {
        Some((i, _)) => Cow::Owned(format!("{}...", &s[..i])),
        None => Cow::Borrowed(s),
    }
}

/// pprof's isSpaceOrComment.
pub(super) fn is_space_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

/// pprof's isMemoryMapSentinel.
pub(super) fn is_memory_map_sentinel(line: &str) -> bool {
    // Both contain an `M`; sample lines have none.
    line.contains('M')
        && (line.contains("--- Memory map: ---") || line.contains("MAPPED_LIBRARIES:"))
}

/// Go's `strconv.ParseUint` (base 0: `0x`, `0o`, `0b` and leading-`0` octal prefixes and
/// underscores between digits; otherwise only digits of `base`).
pub(super) fn go_parse_uint(s: &str, base: u32) -> Option<u64> {
    let b = s.as_bytes();
    let base0 = base == 0;
    let (radix, digits): (u64, &[u8]) = if base0 {
        match b {
            [] => return None,
            [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'b') => (2, &b[2..]),
            [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'o') => (8, &b[2..]),
            [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'x') => (16, &b[2..]),
            [b'0', rest @ ..] => (8, rest),
            _ => (10, b),
        }
    } else {
        if b.is_empty() {
            return None;
        }
        (u64::from(base), b)
    };
    let mut n: u64 = 0;
    let mut underscores = false;
    for &c in digits {
        let d = match c {
            b'_' if base0 => {
                underscores = true;
                continue;
            }
            b'0'..=b'9' => c - b'0',
            b'a'..=b'z' | b'A'..=b'Z' => c.to_ascii_lowercase() - b'a' + 10,
            _ => return None,
        };
        if u64::from(d) >= radix {
            return None;
        }
        n = n.checked_mul(radix)?.checked_add(u64::from(d))?;
    }
    if underscores && !underscores_ok(b) {
        return None;
    }
    Some(n)
}

/// Go's rule for underscores in base-0 literals: only between digits, or between a base
/// prefix and a digit.
pub(super) fn underscores_ok(s: &[u8]) -> bool {
    let s = match s {
        [b'+' | b'-', rest @ ..] => rest,
        _ => s,
    };
    // b'^': start, b'0': digit or prefix, b'_': underscore, b'!': anything else.
    let mut saw = b'^';
    let mut hex = false;
    let mut i = 0;
    if let [b'0', p, ..] = s {
        let p = p.to_ascii_lowercase();
        if matches!(p, b'b' | b'o' | b'x') {
            i = 2;
            saw = b'0';
            hex = p == b'x';
        }
    }
    for &c in s.get(i..).unwrap_or_default() {
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}

/// Go's `strconv.ParseInt(s, base, 64)`.
pub(super) fn go_parse_int(s: &str, base: u32) -> Option<i64> {
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    let u = go_parse_uint(digits, base)?;
    if neg {
        if u > 1 << 63 {
            return None;
        }
        Some((u as i64).wrapping_neg())
    } else {
        i64::try_from(u).ok()
    }
}

/// Go's float64 to int64 conversion as amd64 does it: out of range or NaN gives the most
/// negative value.
pub(super) fn go_f64_to_i64(x: f64) -> i64 {
    // -2^63 and 2^63, exactly.
    let (low, high) = (i64::MIN as f64, -(i64::MIN as f64));
    if x.is_nan() || !(low..high).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

/// pprof's parseHexAddresses: every `0x[0-9a-f]+` in `s` (leftmost, longest, not
/// overlapping, as the regex finds them); `Err` names one over 64 bits.
pub(super) fn parse_hex_addresses(s: &str) -> Result<Vec<u64>, String> {
    let is_hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(rest) = bytes.get(i..) {
        if rest.len() < 3 {
            break;
        }
        if rest.starts_with(b"0x") && rest.get(2).is_some_and(|&b| is_hex(b)) {
            let mut digits = 1;
            while rest.get(2 + digits).is_some_and(|&b| is_hex(b)) {
                digits += 1;
            }
            // ASCII from `i` on: the slice is at character boundaries.
            let number = s.get(i..i + 2 + digits).unwrap_or_default();
            match go_parse_uint(number, 0) {
                Some(a) => out.push(a),
                None => return Err(format!("address {} is over 64 bits", excerpt(number))),
            }
            i += 2 + digits;
        } else {
            i += 1;
        }
    }
    Ok(out)
}

/// A cursor for matching a line the way a regex without ambiguity would: each step takes
/// the longest run it can. Readers use it for the usual shape of a line and fall back to the
/// regex when it fails (the regex then decides), so results equal the regex's.
pub(super) struct Scan<'a> {
    pub(super) s: &'a str,
    pub(super) i: usize,
}

impl<'a> Scan<'a> {
    pub(super) fn new(s: &'a str) -> Scan<'a> {
        Scan { s, i: 0 }
    }

    /// The longest run of ASCII bytes `f` accepts (possibly empty).
    pub(super) fn run(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.i;
        let bytes = self.s.as_bytes();
        while let Some(&b) = bytes.get(self.i) {
            if !(b.is_ascii() && f(b)) {
                break;
            }
            self.i += 1;
        }
        self.s.get(start..self.i).unwrap_or_default()
    }

    /// As `run`, but at least one byte.
    pub(super) fn run1(&mut self, f: impl Fn(u8) -> bool) -> Option<&'a str> {
        let r = self.run(f);
        (!r.is_empty()).then_some(r)
    }

    /// `-?[0-9]+`.
    pub(super) fn signed_digits(&mut self) -> Option<&'a str> {
        let start = self.i;
        if self.s.as_bytes().get(start) == Some(&b'-') {
            self.i += 1;
        }
        self.run1(|b| b.is_ascii_digit())?;
        self.s.get(start..self.i)
    }

    pub(super) fn digits(&mut self) -> Option<&'a str> {
        self.run1(|b| b.is_ascii_digit())
    }

    pub(super) fn spaces(&mut self) -> &'a str {
        self.run(|b| b == b' ')
    }

    pub(super) fn literal(&mut self, lit: &str) -> Option<()> {
        let rest = self.s.get(self.i..)?;
        rest.starts_with(lit).then(|| self.i += lit.len())
    }

    /// The rest of the line.
    pub(super) fn rest(&mut self) -> &'a str {
        let r = self.s.get(self.i..).unwrap_or_default();
        self.i = self.s.len();
        r
    }
}

/// `[ x0-9a-f]`: the characters of a sample line's address list.
pub(super) fn is_address_list_byte(b: u8) -> bool {
    b == b' ' || b == b'x' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// Go's `\s`.
pub(super) fn is_go_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}
