//! A minimal protobuf encoder: varints, fixed64 doubles, length-delimited fields and nested
//! messages (written into a scratch buffer, then length-prefixed).

/// Wire types.
const VARINT: u64 = 0;
const FIXED64: u64 = 1;
const LEN: u64 = 2;

/// A message being encoded.
#[derive(Default)]
pub(crate) struct Message(pub Vec<u8>);

#[inline]
pub(crate) fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl Message {
    pub(crate) fn new() -> Message {
        Message(Vec::new())
    }

    fn key(&mut self, field: u32, wire: u64) {
        varint(&mut self.0, (field as u64) << 3 | wire);
    }

    /// An unsigned (or bool, or enum) field.
    pub(crate) fn uint(&mut self, field: u32, v: u64) -> &mut Self {
        self.key(field, VARINT);
        varint(&mut self.0, v);
        self
    }

    /// An `int32`/`int64` field (two's complement, as protobuf does for negative values).
    pub(crate) fn int(&mut self, field: u32, v: i64) -> &mut Self {
        self.uint(field, v as u64)
    }

    /// A `double` field.
    pub(crate) fn double(&mut self, field: u32, v: f64) -> &mut Self {
        self.key(field, FIXED64);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// A `bytes`, `string` or embedded message field.
    pub(crate) fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        self.key(field, LEN);
        varint(&mut self.0, b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    pub(crate) fn string(&mut self, field: u32, s: &str) -> &mut Self {
        self.bytes(field, s.as_bytes())
    }

    /// An embedded message built by `f`.
    pub(crate) fn message(&mut self, field: u32, f: impl FnOnce(&mut Message)) -> &mut Self {
        let mut m = Message::new();
        f(&mut m);
        self.bytes(field, &m.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_encode_as_protobuf_does() {
        let mut m = Message::new();
        m.uint(1, 150);
        assert_eq!(m.0, [0x08, 0x96, 0x01]);
        let mut m = Message::new();
        m.string(2, "testing");
        assert_eq!(m.0, b"\x12\x07testing");
        let mut m = Message::new();
        m.int(3, -1);
        assert_eq!(m.0.len(), 11);
        let mut m = Message::new();
        m.message(3, |n| {
            n.uint(1, 150);
        });
        assert_eq!(m.0, [0x1a, 0x03, 0x08, 0x96, 0x01]);
        let mut m = Message::new();
        m.double(44, 1.5);
        assert_eq!(&m.0[..2], &[0xe1, 0x02]);
        assert_eq!(&m.0[2..], &1.5f64.to_le_bytes());
    }
}
