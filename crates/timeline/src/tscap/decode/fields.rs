//! A payload's fields: unsigned LEB128 varints (checked, and a fast path for streams
//! already validated), zigzag, and [`Cur`], a reading position in a payload whose every read
//! says which byte is wrong and why.

use tickscope_fmt::tscap::MAX_STRING;

use crate::tscap::error::Problem;

/// A payload problem and the payload byte where it is.
pub(crate) type PResult<T> = Result<T, (usize, Problem)>;

pub(crate) enum VarintError {
    /// Runs off the end of the buffer.
    Eof,
    /// More than 10 bytes, or over 64 bits.
    Bad,
}

/// Reads an unsigned LEB128 varint at `*pos`, advancing past it.
#[inline]
pub(crate) fn varint_at(b: &[u8], pos: &mut usize) -> Result<u64, VarintError> {
    let mut v = 0u64;
    let mut i = *pos;
    let mut shift = 0u32;
    loop {
        let Some(&byte) = b.get(i) else {
            return Err(VarintError::Eof);
        };
        i += 1;
        if shift == 63 {
            // The tenth byte holds bit 63 only, and must end the varint.
            if byte > 1 {
                return Err(VarintError::Bad);
            }
            *pos = i;
            return Ok(v | (byte as u64) << 63);
        }
        v |= ((byte & 0x7f) as u64) << shift;
        if byte < 0x80 {
            *pos = i;
            return Ok(v);
        }
        shift += 7;
    }
}

/// [`varint_at`] for streams already validated: the one-byte case inline, no error path
/// (a failure, which validation rules out, reads as 0 without advancing).
#[inline(always)]
pub(super) fn fast_varint(b: &[u8], pos: &mut usize) -> u64 {
    if let Some(&x) = b.get(*pos) {
        if x < 0x80 {
            *pos += 1;
            return x as u64;
        }
    }
    varint_at(b, pos).unwrap_or(0)
}

#[inline(always)]
pub(super) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A reading position in a payload, for the records' fields.
pub(crate) struct Cur<'a> {
    pub(super) b: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Cur<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Cur<'a> {
        Cur { b, pos: 0 }
    }

    pub(super) fn remain(&self) -> usize {
        self.b.len() - self.pos
    }

    pub(super) fn varint(&mut self, field: &'static str) -> PResult<u64> {
        let at = self.pos;
        varint_at(self.b, &mut self.pos).map_err(|e| match e {
            VarintError::Eof => (at, Problem::Truncated { field }),
            VarintError::Bad => (at, Problem::BadVarint),
        })
    }

    pub(super) fn u8(&mut self, field: &'static str) -> PResult<u8> {
        match self.b.get(self.pos) {
            Some(&v) => {
                self.pos += 1;
                Ok(v)
            }
            None => Err((self.pos, Problem::Truncated { field })),
        }
    }

    pub(super) fn f64(&mut self, field: &'static str) -> PResult<f64> {
        match self.b.get(self.pos..self.pos + 8) {
            Some(s) => {
                self.pos += 8;
                Ok(f64::from_le_bytes(s.try_into().expect("8 bytes")))
            }
            None => Err((self.pos, Problem::Truncated { field })),
        }
    }

    /// A clock rate: a positive finite f64.
    pub(super) fn rate(&mut self) -> PResult<f64> {
        let at = self.pos;
        let v = self.f64("ticks_per_second")?;
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err((at, Problem::BadRate { value: v }))
        }
    }

    pub(super) fn string(&mut self, field: &'static str) -> PResult<&'a str> {
        let at = self.pos;
        let len = self.varint(field)?;
        if len > MAX_STRING as u64 {
            return Err((at, Problem::StringTooLong { len }));
        }
        if len > self.remain() as u64 {
            return Err((
                at,
                Problem::StringBeyondPayload {
                    len,
                    remain: self.remain() as u64,
                },
            ));
        }
        let bytes = &self.b[self.pos..self.pos + len as usize];
        let s = std::str::from_utf8(bytes).map_err(|_| (at, Problem::NotUtf8))?;
        self.pos += len as usize;
        Ok(s)
    }

    pub(super) fn finish(&self) -> PResult<()> {
        if self.remain() == 0 {
            Ok(())
        } else {
            Err((
                self.pos,
                Problem::Trailing {
                    bytes: self.remain() as u64,
                },
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(bytes: &[u8]) -> Result<(u64, usize), &'static str> {
        let mut pos = 0;
        match varint_at(bytes, &mut pos) {
            Ok(x) => Ok((x, pos)),
            Err(VarintError::Eof) => Err("eof"),
            Err(VarintError::Bad) => Err("bad"),
        }
    }

    #[test]
    fn varints_decode_and_reject_overlong_or_overflowing_ones() {
        assert_eq!(v(&[0]), Ok((0, 1)));
        assert_eq!(v(&[0x7f]), Ok((127, 1)));
        assert_eq!(v(&[0x80, 0x01]), Ok((128, 2)));
        assert_eq!(v(&[0xac, 0x02, 0xff]), Ok((300, 2)));
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(v(&max), Ok((u64::MAX, 10)));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(v(&over), Err("bad"));
        assert_eq!(v(&[0x80; 11]), Err("bad"));
        assert_eq!(v(&[0x80, 0x80]), Err("eof"));
        assert_eq!(v(&[]), Err("eof"));
    }

    #[test]
    fn zigzag_round_trips() {
        for x in [0i64, 1, -1, 2, -2, i64::MAX, i64::MIN, 12345, -98765] {
            let z = ((x << 1) ^ (x >> 63)) as u64;
            assert_eq!(unzigzag(z), x);
        }
    }

    #[test]
    fn strings_are_bounded_by_the_limit_and_the_payload() {
        let mut c = Cur::new(&[3, b'a', b'b']);
        assert_eq!(
            c.string("s"),
            Err((0, Problem::StringBeyondPayload { len: 3, remain: 2 }))
        );
        let mut c = Cur::new(&[0xff, 0xff, 0x04]);
        assert_eq!(
            c.string("s"),
            Err((0, Problem::StringTooLong { len: 81_919 }))
        );
        let mut c = Cur::new(&[2, 0xff, 0xfe]);
        assert_eq!(c.string("s"), Err((0, Problem::NotUtf8)));
    }
}
