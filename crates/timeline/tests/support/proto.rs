//! A minimal protobuf decoder, to check the Perfetto export structurally: wire types 0, 1, 2
//! and 5, fields in order, nothing assumed about the schema.

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Varint(u64),
    Fixed64(u64),
    Bytes(Vec<u8>),
    Fixed32(u32),
}

/// A decoded message: its fields in order.
#[derive(Clone, Debug, Default)]
pub struct Msg(pub Vec<(u32, Value)>);

fn varint(b: &[u8], pos: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for i in 0..10 {
        let byte = *b.get(*pos).ok_or("varint runs off the end")?;
        *pos += 1;
        v |= ((byte & 0x7f) as u64) << (7 * i);
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err("varint longer than 10 bytes".into())
}

impl Msg {
    pub fn parse(b: &[u8]) -> Result<Msg, String> {
        let mut pos = 0;
        let mut fields = Vec::new();
        while pos < b.len() {
            let key = varint(b, &mut pos)?;
            let (field, wire) = ((key >> 3) as u32, key & 7);
            if field == 0 {
                return Err(format!("field number 0 at {pos}"));
            }
            let v = match wire {
                0 => Value::Varint(varint(b, &mut pos)?),
                1 => {
                    let s = b.get(pos..pos + 8).ok_or("fixed64 runs off the end")?;
                    pos += 8;
                    Value::Fixed64(u64::from_le_bytes(s.try_into().unwrap()))
                }
                2 => {
                    let len = varint(b, &mut pos)? as usize;
                    let s = b.get(pos..pos + len).ok_or("bytes run off the end")?;
                    pos += len;
                    Value::Bytes(s.to_vec())
                }
                5 => {
                    let s = b.get(pos..pos + 4).ok_or("fixed32 runs off the end")?;
                    pos += 4;
                    Value::Fixed32(u32::from_le_bytes(s.try_into().unwrap()))
                }
                w => return Err(format!("wire type {w} at {pos}")),
            };
            fields.push((field, v));
        }
        Ok(Msg(fields))
    }

    pub fn all(&self, field: u32) -> impl Iterator<Item = &Value> {
        self.0
            .iter()
            .filter(move |(f, _)| *f == field)
            .map(|(_, v)| v)
    }

    pub fn uint(&self, field: u32) -> Option<u64> {
        self.all(field).last().and_then(|v| match v {
            Value::Varint(x) => Some(*x),
            _ => None,
        })
    }

    pub fn double(&self, field: u32) -> Option<f64> {
        self.all(field).last().and_then(|v| match v {
            Value::Fixed64(x) => Some(f64::from_bits(*x)),
            _ => None,
        })
    }

    pub fn bytes(&self, field: u32) -> Option<&[u8]> {
        self.all(field).last().and_then(|v| match v {
            Value::Bytes(x) => Some(&x[..]),
            _ => None,
        })
    }

    pub fn string(&self, field: u32) -> Option<String> {
        self.bytes(field)
            .map(|b| String::from_utf8(b.to_vec()).expect("UTF-8 string field"))
    }

    pub fn msg(&self, field: u32) -> Option<Msg> {
        self.bytes(field)
            .map(|b| Msg::parse(b).expect("embedded message"))
    }

    pub fn msgs(&self, field: u32) -> Vec<Msg> {
        self.all(field)
            .filter_map(|v| match v {
                Value::Bytes(b) => Some(Msg::parse(b).expect("embedded message")),
                _ => None,
            })
            .collect()
    }
}
