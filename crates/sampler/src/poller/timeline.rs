//! The samples the poller moves into a timeline capture.

use super::*;

/// The poller's side of the samples it moves into a timeline capture.
#[cfg(feature = "capture")]
#[derive(Clone, Default)]
pub(crate) struct Timeline {
    /// Stack ids (key hashes) whose frames the capture has.
    defined: std::collections::HashSet<u64>,
    /// How many stacks the drain held when they were last looked through.
    scanned: usize,
    /// Samples waiting for their stack to be drained (taken between the table's drain and
    /// the log's).
    waiting: Vec<crate::table::TimedSample>,
    taken: Vec<crate::table::TimedSample>,
}

/// Moves the samples taken while a capture ran into it, in time order, after defining
/// their stacks (frames, leaf first). With `last`, samples whose stack is still unknown
/// are counted as lost rather than kept for a next pass.
#[cfg(feature = "capture")]
pub(crate) fn to_timeline(
    shared: &Shared,
    stacks: &HashMap<Key, Counts>,
    t: &mut Timeline,
    last: bool,
) {
    let lib = crate::library::get();
    t.taken.clear();
    t.taken.append(&mut t.waiting);
    shared.timeline.take(&mut t.taken);
    if t.taken.is_empty() {
        return;
    }
    // New stacks are looked for only when a sample needs one and the drain has taken new
    // keys since the last look (a sample can come before its key is drained).
    if stacks.len() != t.scanned && t.taken.iter().any(|x| !t.defined.contains(&x.stack)) {
        t.scanned = stacks.len();
        for k in stacks.keys() {
            let h = crate::table::key_hash(k);
            if t.defined.insert(h) {
                (lib.define_stack)(h, &k.frames);
            }
        }
    }
    t.taken.sort_by_key(|x| x.ticks);
    for x in t.taken.drain(..) {
        if t.defined.contains(&x.stack) {
            (lib.sample)(x.ticks, x.tid, x.stack);
        } else if last {
            shared.timeline.lost.fetch_add(1, Relaxed);
        } else {
            t.waiting.push(x);
        }
    }
}
