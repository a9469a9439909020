//! The trace being written: packets framed and gathered in batches, each deflated into one
//! `compressed_packets`; a sequence per thread, with its incremental clock and the scope names
//! it has interned; track events written straight into the batch.

use std::io::{self, Write};

use flate2::write::ZlibEncoder;
use flate2::Compression;

use super::fields::{field, SEQ_NEEDS_INCREMENTAL_STATE};
use crate::protobuf::{varint, Message};
use crate::tscap::IdIndex;

/// The sequence of the process and counter descriptors; threads' sequences follow.
pub(super) const PROCESS_SEQUENCE: u64 = 1;
/// Raw bytes of packets deflated into one `compressed_packets`.
const BATCH: usize = 1 << 20;

/// Appends a packet to a `Trace`: field 1, length-delimited.
fn frame(out: &mut Vec<u8>, packet: &[u8]) {
    varint(out, (field::TRACE_PACKET as u64) << 3 | 2);
    varint(out, packet.len() as u64);
    out.extend_from_slice(packet);
}

/// A field key byte (every field number used on the hot path is below 16).
pub(super) const fn key(field: u32, wire: u8) -> u8 {
    ((field as u8) << 3) | wire
}

/// One thread's sequence.
struct Seq {
    id: u64,
    /// The last timestamp written on it (its incremental clock's value).
    last: u64,
    /// Scope ids whose names this sequence has interned (iid = id + 1).
    interned: Interned,
}

/// A set of scope ids: flat for the small ids most programs have, hashed past them (a
/// capture of many threads each using one large id must not cost a flat table each).
#[derive(Default)]
struct Interned {
    dense: Vec<bool>,
    sparse: std::collections::HashSet<u64>,
}

/// Ids below this are kept flat.
const DENSE: u64 = 1024;

impl Interned {
    #[inline]
    fn contains(&self, id: u64) -> bool {
        if id < DENSE {
            self.dense.get(id as usize) == Some(&true)
        } else {
            self.sparse.contains(&id)
        }
    }

    /// Adds `id`; false if it was there.
    fn insert(&mut self, id: u64) -> bool {
        if id < DENSE {
            let i = id as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, false);
            }
            !std::mem::replace(&mut self.dense[i], true)
        } else {
            self.sparse.insert(id)
        }
    }
}

/// The trace's output, and its threads' sequences.
pub(super) struct Trace<W: Write> {
    out: W,
    /// Framed packets not yet deflated.
    batch: Vec<u8>,
    /// Scratch for a track event.
    pub(super) event: Vec<u8>,
    compressed: Vec<u8>,
    /// Thread index to its sequence's place in `seqs` (their order of first appearance).
    threads: IdIndex,
    seqs: Vec<Seq>,
    /// The latest timestamp written (for the closing note).
    pub(super) last_ns: u64,
}

impl<W: Write> Trace<W> {
    pub(super) fn new(out: W) -> Trace<W> {
        Trace {
            out,
            batch: Vec::with_capacity(BATCH + (64 << 10)),
            event: Vec::new(),
            compressed: Vec::new(),
            threads: IdIndex::default(),
            seqs: Vec::new(),
            last_ns: 0,
        }
    }

    /// Gives thread `thread` a sequence of its own on its first appearance: its place among
    /// the threads and its sequence id (`None` if it has one already).
    pub(super) fn add_thread(&mut self, thread: u64) -> Option<(u32, u64)> {
        let (ord, new) = self.threads.get_or_insert(thread);
        if !new {
            return None;
        }
        let id = PROCESS_SEQUENCE + 1 + ord as u64;
        self.seqs.push(Seq {
            id,
            last: 0,
            interned: Interned::default(),
        });
        Some((ord, id))
    }

    /// Returns true if and only if thread `thread`'s sequence has interned scope `id`'s name.
    pub(super) fn interned(&self, thread: u64, id: u64) -> bool {
        self.seqs[self.seq(thread)].interned.contains(id)
    }

    /// The last timestamp written on thread `thread`'s sequence.
    pub(super) fn last(&self, thread: u64) -> u64 {
        self.seqs[self.seq(thread)].last
    }

    /// Appends a whole packet (its fields in `p`) to the batch.
    fn put(&mut self, p: &[u8]) -> io::Result<()> {
        frame(&mut self.batch, p);
        if self.batch.len() >= BATCH {
            self.deflate()?;
        }
        Ok(())
    }

    /// Writes the batch as one `compressed_packets` packet.
    fn deflate(&mut self) -> io::Result<()> {
        if self.batch.is_empty() {
            return Ok(());
        }
        self.compressed.clear();
        let mut z = ZlibEncoder::new(std::mem::take(&mut self.compressed), Compression::fast());
        z.write_all(&self.batch)?;
        let body = z.finish()?;
        let mut head = Vec::with_capacity(16);
        varint(&mut head, (field::TRACE_PACKET as u64) << 3 | 2);
        let mut inner_key = Vec::with_capacity(8);
        varint(&mut inner_key, (field::PACKET_COMPRESSED as u64) << 3 | 2);
        varint(&mut inner_key, body.len() as u64);
        varint(&mut head, (inner_key.len() + body.len()) as u64);
        self.out.write_all(&head)?;
        self.out.write_all(&inner_key)?;
        self.out.write_all(&body)?;
        self.compressed = body;
        self.batch.clear();
        Ok(())
    }

    fn seq(&self, thread: u64) -> usize {
        self.threads.get(thread).unwrap_or(0) as usize
    }

    /// A track event on thread `thread`'s sequence at `ns` (never before the sequence's
    /// previous one): the packet's fields around the event's (in `self.event`), with its
    /// name interned first when `name` is new there. Written straight into the batch.
    pub(super) fn track_event(
        &mut self,
        thread: u64,
        ns: u64,
        name: Option<(u64, &str)>,
    ) -> io::Result<()> {
        let k = self.seq(thread);
        let seq = &mut self.seqs[k];
        let delta = ns.saturating_sub(seq.last);
        seq.last = seq.last.max(ns);
        let b = &mut self.batch;
        b.push(key(field::TRACE_PACKET, 2));
        // The packet's length, patched below (one byte unless the packet is long).
        let at = b.len();
        b.push(0);
        b.push(key(field::PACKET_TIMESTAMP, 0));
        varint(b, delta);
        b.push(key(field::PACKET_SEQUENCE_ID, 0));
        varint(b, seq.id);
        b.push(key(field::PACKET_SEQUENCE_FLAGS, 0));
        b.push(SEQ_NEEDS_INCREMENTAL_STATE as u8);
        if let Some((id, text)) = name {
            if seq.interned.insert(id) {
                let mut m = Message::new();
                m.message(field::INTERNED_EVENT_NAMES, |n| {
                    n.uint(field::EVENT_NAME_IID, id + 1)
                        .string(field::EVENT_NAME_NAME, text);
                });
                b.push(key(field::PACKET_INTERNED_DATA, 2));
                varint(b, m.0.len() as u64);
                b.extend_from_slice(&m.0);
            }
        }
        b.push(key(field::PACKET_TRACK_EVENT, 2));
        match self.event.as_slice() {
            // A slice's begin or end, written without a copy call.
            &[t, k] => b.extend_from_slice(&[2, t, k]),
            &[t, k, n, i] => b.extend_from_slice(&[4, t, k, n, i]),
            e => {
                varint(b, e.len() as u64);
                b.extend_from_slice(e);
            }
        }
        let len = b.len() - at - 1;
        if len < 0x80 {
            b[at] = len as u8;
        } else {
            // A long packet (a long message): its length takes more bytes.
            let body = b.split_off(at + 1);
            b.truncate(at);
            varint(b, body.len() as u64);
            b.extend_from_slice(&body);
        }
        self.last_ns = self.last_ns.max(ns);
        if self.batch.len() >= BATCH {
            self.deflate()?;
        }
        Ok(())
    }

    /// A packet on the process's sequence.
    pub(super) fn process_packet(&mut self, p: &Message) -> io::Result<()> {
        self.put(&p.0)
    }

    /// Writes the last batch and flushes the output.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        self.deflate()?;
        self.out.flush()
    }
}
