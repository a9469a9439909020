//! What anyone local can make the viewer hold, without its token: page connections beyond
//! the cap do not keep out the user's request, connections without the token or idle are
//! closed after their timeouts; a live connection counts as a capture only once it sends a
//! header, only from this user's sockets, up to the captures' cap and memory budget, each
//! refusal said. Timeouts are made short through `Limits`; every wait polls with a
//! generous deadline.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickscope_view::{start, Config, Limits, Viewer};

use crate::server::{capture_file, dir, json};

/// How long a test waits for what should come at once (a loaded machine is slow).
const DEADLINE: Duration = Duration::from_secs(60);

struct Served {
    addr: String,
    token: String,
    live: Vec<SocketAddr>,
    viewer: Arc<Viewer>,
}

fn serve(inputs: Vec<String>, limits: Limits) -> Served {
    let s = start(&Config {
        inputs,
        limits,
        ..Config::default()
    })
    .unwrap();
    let (viewer, live) = (s.viewer.clone(), s.live.clone());
    let rest = s.url.strip_prefix("http://").unwrap().to_owned();
    std::thread::spawn(move || s.serve());
    let (addr, token) = rest.split_once("/?token=").unwrap();
    Served {
        addr: addr.to_owned(),
        token: token.to_owned(),
        live,
        viewer,
    }
}

/// Returns true if and only if the server closes `s` (end of stream or reset) within
/// `within`; what it sends before is read and dropped.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let end = Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => {
                return true
            }
            Err(_) => return false,
        }
    }
}

/// A keep-alive GET on `s`: the status, the body read to its Content-Length.
fn request(s: &mut TcpStream, path: &str) -> u16 {
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = Vec::new();
    let mut b = [0u8; 4096];
    let head = loop {
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed before an answer");
        buf.extend_from_slice(&b[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let text = String::from_utf8_lossy(&buf[..head]).to_ascii_lowercase();
    let len: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    while buf.len() < head + len {
        let n = s.read(&mut b).unwrap();
        assert!(n > 0, "closed mid-answer");
        buf.extend_from_slice(&b[..n]);
    }
    text.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn idle_connections_beyond_the_cap_leave_room_for_a_request_with_the_token() {
    let d = dir("cap");
    let v = serve(
        vec![capture_file(&d)],
        Limits {
            http_connections: 16,
            // Long enough that none expires during the test: the cap alone makes room.
            token_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(600),
            ..Limits::default()
        },
    );
    // The user's connection, with the token: it keeps its place.
    let mut mine = TcpStream::connect(&v.addr).unwrap();
    assert_eq!(
        request(&mut mine, &format!("/api/info?token={}", v.token)),
        200
    );
    let mut idle: Vec<TcpStream> = (0..48)
        .map(|_| TcpStream::connect(&v.addr).unwrap())
        .collect();
    // A new request with the token gets in.
    let end = Instant::now() + DEADLINE;
    let info = json(&v.addr, &format!("/api/info?token={}", v.token));
    assert!(info["captures"].is_array(), "{info}");
    assert!(Instant::now() < end);
    // The server holds no more than its cap (mine and 14 idle ones once the request has
    // ended): the oldest idle ones were closed.
    let want = 48 - 14;
    let end = Instant::now() + DEADLINE;
    let mut closed = vec![false; idle.len()];
    while closed.iter().filter(|&&c| c).count() < want {
        for (s, c) in idle.iter_mut().zip(&mut closed) {
            s.set_nonblocking(true).unwrap();
            // The end of the stream, or a reset: closed; would block: open.
            *c |= match s.read(&mut [0u8; 64]) {
                Ok(n) => n == 0,
                Err(e) => e.kind() != ErrorKind::WouldBlock,
            };
        }
        let n = closed.iter().filter(|&&c| c).count();
        assert!(
            Instant::now() < end,
            "only {n} of 48 idle connections closed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The user's own connection was not among them.
    assert_eq!(
        request(&mut mine, &format!("/api/info?token={}", v.token)),
        200
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn connections_without_the_token_or_idle_are_closed_after_their_timeouts() {
    let d = dir("timeouts");
    let v = serve(
        vec![capture_file(&d)],
        Limits {
            token_timeout: Duration::from_millis(300),
            idle_timeout: Duration::from_millis(600),
            ..Limits::default()
        },
    );
    // Sends nothing.
    let mut silent = TcpStream::connect(&v.addr).unwrap();
    // Sends half a request, then nothing.
    let mut slow = TcpStream::connect(&v.addr).unwrap();
    slow.write_all(b"GET /api/info?tok").unwrap();
    // Asks with a wrong token, keeps the connection.
    let mut wrong = TcpStream::connect(&v.addr).unwrap();
    assert_eq!(request(&mut wrong, "/api/info?token=nope"), 403);
    // Asks with the token, then stays idle.
    let mut idle = TcpStream::connect(&v.addr).unwrap();
    assert_eq!(
        request(&mut idle, &format!("/api/info?token={}", v.token)),
        200
    );
    for (what, s) in [
        ("silent", &mut silent),
        ("slow", &mut slow),
        ("wrong token", &mut wrong),
        ("idle after a request", &mut idle),
    ] {
        assert!(closed_within(s, DEADLINE), "{what}: still open");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// The viewer's notices, once one says `what` (polled until the deadline).
fn notice(v: &Served, what: &str) -> serde_json::Value {
    let end = Instant::now() + DEADLINE;
    loop {
        let info = json(&v.addr, &format!("/api/info?token={}", v.token));
        let latest = &info["notices"]["latest"];
        if latest
            .as_array()
            .is_some_and(|l| l.iter().any(|n| n.as_str().unwrap().contains(what)))
        {
            return info;
        }
        assert!(Instant::now() < end, "no notice saying {what:?}: {info}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn live_viewer(limits: Limits) -> Served {
    serve(vec!["tcp://127.0.0.1:0".into()], limits)
}

/// Sends `bytes` as one live connection and waits until the viewer has ended it.
fn send(v: &Served, bytes: &[u8]) {
    let mut s = TcpStream::connect(v.live[0]).unwrap();
    // The viewer may stop reading (the budget): what it did not take is not an error.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(std::net::Shutdown::Write);
    assert!(
        closed_within(&mut s, DEADLINE),
        "the viewer kept the connection"
    );
}

#[test]
fn a_live_connection_without_a_header_is_closed_and_is_no_capture() {
    let v = live_viewer(Limits {
        live_header_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut s = TcpStream::connect(v.live[0]).unwrap();
    assert!(closed_within(&mut s, DEADLINE), "still open");
    let info = notice(&v, "sent nothing for 0.3 s");
    assert_eq!(info["captures"].as_array().unwrap().len(), 0, "{info}");
    assert_eq!(v.viewer.live_captures(), 0);
}

#[test]
fn live_captures_past_the_cap_are_refused_and_said() {
    let v = live_viewer(Limits {
        live_captures: 2,
        ..Limits::default()
    });
    let capture = crate::writer_capture();
    for _ in 0..3 {
        send(&v, &capture);
    }
    let info = notice(&v, "2 live captures are held already");
    let captures = info["captures"].as_array().unwrap();
    assert_eq!(captures.len(), 2, "{info}");
    assert!(
        captures.iter().all(|c| c["status"]["error"].is_null()),
        "{info}"
    );
}

#[test]
fn live_captures_stop_at_their_memory_budget_with_what_came_before_kept() {
    let capture = crate::writer_capture();
    let v = live_viewer(Limits {
        live_bytes: capture.len() as u64 / 2,
        ..Limits::default()
    });
    send(&v, &capture);
    let info = notice(&v, "live captures' memory");
    let c = &info["captures"][0];
    let size = c["status"]["size"].as_u64().unwrap();
    assert!(size > 0 && size <= capture.len() as u64 / 2, "{c}");
    assert!(v.viewer.live_budget.used() <= capture.len() as u64 / 2);
    // Later connections are refused while it is spent.
    send(&v, &capture);
    notice(&v, "refused the live connection");
    assert_eq!(v.viewer.live_captures(), 1);
}

/// Set in the environment of the test binary run as another user.
const SEND_TO: &str = "TICKSCOPE_TEST_SEND_TO";

/// Not a test of its own: the sender that `a_live_connection_from_another_user_is_refused`
/// runs as another user (it does nothing without SEND_TO).
#[test]
#[ignore = "run by a_live_connection_from_another_user_is_refused"]
fn live_sender_for_the_uid_test() {
    let Ok(addr) = std::env::var(SEND_TO) else {
        return;
    };
    let mut s = TcpStream::connect(addr).unwrap();
    let _ = s.write_all(&crate::writer_capture());
    let _ = s.shutdown(std::net::Shutdown::Write);
    assert!(closed_within(&mut s, DEADLINE));
}

#[test]
fn a_live_connection_from_another_user_is_refused() {
    use std::os::unix::process::CommandExt;
    let root = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    if root.ok() != Some(0) {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI runs as root: this test must run there"
        );
        println!("skipped: a connection from another user needs root to make (CI runs it)");
        return;
    }
    let v = live_viewer(Limits::default());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "limits::live_sender_for_the_uid_test",
        ])
        .env(SEND_TO, v.live[0].to_string())
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the sender as user 65534: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let info = notice(&v, "belongs to user 65534");
    assert_eq!(info["captures"].as_array().unwrap().len(), 0, "{info}");
    // The same capture from this user is taken.
    send(&v, &crate::writer_capture());
    assert_eq!(v.viewer.live_captures(), 1);
}

/// A capture of `n` scopes, each defined and called once, on one thread.
fn many_scopes(n: u64) -> Vec<u8> {
    use crate::writer::{process_payload, scope, thread, Capture, Ev, PROCESS};
    let mut c = Capture::with_version(2);
    c.chunk(PROCESS, &process_payload(1e9, 1000, 0, 7, "many"));
    let mut meta: Vec<_> = (1..=n)
        .map(|i| scope(i, &format!("s{i}"), "m.rs", i))
        .collect();
    meta.push(thread(1, 101, "one"));
    c.meta(&meta);
    let evs: Vec<Ev> = (1..=n)
        .flat_map(|i| [Ev::Begin(i, 1000 + 10 * i), Ev::End(i, 1000 + 10 * i + i)])
        .collect();
    for part in evs.chunks(4000) {
        c.events(1, &[], part);
    }
    c.bytes
}

#[test]
fn answers_list_a_bounded_number_of_rows_and_count_the_rest() {
    let rows = tickscope_view::ANSWER_ROWS as u64;
    let d = dir("rows");
    let path = d.join("many.tscap");
    std::fs::write(&path, many_scopes(rows + 500)).unwrap();
    let v = serve(vec![path.display().to_string()], Limits::default());
    let end = Instant::now() + DEADLINE;
    let summary = loop {
        let (status, body) =
            crate::server::get(&v.addr, &format!("/api/summary?token={}&c=0", v.token));
        if status == 200 {
            break serde_json::from_slice::<serde_json::Value>(&body).unwrap();
        }
        assert!(Instant::now() < end, "no summary");
        std::thread::sleep(Duration::from_millis(10));
    };
    let scopes = summary["scopes"].as_array().unwrap();
    assert_eq!(scopes.len() as u64, rows);
    // The largest kept: scope i lasts i ticks.
    assert_eq!(scopes[0]["name"], format!("s{}", rows + 500));
    let warned = summary["warnings"].to_string();
    assert!(warned.contains("500 scopes"), "{warned}");
    let range = json(
        &v.addr,
        &format!("/api/summary?token={}&c=0&from=0&until=1000000000", v.token),
    );
    assert_eq!(range["scopes"].as_array().unwrap().len() as u64, rows);
    let info = json(&v.addr, &format!("/api/info?token={}", v.token));
    let c = &info["captures"][0];
    assert_eq!(
        c["scopes"].as_object().unwrap().len() as u64,
        rows,
        "{}",
        c["left_out"]
    );
    assert!(c["scopes"]["1"].is_array() && c["scopes"][rows.to_string()].is_array());
    assert_eq!(c["left_out"]["scopes"], 500);
    let _ = std::fs::remove_dir_all(&d);
}
