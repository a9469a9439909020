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
//!   summary (the same as `tickscope report`) is computed by another; the page asks for
//!   windows of the timeline at its width in pixels and gets the scopes wider than a pixel
//!   and, for the rest, how busy each pixel is ([`index::query`], [`wire`]).
//! - A profile ([`profiles::ProfileDoc`]) gives the views `tickscope top`, `peek` and `list`
//!   give, with the same numbers, and flame graph trees; two give a differential flame
//!   graph.
//! - A live capture arrives over TCP (`tcp://ADDR` among the inputs, or
//!   [`Viewer::add_live`] for `tickscope capture listen --view`): its index grows as chunks
//!   arrive and the page follows it.
//! - [`server`]: the HTTP API, every request checked against the token.
//!
//! The page (`assets/`) is hand-written HTML, CSS and JavaScript, in the binary: no build
//! step, no network. It draws on canvases.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod capture;
pub mod index;
pub mod profiles;
pub mod server;
pub mod wire;

use std::io::Read;
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use serde_json::{json, Value};

use capture::{Capture, Details};
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
}

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
            profiles.push(ProfileDoc::open(input.as_ref(), &config.source_path)?);
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
    });
    let max = if config.max_connections == 0 {
        64
    } else {
        config.max_connections
    };
    let live_addrs = live.iter().filter_map(|l| l.local_addr().ok()).collect();
    for l in live {
        let v = viewer.clone();
        std::thread::Builder::new()
            .name("tickscope-live".into())
            .spawn(move || accept_live(v, l, max))
            .map_err(|e| Error::io("a thread", e))?;
    }
    Ok(Started {
        url,
        viewer,
        live: live_addrs,
        listener,
    })
}

/// Accepts live captures on `l`, each read by a thread of its own (at most `max` at once).
fn accept_live(viewer: Arc<Viewer>, l: TcpListener, max: usize) {
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for stream in l.incoming() {
        let Ok(stream) = stream else { continue };
        if open.load(std::sync::atomic::Ordering::Relaxed) >= max {
            continue; // dropped: the program's capture reports it undelivered
        }
        let name = stream
            .peer_addr()
            .map_or_else(|_| "tcp".to_owned(), |a| format!("tcp://{a}"));
        let capture = viewer.add_live(&name);
        open.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let open = open.clone();
        let _ = std::thread::Builder::new()
            .name("tickscope-live".into())
            .spawn(move || {
                capture.ingest(std::io::BufReader::new(stream));
                open.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            });
    }
}

/// 128 random bits, in hex.
fn token() -> std::io::Result<String> {
    let mut b = [0u8; 16];
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
        let c = Capture::live(name);
        self.captures
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .push(c.clone());
        c
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
        json!({
            "captures": captures,
            "profiles": self.profiles.iter().map(ProfileDoc::info).collect::<Vec<_>>(),
            "diff": self.diff.map(|(b, n)| json!({"base": b, "new": n})),
            "listening": self.listening,
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
        let scopes: serde_json::Map<String, Value> = meta
            .scopes()
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
        let markers: serde_json::Map<String, Value> = meta
            .markers()
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
            "scopes": scopes,
            "markers": markers,
            "counters": idx.counters.keys().collect::<Vec<_>>(),
            "lives": idx.lives.sites(),
        })
    });
    if let (Some(Value::Object(m)), Value::Object(o)) = (more, &mut v) {
        o.extend(m);
    }
    v
}
