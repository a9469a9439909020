//! The pull endpoint (issue 42): `TICKSCOPE_HTTP=… tickscope demo` answered as `go tool
//! pprof` and Grafana Alloy's `pyroscope.scrape` ask, and to no one without the token.

use std::io::{BufRead, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A demo serving the endpoint; killed when dropped.
struct Demo {
    child: Child,
    addr: String,
    token_file: PathBuf,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Killed, it could not remove its token file: the test does.
        let _ = std::fs::remove_file(&self.token_file);
        if let Some(dir) = self.token_file.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// `tickscope demo --seconds SECONDS` with `TICKSCOPE_HTTP=127.0.0.1:0`, once it says where
/// it serves (polled to a deadline), and the rest of its standard error.
fn demo(seconds: u32) -> (Demo, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args([
            "demo",
            "--seconds",
            &seconds.to_string(),
            "--interval",
            "off",
        ])
        .env("TICKSCOPE_HTTP", "127.0.0.1:0")
        .env_remove("TICKSCOPE_HTTP_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let line = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the demo never said where it serves");
        if line.contains("serving http://") {
            break line;
        }
    };
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap()
        .to_string();
    let token_file = PathBuf::from(
        line.split("the token in ")
            .nth(1)
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("no token file in {line:?}")),
    );
    (
        Demo {
            child,
            addr,
            token_file,
        },
        rx,
    )
}

/// A GET as Alloy sends it (its headers; `auth` the Authorization header's value): the
/// status and the body.
fn get(addr: &str, path: &str, auth: Option<&str>, timeout: Duration) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(timeout)).unwrap();
    let auth = auth.map_or(String::new(), |a| format!("Authorization: {a}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: Alloy/v1.5.0\r\nAccept-Encoding: gzip\r\n{auth}\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let at = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&all[..at]).into_owned();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    let body = all[at + 4..].to_vec();
    assert_eq!(body.len(), len, "{head}");
    (code, body)
}

fn go_pprof_top(target: &str) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-top", target])
        .output()
        .expect("`go` not found: install Go (Debian: apt-get install golang-go; .ci/run does)");
    assert!(
        out.status.success(),
        "go tool pprof -top {target}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn write_temp(name: &str, bytes: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!("tickscope-http-{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn the_endpoint_answers_go_tool_pprof_and_alloy_and_no_one_without_the_token() {
    let (d, _rest) = demo(600);
    let token = std::fs::read_to_string(&d.token_file).unwrap();
    let token = token.trim();
    // The token is this user's alone.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&d.token_file), 0o600);
    assert_eq!(mode(d.token_file.parent().unwrap()), 0o700);
    let t = Duration::from_secs(60);
    let bearer = format!("Bearer {token}");
    // Without the token, or with another: nothing.
    for auth in [None, Some("Bearer 0123456789abcdef0123456789abcdef")] {
        for path in [
            "/debug/pprof/",
            "/debug/pprof/heap",
            "/debug/tickscope/summary",
        ] {
            assert_eq!(get(&d.addr, path, auth, t).0, 401, "{path} {auth:?}");
        }
    }
    assert_eq!(get(&d.addr, "/nothing", Some(&bearer), t).0, 404);
    assert_eq!(
        get(&d.addr, "/debug/pprof/profile?seconds=0", Some(&bearer), t).0,
        400
    );
    let (code, index) = get(&d.addr, "/debug/pprof/", Some(&bearer), t);
    assert_eq!(code, 200);
    assert!(String::from_utf8_lossy(&index).contains("profile?seconds="));
    // The scopes so far, as the exit summary's JSON.
    let (code, summary) = get(&d.addr, "/debug/tickscope/summary", Some(&bearer), t);
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_slice(&summary).unwrap();
    assert!(
        v["scopes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == "parse_record" && s["calls"].as_u64() > Some(0)),
        "{v}"
    );
    // Alloy's memory scrape: a heap profile go tool pprof reads.
    let (code, heap) = get(&d.addr, "/debug/pprof/allocs", Some(&bearer), t);
    assert_eq!(code, 200);
    assert_eq!(&heap[..2], &[0x1f, 0x8b], "gzipped pprof");
    let heap_file = write_temp("allocs.pb.gz", &heap);
    let top = go_pprof_top(heap_file.to_str().unwrap());
    assert!(top.contains("Type: "), "{top}");
    let _ = std::fs::remove_file(&heap_file);
    // A person's request: go tool pprof over HTTP, the token as basic authentication's
    // password in the URL.
    let url = format!(
        "http://tickscope:{token}@{}/debug/pprof/profile?seconds=2",
        d.addr
    );
    let top = go_pprof_top(&url);
    assert!(top.contains("Duration: 2"), "{top}");
    for name in ["demo::parse_record", "demo::tokenize"] {
        assert!(top.contains(name), "{name} missing from:\n{top}");
    }
    // Alloy's CPU scrape: 14 seconds of a 15-second interval, answered within its timeout.
    let (code, cpu) = get(
        &d.addr,
        "/debug/pprof/profile?seconds=14",
        Some(&bearer),
        Duration::from_secs(14 + 30),
    );
    assert_eq!(code, 200);
    let cpu_file = write_temp("cpu.pb.gz", &cpu);
    let top = go_pprof_top(cpu_file.to_str().unwrap());
    assert!(top.contains("Duration: 14"), "{top}");
    assert!(top.contains("demo::parse_record"), "{top}");
    let _ = std::fs::remove_file(&cpu_file);
}

#[test]
fn the_token_file_is_removed_at_exit() {
    let (mut d, rest) = demo(1);
    assert!(d.token_file.exists());
    let status = d.child.wait().unwrap();
    let said: Vec<String> = rest.try_iter().collect();
    assert!(status.success(), "{said:?}");
    assert!(!d.token_file.exists(), "{} left", d.token_file.display());
    assert!(!d.token_file.parent().unwrap().exists());
}

#[path = "../../core/tests/push_support.rs"]
mod push_support;

/// `TICKSCOPE_PUSH=… tickscope demo`: the demo's profile pushed every interval and at its
/// exit, with the labels asked for, each a profile `go tool pprof` reads.
#[test]
fn the_demo_pushes_its_profiles_to_pyroscope() {
    let (url, got) = push_support::receiver(vec![]);
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(["demo", "--seconds", "3", "--interval", "off"])
        .env("TICKSCOPE_PUSH", &url)
        .env("TICKSCOPE_PUSH_INTERVAL", "1s")
        .env("TICKSCOPE_PUSH_LABELS", "env=ci, region = eu")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("push"), "{stderr}");
    let got = got.lock().unwrap();
    // At least one interval's window and the last, partial one at the exit (how many more
    // depends on how long each snapshot's symbolisation takes: seconds in a debug build).
    assert!(got.len() >= 2, "{} requests", got.len());
    let (mut cpu, mut kinds) = (0, std::collections::BTreeSet::new());
    let mut last = std::collections::BTreeMap::new();
    for g in got.iter() {
        let (labels, _, pprof) = push_support::decode(&g.body);
        for want in [
            ("service_name", "tickscope"),
            ("env", "ci"),
            ("region", "eu"),
        ] {
            assert!(
                labels.iter().any(|(k, v)| k == want.0 && v == want.1),
                "{want:?} not in {labels:?}"
            );
        }
        let kind = labels
            .iter()
            .find(|(k, _)| k == "__name__")
            .map(|(_, v)| v.clone())
            .unwrap();
        if kind == "process_cpu" {
            cpu += push_support::sums(&pprof)[1];
        }
        kinds.insert(kind.clone());
        last.insert(kind, pprof);
    }
    // The CPU profile, and the heap's (the binary's allocator is tickscope's).
    assert_eq!(
        kinds.iter().map(String::as_str).collect::<Vec<_>>(),
        ["memory", "process_cpu"]
    );
    // Three seconds of a four-thread demo on however many cores: seconds of CPU in all.
    assert!(cpu > 1_000_000_000, "{cpu} ns pushed");
    for (kind, want) in [("process_cpu", "demo::"), ("memory", "inuse_space")] {
        let file = write_temp(&format!("pushed-{kind}.pb"), &last[kind]);
        let top = go_pprof_top(file.to_str().unwrap());
        let _ = std::fs::remove_file(&file);
        assert!(top.contains(want), "{kind}: {top}");
    }
}

#[test]
fn our_push_requests_are_shaped_as_the_official_clients() {
    let python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/readers/.venv/bin/python");
    let (url, got) = push_support::receiver(vec![]);
    let script = format!(
        "import pyroscope, time\n\
         pyroscope.configure(application_name='py-app', server_address='{url}', tags={{'env': 'ci'}})\n\
         t = time.time()\n\
         while time.time() - t < 2: pass\n\
         pyroscope.shutdown()\n"
    );
    let out = Command::new(&python)
        .args(["-c", &script])
        .output()
        .expect("the readers' venv is missing: run tests/readers/install.sh (.ci/run does)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = got.lock().unwrap().len();
    assert!(theirs >= 1, "the SDK sent nothing");
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(["demo", "--seconds", "1", "--interval", "off"])
        .env("TICKSCOPE_PUSH", &url)
        .env("TICKSCOPE_PUSH_LABELS", "env=ci")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = got.lock().unwrap();
    let (sdk, ours) = (&got[0], &got[theirs]);
    assert_eq!(ours.path, sdk.path);
    assert_eq!(sdk.path, "/push.v1.PusherService/Push");
    for h in ["content-type", "content-encoding"] {
        assert_eq!(ours.headers.get(h), sdk.headers.get(h), "{h}");
    }
    // One series, one raw sample each (`decode` checks), its id a UUID, its pprof plain.
    let (sdk_labels, sdk_id, sdk_pprof) = push_support::decode(&sdk.body);
    let (our_labels, our_id, our_pprof) = push_support::decode(&ours.body);
    assert_eq!(our_id.len(), sdk_id.len());
    assert_eq!(our_id.matches('-').count(), sdk_id.matches('-').count());
    for p in [&sdk_pprof, &our_pprof] {
        assert_ne!(&p[..2], &[0x1f, 0x8b], "a pprof inside is plain");
    }
    // The label names, but the SDK's own runtime's (`process.runtime.*`: Python's).
    let names = |l: &[(String, String)]| -> std::collections::BTreeSet<String> {
        l.iter()
            .map(|(k, _)| k.clone())
            .filter(|k| !k.starts_with("process.runtime."))
            .collect()
    };
    assert_eq!(
        names(&our_labels),
        names(&sdk_labels),
        "{our_labels:?} vs {sdk_labels:?}"
    );
    let value =
        |l: &[(String, String)], k: &str| l.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    for k in ["__name__", "env"] {
        assert_eq!(value(&our_labels, k), value(&sdk_labels, k), "{k}");
    }
}

/// A Pyroscope that takes the connection and never answers does not hold the program's
/// exit for the uploads' timeouts: the exit waits its 3 s, then says what it could not send,
/// and the exit summary counts it.
#[test]
fn a_server_that_never_answers_does_not_hold_the_exit() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    // Accepts, keeps every connection open, reads nothing and answers nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming() {
            held.push(c);
        }
    });
    let out = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(["demo", "--seconds", "1", "--interval", "off"])
        .env("TICKSCOPE_PUSH", format!("http://{addr}"))
        .env("TICKSCOPE_PUSH_INTERVAL", "1s")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("not sent: the server did not answer within 3 s at the exit"),
        "{stderr}"
    );
    assert!(stderr.contains("pushed to Pyroscope dropped"), "{stderr}");
}
