//! profile.proto's wire format: a bounds-checked cursor over a message's fields, and the
//! top level of a message read from a stream one field at a time.

use std::io::{BufRead, BufReader, Read};

use crate::error::ErrorKind;

pub(super) type Result<T> = std::result::Result<T, ErrorKind>;

/// A wire-format problem at byte `offset` of the message.
pub(super) fn malformed(offset: usize, what: impl Into<String>) -> ErrorKind {
    ErrorKind::Malformed {
        format: "pprof",
        offset: offset as u64,
        what: what.into(),
    }
}

/// A protobuf cursor over a message's bytes; `base` is the message's offset in the file, for
/// error messages.
pub(super) struct Cursor<'a> {
    pub(super) data: &'a [u8],
    pub(super) pos: usize,
    pub(super) base: usize,
}

/// A field's value, by wire type.
pub(super) enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8], usize),
    Fixed,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(data: &'a [u8], base: usize) -> Cursor<'a> {
        Cursor { data, pos: 0, base }
    }

    pub(super) fn at(&self) -> usize {
        self.base + self.pos
    }

    pub(super) fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub(super) fn varint(&mut self) -> Result<u64> {
        let start = self.at();
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(&b) = self.data.get(self.pos) else {
                return Err(malformed(start, "varint runs past the end of its message"));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(malformed(start, "varint over 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(malformed(start, "varint longer than 10 bytes"))
    }

    /// The next field: (number, value).
    pub(super) fn field(&mut self) -> Result<(u64, Value<'a>)> {
        let start = self.at();
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 {
            return Err(malformed(start, "field number 0"));
        }
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.fixed(8, start)?;
                Value::Fixed
            }
            2 => {
                let len_at = self.at();
                let len = self.varint()?;
                let remain = (self.data.len() - self.pos) as u64;
                if len > remain {
                    return Err(malformed(
                        len_at,
                        format!(
                            "field {number} claims {len} bytes but its message has {remain} left"
                        ),
                    ));
                }
                let off = self.at();
                let bytes = &self.data[self.pos..self.pos + len as usize];
                self.pos += len as usize;
                Value::Bytes(bytes, off)
            }
            5 => {
                self.fixed(4, start)?;
                Value::Fixed
            }
            t => {
                return Err(malformed(
                    start,
                    format!("field {number} has unsupported wire type {t}"),
                ))
            }
        };
        Ok((number, value))
    }

    pub(super) fn fixed(&mut self, n: usize, start: usize) -> Result<u64> {
        if self.data.len() - self.pos < n {
            return Err(malformed(start, "fixed-width field runs past the end"));
        }
        let mut v = 0u64;
        for i in 0..n {
            v |= u64::from(self.data[self.pos + i]) << (8 * i);
        }
        self.pos += n;
        Ok(v)
    }
}

/// Appends a repeated integer field's values, packed or not.
pub(super) fn push_repeated(
    v: Value<'_>,
    number: u64,
    at: usize,
    out: &mut Vec<u64>,
) -> Result<()> {
    match v {
        Value::Varint(x) => out.push(x),
        Value::Bytes(b, off) => {
            let mut c = Cursor::new(b, off);
            // Exactly as many as there are varints (each ends with a byte below 0x80).
            out.reserve(b.iter().filter(|&&x| x < 0x80).count());
            while !c.done() {
                out.push(c.varint()?);
            }
        }
        Value::Fixed => {
            return Err(malformed(
                at,
                format!("field {number}: fixed-width integer"),
            ));
        }
    }
    Ok(())
}

pub(super) fn varint_of(v: Value<'_>, number: u64, at: usize) -> Result<u64> {
    match v {
        Value::Varint(x) => Ok(x),
        _ => Err(malformed(at, format!("field {number} should be a varint"))),
    }
}

pub(super) fn bytes_of<'a>(v: Value<'a>, number: u64, at: usize) -> Result<(&'a [u8], usize)> {
    match v {
        Value::Bytes(b, off) => Ok((b, off)),
        _ => Err(malformed(
            at,
            format!("field {number} should be length-delimited"),
        )),
    }
}

/// Opens the (decompressed) message from its first byte, each time it is called: the decoder
/// reads it twice rather than holding it.
pub(crate) type Open<'a> = dyn Fn() -> std::io::Result<Box<dyn Read + 'a>> + 'a;

/// The top level of a message read from a stream, one field at a time: only the field being
/// decoded is held in memory.
pub(super) struct Stream<'a> {
    pub(super) r: BufReader<Box<dyn Read + 'a>>,
    pub(super) pos: u64,
    pub(super) limit: u64,
    pub(super) gz: bool,
}

impl<'a> Stream<'a> {
    pub(super) fn open(open: &Open<'a>, gz: bool, limit: u64) -> Result<Stream<'a>> {
        let r = open().map_err(|e| read_error(&e, gz))?;
        // One byte past the limit is enough to know it is exceeded: no read, however long a
        // field claims to be, brings in more.
        let r: Box<dyn Read + 'a> = Box::new(r.take(limit.saturating_add(1)));
        Ok(Stream {
            r: BufReader::with_capacity(1 << 16, r),
            pos: 0,
            limit,
            gz,
        })
    }

    pub(super) fn advance(&mut self, n: u64) -> Result<()> {
        self.pos += n;
        if self.pos > self.limit {
            return Err(ErrorKind::TooLarge { limit: self.limit });
        }
        Ok(())
    }

    /// The next byte, `None` at the end.
    pub(super) fn byte(&mut self) -> Result<Option<u8>> {
        let gz = self.gz;
        let b = match self.r.fill_buf() {
            Ok(buf) => buf.first().copied(),
            Err(e) => return Err(read_error(&e, gz)),
        };
        if b.is_some() {
            self.r.consume(1);
            self.advance(1)?;
        }
        Ok(b)
    }

    /// A varint; `None` when the stream ends before its first byte.
    pub(super) fn varint(&mut self) -> Result<Option<u64>> {
        let start = self.pos as usize;
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(b) = self.byte()? else {
                if shift == 0 {
                    return Ok(None);
                }
                return Err(malformed(start, "varint runs past the end of the data"));
            };
            if shift == 63 && b > 1 {
                return Err(malformed(start, "varint over 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(Some(v));
            }
        }
        Err(malformed(start, "varint longer than 10 bytes"))
    }

    /// The next top-level field: (number, value). A length-delimited field's bytes are read
    /// into `buf` when `keep(number)`, else skipped (and given as empty bytes).
    pub(super) fn field<'b>(
        &mut self,
        buf: &'b mut Vec<u8>,
        keep: impl Fn(u64) -> bool,
    ) -> Result<Option<(u64, Value<'b>)>> {
        let start = self.pos as usize;
        let Some(key) = self.varint()? else {
            return Ok(None);
        };
        let number = key >> 3;
        if number == 0 {
            return Err(malformed(start, "field number 0"));
        }
        let value = match key & 7 {
            0 => match self.varint()? {
                Some(v) => Value::Varint(v),
                None => return Err(malformed(start, "field without a value at the end")),
            },
            t @ (1 | 5) => {
                let n = if t == 1 { 8 } else { 4 };
                for _ in 0..n {
                    if self.byte()?.is_none() {
                        return Err(malformed(start, "fixed-width field runs past the end"));
                    }
                }
                Value::Fixed
            }
            2 => {
                let len_at = self.pos as usize;
                let Some(len) = self.varint()? else {
                    return Err(malformed(len_at, "length runs past the end"));
                };
                let off = self.pos as usize;
                // Bytes are read as they arrive, never allocated from the claimed length.
                let mut take = (&mut self.r).take(len);
                buf.clear();
                let got = if keep(number) {
                    take.read_to_end(buf)
                } else {
                    std::io::copy(&mut take, &mut std::io::sink()).map(|n| n as usize)
                }
                .map_err(|e| read_error(&e, self.gz))? as u64;
                self.advance(got)?;
                if got < len {
                    return Err(malformed(
                        len_at,
                        format!("field {number} claims {len} bytes but only {got} remain"),
                    ));
                }
                Value::Bytes(buf, off)
            }
            t => {
                return Err(malformed(
                    start,
                    format!("field {number} has unsupported wire type {t}"),
                ))
            }
        };
        Ok(Some((number, value)))
    }
}

/// A read error: the decompressor's message for gzip data, else an I/O error.
pub(crate) fn read_error(e: &std::io::Error, gz: bool) -> ErrorKind {
    if gz {
        ErrorKind::Decompress {
            detail: e.to_string(),
        }
    } else {
        ErrorKind::Io
    }
}

/// Number of varints in packed bytes (each ends with a byte below 0x80).
pub(super) fn packed_len(v: &Value<'_>) -> usize {
    match v {
        Value::Bytes(b, _) => b.iter().filter(|&&x| x < 0x80).count(),
        _ => 1,
    }
}
