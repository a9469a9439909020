//! The pull endpoint (feature `http`): the profiles Go's `net/http/pprof` serves, from inside
//! the program, for `go tool pprof`, Grafana Alloy's `pyroscope.scrape` and the
//! OpenTelemetry Collector's `pprof` receiver.
//!
//! ```no_run
//! let server = tickscope::http::serve("127.0.0.1:6060")?;
//! // go tool pprof -top http://tickscope:TOKEN@127.0.0.1:6060/debug/pprof/profile?seconds=5
//! println!("{}", server.url());
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Or with no code: `TICKSCOPE_HTTP=127.0.0.1:6060` (a port alone, `6060` or `:6060`, is on
//! the loopback address), read at the process's first scope.
//!
//! | path | answer |
//! |---|---|
//! | `/debug/pprof/` | the index (HTML) |
//! | `/debug/pprof/profile?seconds=N` | the CPU profile of the next N seconds (30 by default, at most 300), gzipped pprof; the sampler runs only while asked |
//! | `/debug/pprof/heap`, `/debug/pprof/allocs` | the heap profile (`tickscope::alloc::Profiled`), gzipped pprof |
//! | `/debug/tickscope/summary` | the scopes' table so far, JSON (as `TICKSCOPE_SUMMARY=json`) |
//!
//! **Access.** Every request must carry the server's token, as a bearer token
//! (`Authorization: Bearer TOKEN`, Alloy's `bearer_token`) or as the password of basic
//! authentication (any user name: `http://tickscope:TOKEN@HOST:PORT/...`, which `go tool
//! pprof` sends); anything else is answered 401. The token is `TICKSCOPE_HTTP_TOKEN` when
//! set (at least 16 characters), else 128 random bits written to a file only this user can
//! read (`token` in a new 0700 directory of `$XDG_RUNTIME_DIR`, or of the temporary
//! directory), whose path is said on standard error and which is removed at exit. A
//! loopback port is open to every local user: the token is what keeps the profiles, and the
//! CPU the sampler costs, to the program's owner.
//!
//! **Limits.** At most [`MAX_CONNECTIONS`] requests at a time (more are answered 503), one
//! CPU profile at a time (a second is answered 409, as is one while the program's own
//! sampler runs); a request's head must arrive within 10 s and fit in 8 KiB (else 408 or
//! 431); an answer that cannot be written within 30 s is abandoned. In a setuid or setgid
//! program `TICKSCOPE_HTTP` is ignored, as every `TICKSCOPE_*` setting is.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

mod auth;

/// Requests served at once; more are answered 503 at once.
pub const MAX_CONNECTIONS: usize = 8;
/// The longest CPU profile asked for, in seconds.
pub const MAX_SECONDS: u64 = 300;
/// How long a request's head may take to arrive.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long writing an answer may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request head read.
const MAX_HEAD: usize = 8 * 1024;

/// A running endpoint; dropping it stops it (a CPU profile being taken ends early, answered
/// with what it has) and removes the token file it made.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    token_file: Option<PathBuf>,
    accept: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    token: String,
    stop: AtomicBool,
    open: AtomicUsize,
    profiling: AtomicBool,
}

/// Serves the endpoint on `addr` (see the module docs), with `TICKSCOPE_HTTP_TOKEN` or a
/// token of its own as the token.
pub fn serve(addr: impl ToSocketAddrs) -> io::Result<Server> {
    match crate::sys::env::env_var("TICKSCOPE_HTTP_TOKEN") {
        Some(t) => serve_with_token(addr, &t),
        None => start(addr, auth::random_token(), true),
    }
}

/// Serves the endpoint on `addr` with `token` (at least 16 characters) as the token.
pub fn serve_with_token(addr: impl ToSocketAddrs, token: &str) -> io::Result<Server> {
    auth::check_chosen(token)?;
    start(addr, token.to_string(), false)
}

fn start(addr: impl ToSocketAddrs, token: String, write_token: bool) -> io::Result<Server> {
    let listener = TcpListener::bind(addr)?;
    let addr = listener.local_addr()?;
    let token_file = if write_token {
        Some(auth::write_token_file(&token)?)
    } else {
        None
    };
    let shared = Arc::new(Shared {
        token,
        stop: AtomicBool::new(false),
        open: AtomicUsize::new(0),
        profiling: AtomicBool::new(false),
    });
    let s = shared.clone();
    let accept = std::thread::Builder::new()
        .name("tickscope-http".into())
        .spawn(move || crate::own::own(|| accept_loop(listener, s)))?;
    Ok(Server {
        addr,
        shared,
        token_file,
        accept: Some(accept),
    })
}

impl Server {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The token requests must carry.
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// The file holding the token, where the server made the token itself.
    pub fn token_file(&self) -> Option<&std::path::Path> {
        self.token_file.as_deref()
    }

    /// The index's URL with the token as basic authentication's password (what `go tool
    /// pprof` takes): a secret, as the token is.
    pub fn url(&self) -> String {
        format!(
            "http://tickscope:{}@{}/debug/pprof/",
            self.token(),
            self.addr
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        if let Some(f) = self.token_file.take() {
            auth::remove_token_file(&f);
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    for conn in listener.incoming() {
        if shared.stop.load(SeqCst) {
            return;
        }
        let Ok(mut conn) = conn else { continue };
        let _ = conn.set_read_timeout(Some(READ_TIMEOUT));
        let _ = conn.set_write_timeout(Some(WRITE_TIMEOUT));
        if shared.open.fetch_add(1, SeqCst) >= MAX_CONNECTIONS {
            shared.open.fetch_sub(1, SeqCst);
            let _ = respond(&mut conn, 503, "text/plain", b"too many requests at once\n");
            continue;
        }
        let s = shared.clone();
        let spawned = std::thread::Builder::new()
            .name("tickscope-http-req".into())
            .spawn(move || {
                crate::own::own(|| handle(conn, &s));
                s.open.fetch_sub(1, SeqCst);
            });
        if spawned.is_err() {
            shared.open.fetch_sub(1, SeqCst);
        }
    }
}

/// Reads one request's head (to the blank line), within [`READ_TIMEOUT`] and [`MAX_HEAD`].
fn read_head(conn: &mut TcpStream) -> Result<Vec<u8>, u16> {
    let deadline = Instant::now() + READ_TIMEOUT;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            return Ok(buf);
        }
        if buf.len() >= MAX_HEAD {
            return Err(431);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(408);
        }
        let _ = conn.set_read_timeout(Some(left));
        match conn.read(&mut chunk) {
            Ok(0) => return Err(400),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err(408),
        }
    }
}

fn handle(mut conn: TcpStream, shared: &Shared) {
    let head = match read_head(&mut conn) {
        Ok(h) => h,
        Err(code) => {
            let _ = respond(&mut conn, code, "text/plain", b"bad request\n");
            return;
        }
    };
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let (method, target) = match req.parse(&head) {
        Ok(httparse::Status::Complete(_)) => (
            req.method.unwrap_or("").to_string(),
            req.path.unwrap_or("").to_string(),
        ),
        _ => {
            let _ = respond(&mut conn, 400, "text/plain", b"malformed request\n");
            return;
        }
    };
    if method != "GET" && method != "HEAD" {
        let _ = respond(&mut conn, 405, "text/plain", b"only GET\n");
        return;
    }
    let authorized = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("authorization"))
        .any(|h| auth::allows(h.value, &shared.token));
    if !authorized {
        let _ = respond_401(&mut conn);
        return;
    }
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let (code, kind, body) = answer(path, query, shared);
    let body = if method == "HEAD" { Vec::new() } else { body };
    let _ = respond(&mut conn, code, kind, &body);
}

/// The answer to an authorized GET of `path`: status, content type, body.
fn answer(path: &str, query: &str, shared: &Shared) -> (u16, &'static str, Vec<u8>) {
    const PPROF: &str = "application/octet-stream";
    const TEXT: &str = "text/plain; charset=utf-8";
    match path {
        "/debug/pprof" | "/debug/pprof/" => (200, "text/html; charset=utf-8", INDEX.into()),
        "/debug/pprof/profile" => match seconds(query) {
            Ok(s) => cpu_profile(s, shared),
            Err(e) => (400, TEXT, e.into_bytes()),
        },
        "/debug/pprof/heap" | "/debug/pprof/allocs" => {
            let mut out = Vec::new();
            match crate::alloc::profile().write_pprof_to(&mut out) {
                Ok(()) => (200, PPROF, out),
                Err(e) => (500, TEXT, format!("{e}\n").into_bytes()),
            }
        }
        "/debug/tickscope/summary" => (
            200,
            "application/json",
            crate::report_string(crate::SummaryFormat::Json).into_bytes(),
        ),
        _ => (404, TEXT, b"not found: see /debug/pprof/\n".to_vec()),
    }
}

/// The `seconds` parameter: 30 by default, 1 to [`MAX_SECONDS`].
fn seconds(query: &str) -> Result<u64, String> {
    let Some(v) = query.split('&').find_map(|kv| kv.strip_prefix("seconds=")) else {
        return Ok(30);
    };
    match v.parse::<u64>() {
        Ok(s) if (1..=MAX_SECONDS).contains(&s) => Ok(s),
        _ => Err(format!(
            "seconds={v:?}: expected a whole number of seconds from 1 to {MAX_SECONDS}\n"
        )),
    }
}

/// The CPU profile of the next `secs` seconds (sooner if the server stops).
fn cpu_profile(secs: u64, shared: &Shared) -> (u16, &'static str, Vec<u8>) {
    const TEXT: &str = "text/plain; charset=utf-8";
    if shared.profiling.swap(true, SeqCst) {
        return (
            409,
            TEXT,
            b"a CPU profile is being taken already\n".to_vec(),
        );
    }
    let r = (|| {
        let sampler = match crate::sampler::Sampler::builder().start() {
            Ok(s) => s,
            Err(e) => return (409, TEXT, format!("cannot sample: {e}\n").into_bytes()),
        };
        let end = Instant::now() + Duration::from_secs(secs);
        while !shared.stop.load(SeqCst) {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // Waiting out the profile's length, a slice at a time to see a stop.
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
        let mut out = Vec::new();
        match sampler.stop().write_pprof_to(&mut out) {
            Ok(()) => (200, "application/octet-stream", out),
            Err(e) => (500, TEXT, format!("{e}\n").into_bytes()),
        }
    })();
    shared.profiling.store(false, SeqCst);
    r
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

fn respond(conn: &mut TcpStream, code: u16, kind: &str, body: &[u8]) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        reason(code),
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body)?;
    conn.flush()
}

fn respond_401(conn: &mut TcpStream) -> io::Result<()> {
    let body = b"the token is needed: Authorization: Bearer TOKEN, or basic authentication with the token as the password\n";
    let head = format!(
        "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"tickscope\"\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes())?;
    conn.write_all(body)
}

const INDEX: &str = "<!doctype html><title>tickscope: /debug/pprof/</title>\
<h1>/debug/pprof/</h1><ul>\
<li><a href=\"profile?seconds=30\">profile</a>: the CPU profile of the next N seconds (<code>?seconds=N</code>)</li>\
<li><a href=\"heap\">heap</a>, <a href=\"allocs\">allocs</a>: the sampled heap profile (in use and allocated)</li>\
<li><a href=\"../tickscope/summary\">../tickscope/summary</a>: the scopes' table so far, JSON</li>\
</ul>";

/// The endpoint `TICKSCOPE_HTTP` started, kept for the process's life.
static FROM_ENV: OnceLock<Mutex<Option<Server>>> = OnceLock::new();

/// Starts the endpoint `TICKSCOPE_HTTP` names, if any (at first use).
pub(crate) fn serve_from_env() {
    let Some(v) = crate::sys::env::env_var("TICKSCOPE_HTTP") else {
        return;
    };
    let addr = match v.trim() {
        p if p.parse::<u16>().is_ok() => format!("127.0.0.1:{p}"),
        p if p.starts_with(':') => format!("127.0.0.1{p}"),
        p => p.to_string(),
    };
    match serve(addr.as_str()) {
        Ok(s) => {
            let where_ = match s.token_file() {
                Some(f) => format!("the token in {}", f.display()),
                None => "the token TICKSCOPE_HTTP_TOKEN".to_string(),
            };
            crate::sys::stderr::say(&format!(
                "tickscope: serving http://{}/debug/pprof/ ({where_})",
                s.local_addr()
            ));
            let _ = FROM_ENV.set(Mutex::new(Some(s)));
        }
        Err(e) => crate::sys::stderr::warn(&format!("TICKSCOPE_HTTP={v:?}: {e}")),
    }
}

/// At the process's exit: the endpoint `TICKSCOPE_HTTP` started removes its token file.
pub(crate) fn at_exit() {
    if let Some(m) = FROM_ENV.get() {
        if let Ok(mut g) = m.try_lock() {
            if let Some(s) = g.as_mut() {
                if let Some(f) = s.token_file.take() {
                    auth::remove_token_file(&f);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
