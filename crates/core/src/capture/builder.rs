//! A capture's settings ([`Builder`]) and its start.

use super::*;

/// Settings of a capture.
#[derive(Clone, Debug)]
pub struct Builder {
    sink: Sink,
    memory: u64,
    full: Full,
    flush_every: Duration,
    heap_counter: bool,
}

impl Builder {
    /// A capture to `sink` with the default settings.
    pub fn new(sink: Sink) -> Builder {
        Builder {
            sink,
            memory: ring::DEFAULT_BUDGET,
            full: Full::Drop,
            flush_every: Duration::from_millis(100),
            heap_counter: true,
        }
    }

    /// The most memory the threads' event buffers may take together (default 256 MiB; at
    /// least one 32 KiB block). Buffers grow while the collector is behind, so a busy
    /// machine costs memory, not events; past the budget, events are dropped and counted
    /// (or threads wait: [`Builder::full`]). `TICKSCOPE_CAPTURE_MEMORY=SIZE` sets it for a
    /// capture started by `TICKSCOPE_CAPTURE`.
    pub fn memory(mut self, bytes: u64) -> Builder {
        self.memory = bytes;
        self
    }

    /// What a thread does when the memory budget is spent (default [`Full::Drop`]).
    pub fn full(mut self, policy: Full) -> Builder {
        self.full = policy;
        self
    }

    /// How often partly filled chunks are sealed and sent (default 100 ms): the most a
    /// crash can lose, and the delay a live listener sees.
    pub fn flush_every(mut self, d: Duration) -> Builder {
        self.flush_every = d.max(Duration::from_millis(1));
        self
    }

    /// Whether the heap profiler's estimate of the bytes in use is a counter track (default:
    /// yes, where `tickscope::alloc::Profiled` samples). Its values are events of the threads
    /// that allocate; a capture that must hold only the program's own events turns it off.
    pub fn heap_counter(mut self, on: bool) -> Builder {
        self.heap_counter = on;
        self
    }

    /// Starts the capture; the handle stops it ([`Capture::stop`], or when dropped).
    pub fn start(self) -> Result<Capture, Error> {
        crate::scope::first_use();
        let generation = self.start_inner()?;
        Ok(Capture { generation })
    }

    /// [`Builder::start`] without first-use initialisation (which calls this for
    /// `TICKSCOPE_CAPTURE`, from inside itself).
    pub(super) fn start_inner(self) -> Result<u64, Error> {
        if !crate::COMPILED_IN {
            return Err(err(ErrorKind::Unsupported, "", None));
        }
        let mut handle = COLLECTOR.lock().unwrap_or_else(|p| p.into_inner());
        if handle.is_some() && !owned_here() {
            // The parent's collector, inherited across fork: no such thread runs here.
            std::mem::forget(handle.take());
        }
        if handle.as_ref().is_some_and(|h| h.is_finished()) {
            // A collector that failed (its capture was never stopped): gone already.
            let _ = handle.take().map(std::thread::JoinHandle::join);
        }
        if handle.is_some() {
            return Err(err(ErrorKind::AlreadyRunning, self.sink.describe(), None));
        }
        let s = match &self.sink {
            Sink::File(p) => sink::Sink::file(p)
                .map_err(|e| err(ErrorKind::Io, p.display().to_string(), Some(e)))?,
            Sink::Tcp(a) => {
                sink::Sink::tcp(a).map_err(|e| err(ErrorKind::Io, format!("tcp://{a}"), Some(e)))?
            }
            Sink::FlightRecorder {
                window,
                max_bytes,
                dump_on_panic,
            } => {
                if let Some(path) = dump_on_panic {
                    install_panic_dump(path.clone());
                }
                sink::Sink::flight(*window, *max_bytes)
            }
        };
        STATS.reset();
        ring::BUDGET.store(self.memory, Relaxed);
        ring::reset_peak();
        ring::POLICY.store(u8::from(self.full == Full::Block), Relaxed);
        *control() = Control {
            started: Some(Instant::now()),
            ..Control::default()
        };
        register_exit_hook();
        OWNER.store(std::process::id(), Relaxed);
        STOPPED_BY_FORK.store(false, Relaxed);
        collector::Collector::forget_earlier_records();
        let mut c = collector::Collector::new(s, self.flush_every);
        RUNNING.store(true, Relaxed);
        crate::state::set_capture(true);
        heap_at_start(self.heap_counter);
        // Scopes open now began before the capture: their calls cannot be in it, so they are
        // counted, by call site. (Counted once the switch is on: a scope entered in the
        // moment the count takes is both recorded and counted, never neither.)
        let in_flight = crate::scope::open_everywhere();
        STATS
            .in_flight_at_start
            .store(in_flight.iter().map(|x| x.1).sum(), Relaxed);
        c.in_flight_at_start(&in_flight);
        let spawned = crate::sys::thread::spawn_quiet(
            std::thread::Builder::new().name("tickscope-capture".into()),
            &[],
            move || run(&mut c),
        );
        match spawned {
            Ok(h) => {
                *handle = Some(h);
                Ok(GENERATION.fetch_add(1, Relaxed) + 1)
            }
            Err(e) => {
                crate::state::set_capture(false);
                RUNNING.store(false, Relaxed);
                Err(err(ErrorKind::Io, "the collector thread", Some(e)))
            }
        }
    }
}
