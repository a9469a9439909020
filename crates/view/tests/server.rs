//! The server in-process, over real HTTP on loopback: every request needs the token; bad
//! requests are 400s, never a hang or an allocation of their size; the answers are what the
//! library computes; files are checked before anything is served.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use tickscope_view::{start, Config};

/// A GET of `path` (with its query) on the server at `addr`: (status, body).
pub(crate) fn get(addr: &str, path: &str) -> (u16, Vec<u8>) {
    let (status, _, body) = get_with_head(addr, path);
    (status, body)
}

/// A GET of `path` on the server at `addr`: (status, the response's head, body).
fn get_with_head(addr: &str, path: &str) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let head_end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head")
        + 4;
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let mut body = buf[head_end..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    (status, head, body)
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line = b.windows(2).position(|w| w == b"\r\n").unwrap();
        let n = usize::from_str_radix(std::str::from_utf8(&b[..line]).unwrap().trim(), 16).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&b[line + 2..line + 2 + n]);
        b = &b[line + 2 + n + 2..];
    }
}

pub(crate) fn json(addr: &str, path: &str) -> serde_json::Value {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

/// A viewer of `inputs` served from a thread: (host:port, token).
fn serve(inputs: Vec<String>) -> (String, String) {
    let s = start(&Config {
        inputs,
        ..Config::default()
    })
    .unwrap();
    let url = s.url.clone();
    std::thread::spawn(move || s.serve());
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, query) = rest.split_once("/?token=").unwrap();
    (addr.to_owned(), query.to_owned())
}

pub(crate) fn dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "tickscope-view-server-{}-{name}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small capture on disk (the generator of the index tests).
pub(crate) fn capture_file(d: &std::path::Path) -> String {
    let c = crate::writer_capture();
    let p = d.join("small.tscap");
    std::fs::write(&p, c).unwrap();
    p.display().to_string()
}

#[test]
fn requests_without_the_token_are_refused_whatever_the_path() {
    let d = dir("token");
    let (addr, token) = serve(vec![capture_file(&d)]);
    for path in [
        "/",
        "/api/info",
        "/api/timeline?c=0&from=0&until=10&px=10",
        "/favicon.ico",
        "/../etc/passwd",
        "/assets/main.js",
        "/assets/0123/main.js",
    ] {
        let (status, body) = get(&addr, path);
        assert_eq!(status, 403, "{path}: {}", String::from_utf8_lossy(&body));
        let (status, _) = get(
            &addr,
            &format!(
                "{path}{}token=not-{token}",
                if path.contains('?') { "&" } else { "?" }
            ),
        );
        assert_eq!(status, 403, "{path} with a wrong token");
    }
    let (status, page) = get(&addr, &format!("/?token={token}"));
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&page).contains("<title>tickscope view</title>"));
    // The page's scripts carry the token in their path; one in the query does not stand for
    // it.
    assert_eq!(get(&addr, &format!("/assets/{token}/main.js")).0, 200);
    let (status, _) = get(&addr, &format!("/assets/not-{token}/main.js?token={token}"));
    assert_eq!(status, 403);
    // The address is loopback.
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn absurd_windows_and_bad_parameters_are_400s_at_once() {
    let d = dir("bad");
    let (addr, t) = serve(vec![capture_file(&d)]);
    wait_indexed(&addr, &t);
    for q in [
        "c=0&from=0&until=10&px=100000000",
        "c=0&from=0&until=10&px=0",
        "c=0&from=10&until=5&px=100",
        "c=0&from=0&until=1e300&px=100",
        "c=0&from=x&until=10&px=100",
        "c=9&from=0&until=10&px=100",
        "c=0&until=10&px=100",
    ] {
        let t0 = Instant::now();
        let (status, body) = get(&addr, &format!("/api/timeline?token={t}&{q}"));
        assert_eq!(status, 400, "{q}: {}", String::from_utf8_lossy(&body));
        assert!(t0.elapsed() < Duration::from_secs(30), "{q}");
        let e: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert!(e["error"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
    }
    // A window far past the capture's end is answered, empty.
    let (status, _) = get(
        &addr,
        &format!("/api/timeline?token={t}&c=0&from=1e18&until=1.1e18&px=16384"),
    );
    assert_eq!(status, 200);
    let (status, _) = get(&addr, &format!("/api/nothing?token={t}"));
    assert_eq!(status, 404);
    let (status, _) = get(&addr, &format!("/api/peek?token={t}&p=0&name=x"));
    assert_eq!(status, 400, "no profile 0");
    let _ = std::fs::remove_dir_all(&d);
}

/// The page has no inline script: it loads `main.js` from the token's path, and the modules it
/// imports, followed from there, are every script in `assets/`, each served as JavaScript.
/// Other paths under the token's are 404s.
#[test]
fn the_page_loads_its_modules_from_the_tokens_path() {
    let d = dir("modules");
    let (addr, t) = serve(vec![capture_file(&d)]);
    let (status, page) = get(&addr, &format!("/?token={t}"));
    assert_eq!(status, 200);
    let page = String::from_utf8(page).unwrap();
    // Each <script> tag's attributes.
    let scripts: Vec<&str> = page
        .split("<script")
        .skip(1)
        .map(|s| s.split('>').next().unwrap())
        .collect();
    let base = format!("/assets/{t}/");
    assert_eq!(
        scripts,
        [format!(" type=\"module\" src=\"{base}main.js\"")],
        "{page}"
    );
    // Every module the page reaches, by its static imports.
    let mut todo = vec!["main.js".to_owned()];
    let mut reached = std::collections::BTreeSet::new();
    while let Some(name) = todo.pop() {
        if !reached.insert(name.clone()) {
            continue;
        }
        let (status, head, body) = get_with_head(&addr, &format!("{base}{name}"));
        let body = String::from_utf8(body).unwrap();
        assert_eq!(status, 200, "{name}: {body}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/javascript"),
            "{name}: {head}"
        );
        for line in body.lines().filter(|l| l.starts_with("import ")) {
            let from = line
                .split(" from './")
                .nth(1)
                .unwrap_or_else(|| panic!("{name}: {line}"));
            todo.push(from.trim_end_matches("';").to_owned());
        }
    }
    let mut written = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/assets")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".js") {
            written.insert(name);
        }
    }
    assert_eq!(reached, written);
    for path in [
        format!("{base}nothing.js"),
        base.clone(),
        format!("{base}main.js/x"),
        format!("{base}../api/info"),
        format!("/assets/main.js?token={t}"),
    ] {
        assert_eq!(get(&addr, &path).0, 404, "{path}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

fn wait_indexed(addr: &str, t: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let info = json(addr, &format!("/api/info?token={t}"));
        if info["captures"][0]["status"]["done"] == true
            && info["captures"][0]["threads"].is_array()
        {
            return info;
        }
        assert!(Instant::now() < deadline, "not indexed: {info}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn the_answers_are_the_librarys() {
    let d = dir("answers");
    let path = capture_file(&d);
    let (addr, t) = serve(vec![path.clone()]);
    let info = wait_indexed(&addr, &t);
    let c = &info["captures"][0];
    assert_eq!(c["threads"].as_array().unwrap().len(), 2, "{c}");
    assert_eq!(c["scopes"]["1"][0], "s1");
    let duration = c["duration_ns"].as_u64().unwrap();
    // The summary is `tickscope report --json`'s, whole or of a range.
    let mut want = Vec::new();
    tickscope_timeline::summarize(
        &mut tickscope_timeline::tscap::Reader::open(&path).unwrap(),
        tickscope_timeline::Options::default(),
    )
    .unwrap()
    .write_json(&mut want)
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let got = loop {
        let (status, body) = get(&addr, &format!("/api/summary?token={t}&c=0"));
        if status == 200 {
            break body;
        }
        assert_eq!(status, 202, "{}", String::from_utf8_lossy(&body));
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    };
    let (got, want): (serde_json::Value, serde_json::Value) = (
        serde_json::from_slice(&got).unwrap(),
        serde_json::from_slice(&want).unwrap(),
    );
    assert_eq!(got["scopes"], want["scopes"]);
    // The threads, as report counts them: the idle one the metadata names too.
    assert_eq!(
        c["threads_named"],
        want["threads"].as_array().unwrap().len(),
        "{c}"
    );
    assert_eq!(c["threads_named"], 3);
    let range = json(
        &addr,
        &format!(
            "/api/summary?token={t}&c=0&from={}&until={}",
            duration / 4,
            duration / 2
        ),
    );
    assert_eq!(range["range"]["from_ns"], duration / 4);
    // A window, binary: its header holds the window asked for.
    let (status, body) = get(
        &addr,
        &format!("/api/timeline?token={t}&c=0&from=0&until={duration}&px=800"),
    );
    assert_eq!(status, 200);
    let f64_at = |i: usize| f64::from_le_bytes(body[i..i + 8].try_into().unwrap());
    assert_eq!((f64_at(0), f64_at(8)), (0.0, duration as f64));
    assert_eq!(u32::from_le_bytes(body[16..20].try_into().unwrap()), 800);
    // A scope's details.
    let scope = json(
        &addr,
        &format!(
            "/api/scope?token={t}&c=0&thread=1&depth=0&at={}",
            duration / 2
        ),
    );
    assert!(
        scope["scope"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with('s')),
        "{scope}"
    );
    assert!(
        scope["self_ns"].as_u64() <= scope["duration_ns"].as_u64(),
        "{scope}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn files_are_checked_before_anything_is_served() {
    let d = dir("files");
    let foreign = d.join("notes.txt");
    std::fs::write(&foreign, "just some text\n").unwrap();
    let cut = d.join("cut.tscap");
    std::fs::write(&cut, &b"TSCAP\r\n\x1a\x02\x00"[..]).unwrap();
    // Garbage named as a capture is said to be no capture (it was "not a profile").
    let garbage = d.join("garbage.tscap");
    std::fs::write(
        &garbage,
        (0..4096u32)
            .map(|i| (i * 7919 % 251) as u8)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    for (input, says) in [
        (foreign.display().to_string(), "notes.txt"),
        (
            garbage.display().to_string(),
            "garbage.tscap: at byte 0: not a tickscope capture",
        ),
        (
            d.join("missing.pb.gz").display().to_string(),
            "missing.pb.gz",
        ),
        (cut.display().to_string(), "cut.tscap"),
    ] {
        let e = start(&Config {
            inputs: vec![input.clone()],
            ..Config::default()
        })
        .err()
        .unwrap_or_else(|| panic!("{input} was accepted"))
        .to_string();
        assert!(e.contains(says) && !e.contains('\n'), "{input}: {e}");
    }
    for addr in ["8.8.8.8:0", "0.0.0.0:0"] {
        let e = start(&Config {
            inputs: vec![capture_file(&d)],
            addr: addr.into(),
            ..Config::default()
        })
        .err()
        .expect("a non-loopback address is refused")
        .to_string();
        assert!(e.contains("--allow-remote"), "{e}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
