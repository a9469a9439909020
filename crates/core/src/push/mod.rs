//! Push (feature `push`): the program's CPU profile (and its heap profile, where
//! `tickscope::alloc::Profiled` is the global allocator) sent to Grafana Pyroscope every
//! interval,
//! as its SDKs send it — `POST {url}/push.v1.PusherService/Push`, Connect's protobuf
//! encoding, the request gzipped, the pprof inside plain.
//!
//! ```no_run
//! let pusher = tickscope::push::Builder::new("http://127.0.0.1:4040")
//!     .label("env", "prod")
//!     .start()?;
//! // ... the program's work: a profile of each 15 s goes to Pyroscope ...
//! let report = pusher.stop(); // the last, partial window too
//! println!("{} sent, {} dropped", report.sent, report.dropped);
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Or with no code: `TICKSCOPE_PUSH=http://127.0.0.1:4040 ./prog`, read at the process's
//! first scope, the last window sent at its exit (`TICKSCOPE_PUSH_INTERVAL`,
//! `TICKSCOPE_PUSH_LABELS=env=prod,region=eu`, `TICKSCOPE_PUSH_TOKEN` for a bearer token,
//! `TICKSCOPE_PUSH_TENANT` for `X-Scope-OrgID`; a user and password in the URL are sent as
//! basic authentication).
//!
//! **Exact windows.** The pusher runs the sampler itself and, every interval, sends the
//! difference between its snapshot and the previous one: the profiles sent add up, stack by
//! stack, to the one profile of the whole run (the last window holds the stop's
//! corrections). A heap profile's allocations are likewise the window's (its memory in use
//! the heap at the window's end), as the Go SDK sends them. Each carries the labels
//! `__name__=process_cpu` (`memory`), `service_name` (the
//! program's name unless a label gives it) and the user's; at most 30 names, values cut at
//! 2,048 characters, and at most 16,000 samples (the lightest stacks past that folded into
//! one `[cut: …]` sample, totals kept), within Pyroscope's default limits.
//!
//! **Never in the program's way.** Uploads happen on the pusher's own thread. A failed one
//! (no connection, a timeout, 429 or 5xx) is tried again as Grafana Alloy does: after 0.5 s,
//! doubling to at most 5 min, 10 tries in all; another answer (4xx) drops it at once. At
//! most [`QUEUE`] uploads wait; past that the oldest is dropped. Every drop is counted,
//! said once on standard error and in the exit summary. At the stop, what is still queued
//! gets the stop's deadline (2 s at the process's exit), then is dropped and counted; at the
//! exit, an upload in flight to a server that does not answer is left after 3 s (the process
//! ends with it), and what was not sent is counted and said; making the last window (the
//! sampler's stop) is waited for.

use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

mod wire;
use wire::{Outcome, Target};

/// Uploads that may wait at once (about two minutes of 15 s windows, retried); past that
/// the oldest is dropped. Each is one gzipped profile, tens of kilobytes as a rule.
pub const QUEUE: usize = 8;
/// The most samples a profile sent holds (Pyroscope's default limit).
pub const MAX_SAMPLES: usize = 16_000;
/// The most label names a series carries, and the longest value (Pyroscope's defaults).
const MAX_LABELS: usize = 30;
const MAX_VALUE: usize = 2048;
/// Each step of an upload (connect, send, answer) within this.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The path of Pyroscope's Push under the URL.
const PUSH_PATH: &str = "/push.v1.PusherService/Push";

/// Profiles sent, and dropped, by every pusher of the process.
static SENT: AtomicU64 = AtomicU64::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
/// A drop was said on standard error.
static SAID: AtomicBool = AtomicBool::new(false);
/// Uploads the pushers hold now (what an exit that cannot wait for them loses).
static QUEUED: AtomicU64 = AtomicU64::new(0);
/// When the upload in flight began (ms since the process's first use of this; 0: none).
static POSTING_SINCE: AtomicU64 = AtomicU64::new(0);

/// Milliseconds since the first call, never 0.
fn now_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// Profiles dropped by every pusher so far (for the exit summary).
pub(crate) fn dropped() -> u64 {
    DROPPED.load(Relaxed)
}

/// How failed uploads are tried again (Grafana Alloy's policy by default).
#[derive(Clone, Copy, Debug)]
pub struct Retry {
    /// The wait before the second try.
    pub first: Duration,
    /// The longest wait between tries (each wait doubles up to it).
    pub max: Duration,
    /// Tries in all, the first included.
    pub tries: u32,
}

impl Default for Retry {
    fn default() -> Retry {
        Retry {
            first: Duration::from_millis(500),
            max: Duration::from_secs(300),
            tries: 10,
        }
    }
}

/// Settings of a pusher: see the [module docs](self).
#[derive(Clone, Debug)]
pub struct Builder {
    url: String,
    service_name: Option<String>,
    labels: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    interval: Duration,
    hz: u32,
    retry: Retry,
}

impl Builder {
    /// A pusher to the Pyroscope server at `url` (`http://HOST[:PORT][/PATH]`).
    pub fn new(url: &str) -> Builder {
        Builder {
            url: url.to_string(),
            service_name: None,
            labels: Vec::new(),
            headers: Vec::new(),
            interval: Duration::from_secs(15),
            hz: 100,
            retry: Retry::default(),
        }
    }

    /// The `service_name` label (the program's name by default).
    pub fn service_name(mut self, name: &str) -> Builder {
        self.service_name = Some(name.to_string());
        self
    }

    /// A label every profile carries (`env=prod`).
    pub fn label(mut self, name: &str, value: &str) -> Builder {
        self.labels.push((name.to_string(), value.to_string()));
        self
    }

    /// A header every request carries.
    pub fn header(mut self, name: &str, value: &str) -> Builder {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// `Authorization: Bearer TOKEN` (Grafana Cloud's and most gateways').
    pub fn bearer_token(self, token: &str) -> Builder {
        self.header("Authorization", &format!("Bearer {token}"))
    }

    /// `X-Scope-OrgID`: the tenant of a multi-tenant Pyroscope.
    pub fn tenant(self, id: &str) -> Builder {
        self.header("X-Scope-OrgID", id)
    }

    /// How long each profile is (15 s by default, at least 1 s).
    pub fn interval(mut self, every: Duration) -> Builder {
        self.interval = every.max(Duration::from_secs(1));
        self
    }

    /// The sampler's rate (100 Hz by default).
    pub fn frequency(mut self, hz: u32) -> Builder {
        self.hz = hz;
        self
    }

    /// How failed uploads are tried again.
    pub fn retry(mut self, retry: Retry) -> Builder {
        self.retry = retry;
        self
    }

    /// Starts the sampler and the pusher's thread. Fails on a URL it cannot use, a header
    /// that is not one, or a sampler that cannot start (one runs in the process already).
    pub fn start(self) -> io::Result<Pusher> {
        let bad = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        let target = Target::parse(&self.url).map_err(bad)?;
        for (k, v) in &self.headers {
            if k.is_empty()
                || !k.bytes().all(|b| b.is_ascii_graphic() && b != b':')
                || v.bytes().any(|b| b == b'\r' || b == b'\n')
            {
                return Err(bad(format!("{k:?}: not a header name and value")));
            }
        }
        let labels = labels(self.service_name.clone(), &self.labels);
        let sampler = crate::sampler::Sampler::builder()
            .frequency(self.hz)
            .start()
            .map_err(|e| io::Error::other(format!("cannot start the sampler: {e}")))?;
        let (tx, rx) = mpsc::channel::<Duration>();
        let job = Job {
            target,
            labels,
            headers: self.headers,
            interval: self.interval,
            retry: self.retry,
            queue: VecDeque::new(),
            sent: 0,
            dropped: 0,
            retried: 0,
            windows: 0,
            heap: None,
        };
        let thread = std::thread::Builder::new()
            .name("tickscope-push".into())
            .spawn(move || crate::own::own(|| job.run(sampler, rx)))?;
        Ok(Pusher {
            stop: tx,
            thread: Some(thread),
        })
    }
}

/// The labels of every profile: `__name__`, `service_name` and the user's, within the
/// server's limits.
fn labels(service: Option<String>, user: &[(String, String)]) -> Vec<(String, String)> {
    let program = std::env::args_os()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "unknown_service".into());
    let service = service
        .or_else(|| {
            user.iter()
                .find(|(k, _)| k == "service_name")
                .map(|(_, v)| v.clone())
        })
        .unwrap_or(program);
    let mut out = vec![
        ("__name__".to_string(), "process_cpu".to_string()),
        ("service_name".to_string(), service),
        // What the SDKs say of themselves (pyroscope-rs: `com.grafana.pyroscope/python`).
        ("otel.scope.name".to_string(), "tickscope".to_string()),
        (
            "otel.scope.version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
    ];
    for (k, v) in user {
        if k == "service_name" || k == "__name__" || out.iter().any(|(o, _)| o == k) {
            continue;
        }
        if out.len() >= MAX_LABELS {
            crate::sys::stderr::warn(&format!(
                "push: label {k} and those after it left out: a series carries at most {MAX_LABELS} label names"
            ));
            break;
        }
        let mut v = v.clone();
        if v.len() > MAX_VALUE {
            let mut end = MAX_VALUE;
            while !v.is_char_boundary(end) {
                end -= 1;
            }
            v.truncate(end);
        }
        out.push((k.clone(), v));
    }
    out
}

/// A running pusher; [`stop`](Pusher::stop) sends the last window and returns its figures.
/// Dropped without a stop, it stops with a 2 s deadline.
pub struct Pusher {
    stop: mpsc::Sender<Duration>,
    thread: Option<std::thread::JoinHandle<Report>>,
}

/// What a pusher did.
#[derive(Debug)]
pub struct Report {
    /// Profiles the server took.
    pub sent: u64,
    /// Profiles dropped: refused, out of tries, past the queue, or still queued at the stop.
    pub dropped: u64,
    /// Tries after a failed one.
    pub retried: u64,
    /// Profiles made (one a window, two where the heap is profiled too): each was sent or
    /// dropped.
    pub windows: u64,
    /// The profile of the whole run: what the profiles sent add up to.
    pub profile: crate::sampler::Profile,
}

impl Pusher {
    /// Stops sampling, sends the last window (and what is still queued) within 5 s, and
    /// returns the figures.
    pub fn stop(self) -> Report {
        self.stop_within(Duration::from_secs(5))
    }

    /// [`stop`](Self::stop) with `deadline` for what is still to send.
    pub fn stop_within(mut self, deadline: Duration) -> Report {
        let _ = self.stop.send(deadline);
        let t = self.thread.take().expect("joined once");
        t.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        if let Some(t) = self.thread.take() {
            let _ = self.stop.send(Duration::from_secs(2));
            let _ = t.join();
        }
    }
}

/// One profile waiting to go.
struct Upload {
    body: Vec<u8>,
    tries: u32,
    next: Instant,
}

/// The pusher's thread's state.
struct Job {
    target: Target,
    labels: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    interval: Duration,
    retry: Retry,
    queue: VecDeque<Upload>,
    sent: u64,
    dropped: u64,
    retried: u64,
    windows: u64,
    /// The heap profile's windows, once the heap profiler is seen installed.
    heap: Option<crate::sampler::heap::HeapWindows>,
}

impl Job {
    fn run(mut self, sampler: crate::sampler::Sampler, stop: mpsc::Receiver<Duration>) -> Report {
        let mut prev: Option<crate::sampler::Profile> = None;
        let mut next_window = Instant::now() + self.interval;
        let deadline = loop {
            let now = Instant::now();
            let wake = self
                .queue
                .front()
                .map_or(next_window, |u| u.next.min(next_window));
            match stop.recv_timeout(wake.saturating_duration_since(now)) {
                Ok(d) => break d,
                Err(mpsc::RecvTimeoutError::Disconnected) => break Duration::from_secs(2),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= next_window {
                let snap = sampler.snapshot();
                self.enqueue(&snap, prev.as_ref());
                prev = Some(snap);
                next_window += self.interval;
                // A window late by more than one interval (a stopped process): the next
                // one is an interval from now, not a burst of catching up.
                if next_window < Instant::now() {
                    next_window = Instant::now() + self.interval;
                }
            }
            self.send_due(None);
        };
        let whole = sampler.stop();
        self.enqueue(&whole, prev.as_ref());
        self.send_due(Some(Instant::now() + deadline));
        let left = self.queue.len() as u64;
        QUEUED.fetch_sub(left, Relaxed);
        self.drop_n(left, "still queued at the stop");
        Report {
            sent: self.sent,
            dropped: self.dropped,
            retried: self.retried,
            windows: self.windows,
            profile: whole,
        }
    }

    /// Queues the window from `prev` to `snap`, and the heap profile's window.
    fn enqueue(&mut self, snap: &crate::sampler::Profile, prev: Option<&crate::sampler::Profile>) {
        let pprof = snap.pprof_since(prev, MAX_SAMPLES);
        self.queue_profile(&pprof, "process_cpu");
        if self.heap.is_none()
            && crate::sampler::heap::installed()
            && crate::sampler::heap::in_use().is_some()
        {
            self.heap = Some(Default::default());
        }
        if let Some(h) = self.heap.as_mut() {
            let pprof = h.take().to_pprof_bytes();
            self.queue_profile(&pprof, "memory");
        }
    }

    /// Queues `pprof` as a profile of type `name` (`__name__`).
    fn queue_profile(&mut self, pprof: &[u8], name: &str) {
        self.windows += 1;
        let mut labels = self.labels.clone();
        labels[0].1 = name.to_string();
        let body = wire::gzip(&wire::push_request(&labels, pprof, &wire::uuid()));
        if self.queue.len() >= QUEUE {
            self.queue.pop_front();
            QUEUED.fetch_sub(1, Relaxed);
            self.drop_n(1, "the queue was full");
        }
        self.queue.push_back(Upload {
            body,
            tries: 0,
            next: Instant::now(),
        });
        QUEUED.fetch_add(1, Relaxed);
    }

    /// Sends the uploads whose time has come, in order; with `until`, keeps at it (waiting
    /// out backoffs) until the queue is empty or `until` passes.
    fn send_due(&mut self, until: Option<Instant>) {
        while let Some(u) = self.queue.front_mut() {
            let now = Instant::now();
            if u.next > now {
                match until {
                    Some(end) if u.next < end => std::thread::sleep(u.next - now),
                    _ => return,
                }
            }
            if until.is_some_and(|end| Instant::now() >= end) {
                return;
            }
            // At the stop, no step past its deadline: a server that accepts and never answers
            // must not hold the program's exit for the steps' whole timeouts.
            let step = match until {
                Some(end) => end
                    .saturating_duration_since(Instant::now())
                    .min(TIMEOUT)
                    .max(Duration::from_millis(1)),
                None => TIMEOUT,
            };
            POSTING_SINCE.store(now_ms(), Relaxed);
            let outcome = wire::post(&self.target, PUSH_PATH, &self.headers, &u.body, step);
            POSTING_SINCE.store(0, Relaxed);
            u.tries += 1;
            match outcome {
                Outcome::Sent => {
                    self.queue.pop_front();
                    QUEUED.fetch_sub(1, Relaxed);
                    self.sent += 1;
                    SENT.fetch_add(1, Relaxed);
                }
                Outcome::Again(why) if u.tries < self.retry.tries => {
                    let wait = self
                        .retry
                        .first
                        .saturating_mul(1 << (u.tries - 1).min(20))
                        .min(self.retry.max);
                    u.next = Instant::now() + wait;
                    self.retried += 1;
                    let _ = why;
                }
                Outcome::Again(why) => {
                    self.queue.pop_front();
                    QUEUED.fetch_sub(1, Relaxed);
                    let tries = self.retry.tries;
                    self.drop_n(1, &format!("{why}, {tries} tries"));
                }
                Outcome::Refused(why) => {
                    self.queue.pop_front();
                    QUEUED.fetch_sub(1, Relaxed);
                    self.drop_n(1, &why);
                }
            }
        }
    }

    fn drop_n(&mut self, n: u64, why: &str) {
        if n == 0 {
            return;
        }
        self.dropped += n;
        DROPPED.fetch_add(n, Relaxed);
        if !SAID.swap(true, Relaxed) {
            crate::sys::stderr::warn(&format!(
                "push: a profile for {}{} was dropped ({why}); drops are counted in the exit summary",
                self.target.host, self.target.path
            ));
        }
    }
}

/// The pusher `TICKSCOPE_PUSH` started, kept for the process's life.
static FROM_ENV: Mutex<Option<Pusher>> = Mutex::new(None);

/// Starts the pusher `TICKSCOPE_PUSH` names, if any (at first use).
pub(crate) fn push_from_env() {
    let get = crate::sys::env::env_var;
    let Some(url) = get("TICKSCOPE_PUSH") else {
        return;
    };
    let mut b = Builder::new(url.trim());
    if let Some(v) = get("TICKSCOPE_PUSH_INTERVAL") {
        match crate::config::parse_duration(v.trim()) {
            Some(d) => b = b.interval(d),
            None => crate::sys::stderr::warn_malformed(
                "TICKSCOPE_PUSH_INTERVAL",
                &v,
                "a duration: 15s, 500ms, 1m",
            ),
        }
    }
    if let Some(v) = get("TICKSCOPE_PUSH_LABELS") {
        for pair in v.split(',').filter(|p| !p.trim().is_empty()) {
            match pair.split_once('=') {
                Some((k, val)) if !k.trim().is_empty() => b = b.label(k.trim(), val.trim()),
                _ => crate::sys::stderr::warn_malformed(
                    "TICKSCOPE_PUSH_LABELS",
                    pair,
                    "NAME=VALUE pairs separated by commas",
                ),
            }
        }
    }
    if let Some(t) = get("TICKSCOPE_PUSH_TOKEN") {
        b = b.bearer_token(t.trim());
    }
    if let Some(t) = get("TICKSCOPE_PUSH_TENANT") {
        b = b.tenant(t.trim());
    }
    match b.start() {
        Ok(p) => {
            if let Ok(mut g) = FROM_ENV.lock() {
                *g = Some(p);
            }
        }
        Err(e) => crate::sys::stderr::warn(&format!("TICKSCOPE_PUSH={url:?}: {e}")),
    }
}

/// At the process's exit, before its summary: the pusher `TICKSCOPE_PUSH` started sends
/// its last window (2 s at most for what is still queued).
pub(crate) fn at_exit() {
    let p = match FROM_ENV.try_lock() {
        Ok(mut g) => g.take(),
        Err(_) => None,
    };
    if let Some(mut p) = p {
        // The exit waits for the last window to be made (the sampler's stop, symbolising:
        // bounded work, seconds in a debug build on a busy machine) and sent, but not for a
        // server: an upload in flight for more than 3 s (one that does not answer could hold
        // it for its steps' timeouts) is left, the exit goes on, the thread ends with the
        // process, and what it had not sent is said.
        let _ = p.stop.send(Duration::from_secs(2));
        let Some(t) = p.thread.take() else { return };
        let cap = Instant::now() + Duration::from_secs(60);
        while !t.is_finished() && Instant::now() < cap {
            let since = POSTING_SINCE.load(Relaxed);
            if since != 0 && now_ms().saturating_sub(since) > 3000 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if t.is_finished() {
            let _ = t.join();
        } else {
            let lost = QUEUED.load(Relaxed).max(1);
            DROPPED.fetch_add(lost, Relaxed);
            crate::sys::stderr::warn(&format!(
                "push: {lost} profiles not sent: the server did not answer within 3 s at the exit"
            ));
        }
    }
}
