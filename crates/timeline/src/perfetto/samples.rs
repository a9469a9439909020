//! The CPU sampler's samples (a capture the sampler ran beside), on a sequence of their own:
//! `PerfSample`s whose `InternedData` holds their callstacks (root first), frames, function
//! names and one mapping, the program.

use std::collections::{HashMap, HashSet};

use super::fields::{field, SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE};
use crate::protobuf::Message;
use crate::tscap::Meta;

/// The sequence of the CPU sampler's samples (`PerfSample`s, with their callstacks
/// interned), apart from the threads' own: samples arrive later than their thread's events.
const SAMPLE_SEQUENCE: u64 = 0x7fff_0000;

/// What the samples' sequence has interned: function names (one frame each, its `rel_pc` its
/// own iid, so that no two names share a frame) and callstacks (by the capture's stack id).
pub(super) struct Samples {
    /// The program's name (the samples' mapping).
    program: String,
    pid: i64,
    /// The sequence has begun (its first packet clears its incremental state).
    begun: bool,
    functions: HashMap<String, u64>,
    callstacks: HashSet<u64>,
}

impl Samples {
    pub(super) fn new(program: String, pid: i64) -> Samples {
        Samples {
            program,
            pid,
            begun: false,
            functions: HashMap::new(),
            callstacks: HashSet::new(),
        }
    }

    /// The packet of a sample of thread `tid` (its OS id) with stack `stack`, at `ns`: its
    /// callstack, frames and function names interned on first use.
    pub(super) fn packet(&mut self, meta: &Meta, ns: u64, tid: u64, stack: u64) -> Message {
        let mut p = Message::new();
        p.uint(field::PACKET_TIMESTAMP, ns)
            .uint(field::PACKET_SEQUENCE_ID, SAMPLE_SEQUENCE);
        let first = !self.begun;
        self.begun = true;
        let mut interned = Message::new();
        if first {
            interned
                .message(field::INTERNED_MAPPING_PATHS, |s| {
                    s.uint(field::INTERNED_STRING_IID, 1)
                        .string(field::INTERNED_STRING_STR, &self.program);
                })
                .message(field::INTERNED_MAPPINGS, |m| {
                    m.uint(field::MAPPING_IID, 1)
                        .uint(field::MAPPING_PATH_STRING_IDS, 1);
                });
        }
        let stack = stack + 1;
        if self.callstacks.insert(stack) {
            let frames = meta.stack(stack - 1).unwrap_or_default();
            let mut ids = Vec::with_capacity(frames.len());
            // Root first: the capture lists them leaf first.
            for name in frames.iter().rev() {
                let next = self.functions.len() as u64 + 1;
                let (iid, new) = match self.functions.get(name) {
                    Some(&iid) => (iid, false),
                    None => {
                        self.functions.insert(name.clone(), next);
                        (next, true)
                    }
                };
                if new {
                    interned
                        .message(field::INTERNED_FUNCTION_NAMES, |s| {
                            s.uint(field::INTERNED_STRING_IID, iid)
                                .string(field::INTERNED_STRING_STR, name);
                        })
                        .message(field::INTERNED_FRAMES, |f| {
                            f.uint(field::FRAME_IID, iid)
                                .uint(field::FRAME_FUNCTION_NAME_ID, iid)
                                .uint(field::FRAME_MAPPING_ID, 1)
                                .uint(field::FRAME_REL_PC, iid);
                        });
                }
                ids.push(iid);
            }
            interned.message(field::INTERNED_CALLSTACKS, |c| {
                c.uint(field::CALLSTACK_IID, stack);
                for id in &ids {
                    c.uint(field::CALLSTACK_FRAME_IDS, *id);
                }
            });
        }
        p.uint(
            field::PACKET_SEQUENCE_FLAGS,
            if first {
                SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE
            } else {
                SEQ_NEEDS_INCREMENTAL_STATE
            },
        );
        if !interned.0.is_empty() {
            p.bytes(field::PACKET_INTERNED_DATA, &interned.0);
        }
        let pid = self.pid;
        p.message(field::PACKET_PERF_SAMPLE, |s| {
            s.uint(field::PERF_SAMPLE_CPU, 0)
                .int(field::PERF_SAMPLE_PID, pid)
                .uint(field::PERF_SAMPLE_TID, tid)
                .uint(field::PERF_SAMPLE_CALLSTACK_IID, stack);
        });
        p
    }
}
