//! Frame marks, counters and messages (`frame!`, `plot!`, `message!`): their call sites'
//! static state ([`Marker`]) and how each is recorded into the calling thread's ring.

use super::*;

/// Frame and counter names, indexed by marker id - 1.
static MARKERS: Mutex<Vec<(&'static str, u8)>> = Mutex::new(Vec::new());

pub(super) fn markers() -> Vec<(&'static str, u8)> {
    MARKERS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The static state of one `frame!` or `plot!` call site. Not a stable API.
#[doc(hidden)]
pub struct Marker {
    name: &'static str,
    kind: u8,
    id: AtomicU32,
}

impl Marker {
    /// A frame marker.
    pub const fn frame(name: &'static str) -> Marker {
        Marker {
            name,
            kind: 0,
            id: AtomicU32::new(0),
        }
    }

    /// A counter.
    pub const fn counter(name: &'static str) -> Marker {
        Marker {
            name,
            kind: 1,
            id: AtomicU32::new(0),
        }
    }

    #[inline]
    fn id(&'static self) -> u32 {
        let id = self.id.load(Relaxed);
        if id != 0 {
            id
        } else {
            self.register()
        }
    }

    #[cold]
    #[inline(never)]
    fn register(&'static self) -> u32 {
        let mut m = MARKERS.lock().unwrap_or_else(|p| p.into_inner());
        let id = self.id.load(Relaxed);
        if id != 0 {
            return id;
        }
        // Markers with the same name and kind share an id: one counter track, one frame kind.
        let id = match m
            .iter()
            .position(|&(n, k)| n == self.name && k == self.kind)
        {
            Some(i) => i as u32 + 1,
            None => {
                m.push((self.name, self.kind));
                m.len() as u32
            }
        };
        self.id.store(id, Relaxed);
        id
    }
}

/// `frame!`: a frame mark. Not a stable API.
#[doc(hidden)]
#[inline]
pub fn frame(m: &'static Marker) {
    if crate::state::capturing() {
        ring::push_group(
            &[(
                crate::clock::now(),
                format::event::FRAME as u64 | (m.id() as u64) << 8,
            )],
            crate::scope::open_depth(),
        );
    }
}

/// `plot!`: a counter value. The macro has checked `capturing()` (so that the value is only
/// evaluated while a capture runs). Not a stable API.
#[doc(hidden)]
#[inline]
pub fn plot(m: &'static Marker, value: f64) {
    ring::push_group(&counter(m.id(), value), crate::scope::open_depth());
}

/// A value of counter `id` now, as its records.
#[inline]
fn counter(id: u32, value: f64) -> [(u64, u64); 2] {
    let t = crate::clock::now();
    [
        (t, format::event::COUNTER as u64 | (id as u64) << 8),
        (value.to_bits(), 0),
    ]
}

/// The heap profiler's estimate of the bytes in use (where `tickscope::alloc::Profiled` is
/// the global allocator): a counter that moves at each sampled block's allocation and free.
#[cfg(feature = "sampler")]
static HEAP_IN_USE: Marker = Marker::counter("heap in use (sampled estimate)");

/// The running capture records [`HEAP_IN_USE`] ([`Builder::heap_counter`]).
static HEAP_ON: AtomicBool = AtomicBool::new(false);

/// The library's `heap_in_use` for the sampler: the estimate moved to `bytes`. Recorded
/// only once the counter is registered (at the capture's start, [`heap_at_start`]), and only
/// by a thread that records in the capture already: registering the counter or the thread's
/// ring takes a lock that the code allocating under it may hold (the collector's list of
/// rings, cloned under its lock, did: a deadlock).
#[cfg(feature = "sampler")]
pub(crate) fn heap_in_use(bytes: f64) {
    let id = HEAP_IN_USE.id.load(Relaxed);
    if crate::state::capturing() && HEAP_ON.load(Relaxed) && id != 0 {
        // Whole bytes: the digits past them would be the estimate's noise.
        ring::push_group_if_registered(&counter(id, bytes.round()), crate::scope::open_depth());
    }
}

/// At a capture's start, where the heap profiler samples and the capture asks for it (`on`):
/// the counter's track, from the estimate at that moment.
pub(super) fn heap_at_start(on: bool) {
    HEAP_ON.store(on, Relaxed);
    #[cfg(feature = "sampler")]
    if let Some(bytes) = tickscope_sampler::heap::in_use().filter(|_| on) {
        HEAP_IN_USE.id();
        plot(&HEAP_IN_USE, bytes.round());
    }
}

/// The longest message kept; longer ones are cut (at a character boundary).
pub const MAX_MESSAGE: usize = 1024;

/// `message!`: formats into a stack buffer (no allocation) and records it. The macro has
/// checked `capturing()`. Not a stable API.
#[doc(hidden)]
pub fn message(args: std::fmt::Arguments<'_>) {
    struct Buf {
        bytes: [u8; MAX_MESSAGE],
        len: usize,
    }
    impl std::fmt::Write for Buf {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let room = MAX_MESSAGE - self.len;
            let mut n = s.len().min(room);
            while !s.is_char_boundary(n) {
                n -= 1;
            }
            self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
            Ok(())
        }
    }
    let t = crate::clock::now();
    let mut b = Buf {
        bytes: [0; MAX_MESSAGE],
        len: 0,
    };
    let _ = std::fmt::write(&mut b, args);
    let mut recs = [(0u64, 0u64); 1 + MAX_MESSAGE / 16];
    recs[0] = (t, format::event::MESSAGE as u64 | (b.len as u64) << 8);
    for (k, chunk) in b.bytes[..b.len].chunks(16).enumerate() {
        let mut pad = [0u8; 16];
        pad[..chunk.len()].copy_from_slice(chunk);
        recs[1 + k] = (
            u64::from_le_bytes(pad[..8].try_into().expect("8 bytes")),
            u64::from_le_bytes(pad[8..].try_into().expect("8 bytes")),
        );
    }
    ring::push_group(&recs[..1 + b.len.div_ceil(16)], crate::scope::open_depth());
}
