//! `tickscope view`: a local web viewer for timeline captures and CPU profiles, fully offline,
//! in one binary.
//!
//! # Overview
//! - [`start`] opens what [`Config`] names (each file is checked before any server starts:
//!   a file that is neither a capture nor a profile is an [`Error`], one line), binds the
//!   address (loopback unless `allow_remote`), and returns a [`Started`] server with its URL
//!   (a random token in it) to print; [`Started::serve`] serves until the process ends.
//! - A capture ([`capture::Capture`]) is indexed by a thread of its own
//!   ([`index`]: one streaming pass; memory within twice the capture and a few MB) while its
//!   summary (the same as `tickscope report`) is computed by another. The summary holds
//!   statistics per scope the capture defines, about 0.6 KB each: a capture crafted to
//!   define a million scopes in 30 MB takes 641 MB at its peak here (`tickscope report`
//!   alone: 566 MB), where an ordinary capture's scopes are a few hundred; every answer is
//!   bounded whatever the capture claims (a 609 KB summary and 67 KB `/api/info` for that
//!   capture: [`ANSWER_ROWS`]); the page asks for
//!   windows of the timeline at its width in pixels and gets the scopes wider than a pixel
//!   and, for the rest, how busy each pixel is ([`index::query`], [`wire`]).
//! - A profile ([`profiles::ProfileDoc`]) gives the views `tickscope top`, `peek` and `list`
//!   give, with the same numbers, and flame graph trees; two give a differential flame
//!   graph.
//! - A live capture arrives over TCP (`tcp://ADDR` among the inputs, or
//!   [`Viewer::add_live`] for `tickscope capture listen --view`): its index grows as chunks
//!   arrive and the page follows it.
//! - [`server`]: the HTTP API, every request checked against the token, its connections
//!   bounded ([`Limits`]); [`live`]: who may send live captures, and how much they hold;
//!   [`browser`]: the page opened with no token in a command line.
//!
//! The page (`assets/`) is hand-written HTML, CSS and JavaScript, in the binary: no build
//! step, no network. Its script is ES modules by view (`main.js` wires them; `timeline.js`,
//! `tracks.js` and `panes.js` the timeline, `flame.js`, `profile.js` and `source.js` the
//! profiles, `wire.js` the server's answers), served by [`server`] as they are written. It
//! draws on canvases.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod browser;
pub mod capture;
pub mod index;
pub mod live;
pub mod profiles;
pub mod server;
pub mod wire;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::{json, Value};

use capture::{Capture, Details, LiveBudget};
use profiles::ProfileDoc;

/// What went wrong opening the viewer's files or starting its server: one line naming the
/// file (or address) and the problem.
#[derive(Debug)]
pub struct Error {
    message: String,
}

impl Error {
    fn capture(e: &tickscope_timeline::tscap::Error) -> Error {
        Error {
            message: e.to_string(),
        }
    }

    fn io(what: &str, e: std::io::Error) -> Error {
        Error {
            message: format!("{what}: {e}"),
        }
    }

    /// An error of this text.
    pub fn new(message: impl Into<String>) -> Error {
        Error {
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// What to view and where to serve it.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Captures (`.tscap`) and profiles (pprof, gperftools, folded…), told apart by content;
    /// `tcp://ADDR`: listen there for live captures.
    pub inputs: Vec<String>,
    /// Two profiles to compare (`--diff BASE NEW`).
    pub diff: Option<(PathBuf, PathBuf)>,
    /// Where to serve (`127.0.0.1:0` when empty: a free port on loopback).
    pub addr: String,
    /// Accept a non-loopback address (for the server and live captures).
    pub allow_remote: bool,
    /// Directories to look for sources in (`:`-separated), for the source view.
    pub source_path: String,
    /// Live connections served at once (more are refused).
    pub max_connections: usize,
    /// Live captures will be added by the caller ([`Viewer::add_live`]): start with no input.
    pub fed: bool,
    /// What the viewer holds for others at most: connections, time, memory, rows.
    pub limits: Limits,
}

/// The bounds of what the viewer holds for whoever connects: the page's connections, live
/// captures, and the size of its answers. [`Limits::default`] gives the values documented
/// on each field.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Page connections open at once (256). At the cap, a new connection closes the oldest
    /// that has not yet sent a request with the token; with none such, it is closed itself.
    pub http_connections: usize,
    /// A page connection that has not sent a request with the token this long after it
    /// opened is closed (10 s): one that never will must keep reconnecting to hold a place.
    pub token_timeout: Duration,
    /// A page connection that waits this long for a request's headers, idle between
    /// requests or sending them slowly, is closed (30 s; the browser opens another).
    pub idle_timeout: Duration,
    /// A live connection that has not sent its capture's header in this time is closed
    /// (30 s).
    pub live_header_timeout: Duration,
    /// A live connection silent this long after its header is closed (`None`, the default:
    /// never, as a program that records nothing sends nothing).
    pub live_idle_timeout: Option<Duration>,
    /// Live captures held at most (32); later connections are refused.
    pub live_captures: usize,
    /// Bytes all live captures may hold together (512 MiB; their indexes add at most as
    /// much again): a capture stops being read there, what came before kept.
    pub live_bytes: u64,
}

/// The most rows of any list in an answer, whatever the capture holds (a crafted capture of a
/// million scope definitions made a 268 MB summary): a summary's scopes (largest total
/// first), threads, frame markers and counters, and `/api/info`'s threads, scopes and
/// markers (lowest ids first). The rest are counted: in the summary's warnings, in
/// `/api/info`'s `left_out`.
pub const ANSWER_ROWS: usize = 2000;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            http_connections: 256,
            token_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            live_header_timeout: Duration::from_secs(30),
            live_idle_timeout: None,
            live_captures: 32,
            live_bytes: 512 << 20,
        }
    }
}

/// The viewer's state, shared by the server's requests.
pub struct Viewer {
    /// The token every request must carry.
    pub token: String,
    captures: RwLock<Vec<Arc<Capture>>>,
    /// The profiles, in command-line order (the diff's two last when given).
    pub profiles: Vec<ProfileDoc>,
    /// The positions in `profiles` of the diff's base and new.
    pub diff: Option<(usize, usize)>,
    /// Live captures may arrive (`tcp://` inputs, or a feed): the page keeps asking.
    pub listening: bool,
    /// Where programs connect (`tcp://` inputs' addresses, as bound), for the page to say.
    pub listen_on: Vec<String>,
    /// The bounds it keeps.
    pub limits: Limits,
    /// The memory live captures share.
    pub live_budget: Arc<LiveBudget>,
    /// What was refused or cut, as said on stderr (the latest [`MAX_NOTICES`]), and how
    /// many in all.
    notices: Mutex<(Vec<String>, u64)>,
    /// The file that sent the browser here, removed once the page is served.
    redirect: Mutex<Option<Arc<browser::Redirect>>>,
}

/// The notices `/api/info` lists at most.
const MAX_NOTICES: usize = 50;

/// A viewer bound to its address, ready to serve.
pub struct Started {
    /// The page's address with the token: what to open.
    pub url: String,
    /// The state (for adding live captures).
    pub viewer: Arc<Viewer>,
    /// Where live captures are received (`tcp://` inputs), as bound.
    pub live: Vec<SocketAddr>,
    listener: TcpListener,
}

impl Started {
    /// Serves until the process ends.
    pub fn serve(self) -> std::io::Result<()> {
        server::serve(self.viewer, self.listener)
    }
}

/// The address `addr` resolves to, refused when it is not loopback and `allow_remote` is off.
fn resolve(addr: &str, allow_remote: bool, what: &str) -> Result<SocketAddr, Error> {
    let a = addr
        .to_socket_addrs()
        .map_err(|e| Error::new(format!("{what} {addr}: {e}")))?
        .next()
        .ok_or_else(|| Error::new(format!("{what} {addr}: no address")))?;
    if !allow_remote && !a.ip().is_loopback() {
        return Err(Error::new(format!(
            "{what} {addr} is not a loopback address: anyone who can reach it could read these files; add --allow-remote to serve it anyway"
        )));
    }
    Ok(a)
}

/// Returns true if and only if the file at `path` starts as a capture does.
fn is_capture(path: &str) -> Result<bool, Error> {
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut head = [0u8; 8];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(n == head.len() && head == tickscope_timeline::tscap::MAGIC)
}

/// Opens every input, binds the address; nothing is served yet.
pub fn start(config: &Config) -> Result<Started, Error> {
    let mut captures = Vec::new();
    let mut profiles = Vec::new();
    let mut live = Vec::new();
    for input in &config.inputs {
        if let Some(addr) = input.strip_prefix("tcp://") {
            let a = resolve(addr, config.allow_remote, "live captures:")?;
            let l = TcpListener::bind(a)
                .map_err(|e| Error::io(&format!("live captures: {addr}"), e))?;
            live.push(l);
        } else if is_capture(input)? {
            captures.push(Capture::open_file(input.as_ref())?);
        } else {
            match ProfileDoc::open(input.as_ref(), &config.source_path) {
                Ok(p) => profiles.push(p),
                // Named as a capture and no profile either: said to be no capture (what its
                // name promised), not "not a profile".
                Err(e) if input.ends_with(".tscap") => {
                    return Err(Capture::open_file(input.as_ref()).err().unwrap_or(e))
                }
                Err(e) => return Err(e),
            }
        }
    }
    let mut diff = None;
    if let Some((base, new)) = &config.diff {
        let b = profiles.len();
        profiles.push(ProfileDoc::open(base, &config.source_path)?);
        profiles.push(ProfileDoc::open(new, &config.source_path)?);
        diff = Some((b, b + 1));
    }
    if captures.is_empty() && profiles.is_empty() && live.is_empty() && !config.fed {
        return Err(Error::new(
            "nothing to view: give a capture, a profile, tcp://ADDR or --diff BASE NEW",
        ));
    }
    let addr = if config.addr.is_empty() {
        "127.0.0.1:0"
    } else {
        &config.addr
    };
    let a = resolve(addr, config.allow_remote, "the viewer's address")?;
    let listener =
        TcpListener::bind(a).map_err(|e| Error::io(&format!("the viewer's address {addr}"), e))?;
    let bound = listener.local_addr().map_err(|e| Error::io(addr, e))?;
    let token = token().map_err(|e| Error::io("/dev/urandom", e))?;
    let host = match bound.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    let url = format!("http://{host}:{}/?token={token}", bound.port());
    let viewer = Arc::new(Viewer {
        token,
        captures: RwLock::new(captures),
        profiles,
        diff,
        listening: !live.is_empty() || config.fed,
        listen_on: live
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .map(|a| format!("tcp://{a}"))
            .collect(),
        live_budget: Arc::new(LiveBudget::new(config.limits.live_bytes)),
        limits: config.limits.clone(),
        notices: Mutex::new((Vec::new(), 0)),
        redirect: Mutex::new(None),
    });
    let max = if config.max_connections == 0 {
        64
    } else {
        config.max_connections
    };
    let live_addrs = live.iter().filter_map(|l| l.local_addr().ok()).collect();
    for l in live {
        let v = viewer.clone();
        let remote = config.allow_remote;
        std::thread::Builder::new()
            .name("tickscope-live".into())
            .spawn(move || live::accept(v, l, max, remote))
            .map_err(|e| Error::io("a thread", e))?;
    }
    Ok(Started {
        url,
        viewer,
        live: live_addrs,
        listener,
    })
}

/// 128 random bits, in hex.
fn token() -> std::io::Result<String> {
    random_hex(16)
}

/// `n` random bytes, in hex.
pub(crate) fn random_hex(n: usize) -> std::io::Result<String> {
    let mut b = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Viewer {
    /// Capture `i`.
    pub fn capture(&self, i: usize) -> Option<Arc<Capture>> {
        self.captures
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(i)
            .cloned()
    }

    /// A new live capture named `name`, shown from now on; read it with
    /// [`Capture::ingest`].
    pub fn add_live(&self, name: &str) -> Arc<Capture> {
        let c = Capture::live_within(name, Some(self.live_budget.clone()));
        self.captures
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(c.clone());
        c
    }

    /// The live captures held.
    pub fn live_captures(&self) -> usize {
        let captures = self.captures.read().unwrap_or_else(|p| p.into_inner());
        captures.iter().filter(|c| c.live).count()
    }

    /// Says `line` on stderr (`tickscope view: ` first) and keeps it for `/api/info`.
    pub fn notice(&self, line: String) {
        // Not a panic when stderr's reader has gone.
        let _ = writeln!(std::io::stderr(), "tickscope view: {line}");
        let mut n = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        if n.0.len() == MAX_NOTICES {
            n.0.remove(0);
        }
        n.0.push(line);
        n.1 += 1;
    }

    /// Removes `redirect` once the page has been served with the token.
    pub fn remove_on_page(&self, redirect: Arc<browser::Redirect>) {
        *self.redirect.lock().unwrap_or_else(|p| p.into_inner()) = Some(redirect);
    }

    /// The page was served with the token: the redirect that sent the browser is removed.
    pub(crate) fn page_served(&self) {
        let r = self
            .redirect
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(r) = r {
            r.remove();
        }
    }

    /// What the page needs to know first: the files, and each capture's state, threads,
    /// scopes and markers.
    pub fn info(&self) -> Value {
        let captures: Vec<Value> = self
            .captures
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|c| capture_info(c))
            .collect();
        let notices = {
            let n = self.notices.lock().unwrap_or_else(|p| p.into_inner());
            json!({ "latest": n.0, "count": n.1 })
        };
        json!({
            "captures": captures,
            "profiles": self.profiles.iter().map(ProfileDoc::info).collect::<Vec<_>>(),
            "diff": self.diff.map(|(b, n)| json!({"base": b, "new": n})),
            "listening": self.listening,
            "listen_on": self.listen_on,
            "notices": notices,
        })
    }

    /// A scope's details as JSON, with names.
    pub fn details(&self, c: &Capture, d: Option<Details>) -> Value {
        let Some(d) = d else {
            return Value::Null;
        };
        c.with_index(|idx| {
            let scope = |id: u64| {
                let s = idx.meta.scope(id);
                json!({
                    "id": id,
                    "name": idx.meta.scope_name(id),
                    "file": s.map(|s| s.file.to_owned()),
                    "line": s.map(|s| s.line),
                })
            };
            json!({
                "thread": d.thread,
                "thread_name": idx.meta.thread_name(d.thread),
                "depth": d.depth,
                "scope": scope(d.id),
                "begin_ns": d.begin_ns,
                "end_ns": d.end_ns,
                "duration_ns": d.end_ns - d.begin_ns,
                "self_ns": d.self_ns,
                "exact": d.exact,
                "ended": d.close.label().unwrap_or("ended"),
                "children": d.children.iter().map(|&(id, calls, ns)| {
                    let mut s = scope(id);
                    s["calls"] = json!(calls);
                    s["total_ns"] = json!(ns);
                    s
                }).collect::<Vec<_>>(),
            })
        })
        .unwrap_or(Value::Null)
    }
}

fn capture_info(c: &Capture) -> Value {
    let st = c.status();
    let mut v = json!({
        "name": c.name,
        "live": c.live,
        "status": {
            "read": st.read,
            "size": st.size,
            "done": st.done,
            "warnings": st.warnings,
            "error": st.error,
            "seconds": st.seconds,
        },
    });
    let more = c.with_index(|idx| {
        let meta = &idx.meta;
        let threads: Vec<Value> = idx
            .threads
            .iter()
            .take(ANSWER_ROWS)
            .map(|t| {
                let tid = meta.thread(t.index).map(|d| d.tid);
                json!({
                    "index": t.index,
                    "tid": tid,
                    "name": meta.thread_name(t.index),
                    "first_ns": idx.map.ns(t.first.min(t.track.last)),
                    "last_ns": idx.map.ns(t.track.last),
                    "depth": t.rows.len().max(t.track.stack.len()),
                    "sampled": tid.is_some_and(|tid| idx.samples.contains_key(&tid)),
                    "losses": t.losses.len(),
                })
            })
            .collect();
        let scopes: serde_json::Map<String, Value> = lowest(meta.scopes().map(|s| s.id))
            .filter_map(|id| meta.scope(id))
            .map(|s| {
                (
                    s.id.to_string(),
                    json!([
                        s.name,
                        s.file,
                        s.line,
                        matches!(s.kind, tickscope_timeline::tscap::ScopeKind::Group)
                    ]),
                )
            })
            .collect();
        let listed: std::collections::HashSet<u64> = lowest(meta.markers().map(|m| m.id)).collect();
        let markers: serde_json::Map<String, Value> = meta
            .markers()
            .filter(|m| listed.contains(&m.id))
            .map(|m| {
                (
                    m.id.to_string(),
                    json!([
                        m.name,
                        matches!(m.kind, tickscope_timeline::tscap::MarkerKind::Counter)
                    ]),
                )
            })
            .collect();
        json!({
            "program": idx.process.program,
            "pid": idx.process.pid,
            "clock": idx.process.clock,
            "duration_ns": idx.map.ns(idx.last),
            "bin_ns": idx.bin_ns(),
            "events": idx.events,
            "index_bytes": idx.budget.used.max(idx.bytes()),
            "threads": threads,
            // As `report` counts them: those with events and those the metadata names that
            // recorded none.
            "threads_named": idx
                .threads
                .iter()
                .map(|t| t.index)
                .chain(meta.threads().map(|t| t.index))
                .collect::<std::collections::HashSet<u64>>()
                .len(),
            "scopes": scopes,
            "markers": markers,
            "counters": idx.counters.keys().take(ANSWER_ROWS).collect::<Vec<_>>(),
            "lives": idx.lives.sites().into_iter().take(ANSWER_ROWS).collect::<Vec<_>>(),
            "left_out": {
                "threads": idx.threads.len().saturating_sub(ANSWER_ROWS),
                "scopes": meta.scopes().count().saturating_sub(ANSWER_ROWS),
                "markers": meta.markers().count().saturating_sub(ANSWER_ROWS),
                "counters": idx.counters.len().saturating_sub(ANSWER_ROWS),
            },
        })
    });
    if let (Some(Value::Object(m)), Value::Object(o)) = (more, &mut v) {
        o.extend(m);
    }
    v
}

/// The [`ANSWER_ROWS`] lowest of `ids`, in order, without sorting them all.
fn lowest(ids: impl Iterator<Item = u64>) -> impl Iterator<Item = u64> {
    let mut heap = std::collections::BinaryHeap::with_capacity(ANSWER_ROWS + 1);
    for id in ids {
        heap.push(id);
        if heap.len() > ANSWER_ROWS {
            heap.pop();
        }
    }
    heap.into_sorted_vec().into_iter()
}
