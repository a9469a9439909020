//! The HTTP server: hyper over HTTP/1.1 on a one-thread tokio runtime; requests that read the
//! capture or prepare a profile view run on tokio's blocking threads, so a slow one never
//! holds the others.
//!
//! An answer that needs what is still being built (the index, the summary) is a 202 with
//! `{"pending": …}`: ask again.
//!
//! Every request must carry the viewer's token (the `token` query parameter, or the
//! `X-Tickscope-Token` header; the page's scripts, in their path): without it the answer is
//! 403, whatever the path. No request names a file: the files are those given on the command
//! line, by position.
//!
//! | path | answer |
//! |---|---|
//! | `/` | the page (HTML with its style inline, no inline script) |
//! | `/assets/TOKEN/NAME.js` | the page's script: ES modules by view (`ASSETS`), `main.js` first |
//! | `/api/info` | JSON: the files, each capture's threads, scopes, markers and state |
//! | `/api/timeline?c=&from=&until=&px=` | a window, binary ([`crate::wire`]) |
//! | `/api/summary?c=[&from=&until=]` | `tickscope report --json [--from --until]` |
//! | `/api/scope?c=&thread=&depth=&at=` | the scope there: times, self time, children |
//! | `/api/slowest?c=&id=[&from=&until=]` | where scope `id`'s slowest call (the summary's `max`) is: thread, depth, begin, end |
//! | `/api/samples?c=&from=&until=[&tid=]` | the range's CPU samples: flame tree and top |
//! | `/api/top?p=`, `/api/flame?p=[&reverse=1]` | `tickscope top --json`; a flame tree |
//! | `/api/peek?p=&name=`, `/api/list?p=&name=` | `peek` and `list` of one function |
//! | `/api/diff` | the differential flame tree and `diff`'s table |
//! | `&si=` on the four above and `diff` | the sample type shown (`--sample-index`: a number or a name, `inuse_space`) |

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};

use crate::index::query::Window;
use crate::Viewer;

/// The page, up to its script: HTML and style, in the binary.
const PAGE_HEAD: &str = concat!(
    include_str!("../assets/head.html"),
    "<style>",
    include_str!("../assets/app.css"),
    "</style>\n"
);

/// The page's script, in the binary: ES modules by view, which import one another by relative
/// URLs (no bundler). `main.js`, which the page loads, wires them. They are served at
/// `/assets/TOKEN/NAME`: a module's imports are fetched by the browser at URLs resolved
/// against the module's own, which keep its path but not its query, and without the page's
/// headers, so the token travels in the path.
const ASSETS: &[(&str, &str)] = &[
    ("main.js", include_str!("../assets/main.js")),
    ("state.js", include_str!("../assets/state.js")),
    ("wire.js", include_str!("../assets/wire.js")),
    ("util.js", include_str!("../assets/util.js")),
    ("tabs.js", include_str!("../assets/tabs.js")),
    ("timeline.js", include_str!("../assets/timeline.js")),
    ("tracks.js", include_str!("../assets/tracks.js")),
    ("panes.js", include_str!("../assets/panes.js")),
    ("tables.js", include_str!("../assets/tables.js")),
    ("flame.js", include_str!("../assets/flame.js")),
    ("profile.js", include_str!("../assets/profile.js")),
    ("source.js", include_str!("../assets/source.js")),
];

/// The page, for the viewer of `token` (in hex: nothing to escape): it loads its script from
/// the token's path.
fn page(token: &str) -> String {
    format!(
        "{PAGE_HEAD}<script type=\"module\" src=\"/assets/{token}/main.js\"></script>\n</body></html>\n"
    )
}

/// Serves `viewer` on `listener` until the process ends.
///
/// Connections are bounded ([`crate::Limits`]): at most `http_connections` at once; one
/// that has not sent a request with the token within `token_timeout` of opening is closed,
/// and so is one that waits `idle_timeout` for a request's headers (idle between requests,
/// or sending them slowly). At the cap, a new connection closes the oldest one that has
/// not shown the token (or, with none such, is closed itself): whoever holds the cap
/// without the token must keep opening connections, and the user's own request, which
/// sends the token at once, gets in.
pub fn serve(viewer: Arc<Viewer>, listener: TcpListener) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .max_blocking_threads(4)
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let conns = Arc::new(Mutex::new(Conns::default()));
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(s) => s,
                // Out of descriptors, say: free one, try again shortly rather than end the
                // server.
                Err(_) => {
                    lock(&conns).evict();
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Some((id, conn)) = lock(&conns).admit(viewer.limits.http_connections) else {
                continue; // dropped: every connection held has shown the token
            };
            tokio::spawn(connection(viewer.clone(), conns.clone(), id, conn, stream));
        }
    })
}

/// One connection's state, as the accept loop sees it.
#[derive(Clone, Default)]
struct Conn {
    /// Returns true once a request with the token came on it.
    authorized: Arc<AtomicBool>,
    /// Tells it to close.
    close: Arc<tokio::sync::Notify>,
}

/// The open connections, oldest first.
#[derive(Default)]
struct Conns {
    next: u64,
    open: BTreeMap<u64, Conn>,
}

impl Conns {
    /// Closes the oldest connection that has not shown the token; returns false when
    /// there is none.
    fn evict(&mut self) -> bool {
        let oldest = self
            .open
            .iter()
            .find(|(_, c)| !c.authorized.load(Relaxed))
            .map(|(&id, _)| id);
        match oldest.and_then(|id| self.open.remove(&id)) {
            Some(c) => {
                // A permit kept if the connection is not waiting yet.
                c.close.notify_one();
                true
            }
            None => false,
        }
    }

    /// A place for a new connection, made at the cap by evicting one: `None` when none
    /// can be.
    fn admit(&mut self, cap: usize) -> Option<(u64, Conn)> {
        while self.open.len() >= cap.max(1) {
            if !self.evict() {
                return None;
            }
        }
        let id = self.next;
        self.next += 1;
        let c = Conn::default();
        self.open.insert(id, c.clone());
        Some((id, c))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Serves one connection until it ends, is evicted, or outlives its timeouts.
async fn connection(
    viewer: Arc<Viewer>,
    conns: Arc<Mutex<Conns>>,
    id: u64,
    conn: Conn,
    stream: tokio::net::TcpStream,
) {
    let limits = viewer.limits.clone();
    let authorized = conn.authorized.clone();
    let service = service_fn(move |req| handle(viewer.clone(), authorized.clone(), req));
    let serving = http1::Builder::new()
        .timer(TokioTimer::new())
        // Runs from when the connection waits for a request: idle time counts.
        .header_read_timeout(limits.idle_timeout)
        .serve_connection(TokioIo::new(stream), service);
    let unauthorized = async {
        tokio::time::sleep(limits.token_timeout).await;
        if conn.authorized.load(Relaxed) {
            std::future::pending::<()>().await;
        }
    };
    // Whichever comes first; dropping the others closes the connection.
    let (mut serving, mut evicted, mut unauthorized) = (
        std::pin::pin!(serving),
        std::pin::pin!(conn.close.notified()),
        std::pin::pin!(unauthorized),
    );
    std::future::poll_fn(|cx| {
        let done = serving.as_mut().poll(cx).is_ready()
            || evicted.as_mut().poll(cx).is_ready()
            || unauthorized.as_mut().poll(cx).is_ready();
        if done {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    lock(&conns).open.remove(&id);
}

type Resp = Response<Full<Bytes>>;

fn respond(status: StatusCode, kind: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    r
}

fn json_resp(v: &Value) -> Resp {
    respond(StatusCode::OK, "application/json", v.to_string())
}

fn error(status: StatusCode, message: &str) -> Resp {
    respond(
        status,
        "application/json",
        json!({ "error": message }).to_string(),
    )
}

/// The query string's parameters, percent-decoded.
pub(crate) fn params(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

struct Query(Vec<(String, String)>);

impl Query {
    fn get(&self, k: &str) -> Option<&str> {
        self.0.iter().find(|p| p.0 == k).map(|p| p.1.as_str())
    }

    /// A number parameter: `Err` names it when it is missing (and `required`) or not a
    /// number.
    fn num(&self, k: &str, required: bool) -> Result<Option<u64>, String> {
        match self.get(k) {
            None if required => Err(format!("parameter {k} is missing")),
            None => Ok(None),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && *f >= 0.0 && *f < 1.8e19)
                .map(|f| Some(f as u64))
                .ok_or_else(|| format!("parameter {k}={v:?} is not a number")),
        }
    }
}

async fn handle(
    viewer: Arc<Viewer>,
    authorized: Arc<AtomicBool>,
    req: Request<Incoming>,
) -> Result<Resp, Infallible> {
    let q = Query(params(req.uri().query().unwrap_or("")));
    let path = req.uri().path().to_owned();
    // A script of the page: /assets/TOKEN/NAME, the token in its path (see ASSETS) and nowhere
    // else.
    let asset = path
        .strip_prefix("/assets/")
        .and_then(|p| p.split_once('/'));
    let token = match asset {
        Some((t, _)) => Some(t.as_bytes().to_vec()),
        None => q.get("token").map(|t| t.as_bytes().to_vec()).or_else(|| {
            req.headers()
                .get("x-tickscope-token")
                .map(|h| h.as_bytes().to_vec())
        }),
    };
    if !token.is_some_and(|t| same(&t, viewer.token.as_bytes())) {
        return Ok(error(
            StatusCode::FORBIDDEN,
            "forbidden: the request has no token or a wrong one (open the URL tickscope view printed)",
        ));
    }
    authorized.store(true, Relaxed);
    if req.method() != Method::GET {
        return Ok(error(StatusCode::METHOD_NOT_ALLOWED, "only GET"));
    }
    if let Some((_, name)) = asset {
        return Ok(match ASSETS.iter().find(|a| a.0 == name) {
            Some((_, text)) => respond(StatusCode::OK, "text/javascript; charset=utf-8", *text),
            None => error(StatusCode::NOT_FOUND, &format!("no such asset: {name}")),
        });
    }
    if path == "/" {
        // The browser is here: the file that sent it is not needed any more.
        viewer.page_served();
        return Ok(respond(
            StatusCode::OK,
            "text/html; charset=utf-8",
            page(&viewer.token),
        ));
    }
    let v = viewer.clone();
    let r = tokio::task::spawn_blocking(move || api(&v, &path, &q)).await;
    Ok(match r {
        Ok(r) => r,
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the request failed"),
    })
}

/// A window's lives as JSON: per call site its lanes of `[begin_ns, end_ns, how]` (how: 0
/// ended, 1 cancelled, 2 alive at the end, 3 begun before the capture), its narrower lives
/// as `[pixel, count]`, and how many were left out.
fn lives_json(sites: &[crate::index::lives::SiteLives]) -> Value {
    let sites: Vec<Value> = sites
        .iter()
        .map(|s| {
            let lanes: Vec<Value> = s
                .lanes
                .iter()
                .map(|lane| {
                    lane.iter()
                        .map(|l| json!([l.begin_ns.round(), l.end_ns.round(), l.how as u8]))
                        .collect()
                })
                .collect();
            json!({
                "site": s.site,
                "lanes": lanes,
                "narrow": s.narrow,
                "hidden": s.hidden,
                "ended": s.ended,
            })
        })
        .collect();
    json!({ "sites": sites })
}

/// An API request, on a blocking thread.
fn api(v: &Viewer, path: &str, q: &Query) -> Resp {
    let bad = |m: String| error(StatusCode::BAD_REQUEST, &m);
    let capture = || -> Result<Arc<crate::capture::Capture>, String> {
        let c = q.num("c", true)?.unwrap_or(0) as usize;
        v.capture(c).ok_or_else(|| format!("no capture {c}"))
    };
    // A profile's sample type (`--sample-index`: a number or a type's name).
    let si = q.get("si");
    let profile = || -> Result<&crate::profiles::ProfileDoc, String> {
        let p = q.num("p", true)?.unwrap_or(0) as usize;
        v.profiles.get(p).ok_or_else(|| format!("no profile {p}"))
    };
    let range = || -> Result<Option<(u64, u64)>, String> {
        match (q.num("from", false)?, q.num("until", false)?) {
            (None, None) => Ok(None),
            (f, u) => {
                let (f, u) = (f.unwrap_or(0), u.unwrap_or(u64::MAX));
                if u <= f {
                    return Err(format!("the range ends ({u}) before it begins ({f})"));
                }
                Ok(Some((f, u)))
            }
        }
    };
    // Not an error: asked again shortly (202, so that browsers do not log a failure).
    let not_ready = || {
        respond(
            StatusCode::ACCEPTED,
            "application/json",
            json!({ "pending": "the capture is being indexed" }).to_string(),
        )
    };
    // A window of the capture: from, until (ns) and its width in pixels.
    let window = || -> Result<Window, String> {
        Window::new(
            q.num("from", true)?.unwrap_or(0),
            q.num("until", true)?.unwrap_or(0),
            q.num("px", true)?.unwrap_or(0).min(u32::MAX as u64) as u32,
        )
    };
    let result: Result<Resp, String> = (|| match path {
        "/api/info" => Ok(json_resp(&v.info())),
        "/api/timeline" => {
            let c = capture()?;
            let w = window()?;
            Ok(match c.query(w) {
                None => not_ready(),
                Some(Ok(a)) => respond(
                    StatusCode::OK,
                    "application/octet-stream",
                    crate::wire::encode(&a),
                ),
                Some(Err(e)) => error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("{}: {e}", c.name),
                ),
            })
        }
        "/api/lives" => {
            let c = capture()?;
            let w = window()?;
            Ok(match c.lives(w) {
                None => not_ready(),
                Some(sites) => json_resp(&lives_json(&sites)),
            })
        }
        "/api/summary" => {
            let c = capture()?;
            let s = match range()? {
                None => c.summary(),
                Some(r) => c.range_summary(Some(r)).map(|s| s.map(Arc::new)),
            };
            Ok(match s {
                None => not_ready(),
                Some(Ok(s)) => {
                    let mut out = Vec::new();
                    let _ = s.write_json(&mut out);
                    respond(StatusCode::OK, "application/json", out)
                }
                Some(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e),
            })
        }
        "/api/slowest" => {
            let c = capture()?;
            let id = q.num("id", true)?.unwrap_or(0);
            Ok(match c.slowest(id, range()?) {
                None => not_ready(),
                Some(Ok(call)) => json_resp(&match call {
                    Some(k) => serde_json::json!({
                        "thread": k.thread,
                        "depth": k.depth,
                        "begin_ns": k.begin_ns,
                        "end_ns": k.end_ns,
                    }),
                    None => serde_json::Value::Null,
                }),
                Some(Err(e)) => error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("{}: {e}", c.name),
                ),
            })
        }
        "/api/scope" => {
            let c = capture()?;
            let thread = q.num("thread", true)?.unwrap_or(0);
            let depth = q.num("depth", true)?.unwrap_or(0).min(1 << 16) as usize;
            let at = q.num("at", true)?.unwrap_or(0);
            Ok(match c.scope_at(thread, depth, at) {
                None => not_ready(),
                Some(Ok(d)) => json_resp(&v.details(&c, d)),
                Some(Err(e)) => error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("{}: {e}", c.name),
                ),
            })
        }
        "/api/samples" => {
            let c = capture()?;
            let (f, u) = range()?.unwrap_or((0, u64::MAX));
            let tids: Vec<u64> = q.num("tid", false)?.into_iter().collect();
            Ok(match c.samples(f, u, &tids) {
                None => not_ready(),
                Some(Ok(p)) => {
                    let doc = crate::profiles::ProfileDoc::of(c.name.clone(), p, "", Vec::new());
                    match (doc.flame(false, None), doc.top(None)) {
                        (Ok(mut flame), Ok(top)) => {
                            flame["top"] = top;
                            json_resp(&flame)
                        }
                        (Err(e), _) | (_, Err(e)) => bad(e),
                    }
                }
                Some(Err(e)) => error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!("{}: {e}", c.name),
                ),
            })
        }
        "/api/top" => Ok(json_resp(&profile()?.top(si)?)),
        "/api/flame" => Ok(json_resp(
            &profile()?.flame(q.get("reverse") == Some("1"), si)?,
        )),
        "/api/peek" => {
            let name = q.get("name").ok_or("parameter name is missing")?;
            Ok(json_resp(&profile()?.peek(name, si)?))
        }
        "/api/list" => {
            let name = q.get("name").ok_or("parameter name is missing")?;
            Ok(json_resp(&profile()?.list(name, si)?))
        }
        "/api/diff" => match v.diff {
            Some((b, n)) => Ok(json_resp(&crate::profiles::diff(
                &v.profiles[b],
                &v.profiles[n],
                si,
            )?)),
            None => Err("no diff: start the viewer with --diff BASE NEW".into()),
        },
        _ => Ok(error(
            StatusCode::NOT_FOUND,
            &format!("no such path: {path}"),
        )),
    })();
    result.unwrap_or_else(bad)
}
