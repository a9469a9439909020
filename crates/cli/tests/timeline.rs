//! `tickscope report`, `convert` and `capture listen` on captures built with the timeline
//! crate's test encoder.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{sample, sample_split};

fn tickscope(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A fresh directory for one test.
fn dir(name: &str) -> PathBuf {
    let d = crate::support::writer::scratch_dir().join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p.display().to_string()
}

#[test]
fn report_prints_the_summary_as_text_and_json() {
    let d = dir("report");
    let f = write(&d, "run.tscap", &sample(true).bytes);
    let out = tickscope(&["report", &f]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("name") && stdout.contains("clk err"),
        "{stdout}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.split_whitespace().take(3).collect::<Vec<_>>()
                == ["outer", "app/main.rs:10", "2"]),
        "{stdout}"
    );
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let out = tickscope(&["report", &f, "--json", "--per-thread"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["scopes"][0]["self_ns"], 750);
    assert_eq!(v["threads"][1]["scopes"][0]["calls"], 1);
}

/// Runs `tickscope ARGS`, expects exit status 2 and exactly one line on stderr.
fn fails(args: &[&str]) -> String {
    let out = tickscope(args);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr.trim_end().to_owned()
}

#[test]
fn bad_input_exits_2_with_one_line_naming_the_file() {
    let d = dir("bad");
    let zip = write(&d, "profile.zip", b"PK\x03\x04\x14\x00\x00\x00\x08\x00");
    assert_eq!(
        fails(&["report", &zip]),
        format!("tickscope: error: {zip}: at byte 0: not a tickscope capture (magic is 50 4b 03 04 14 00 00 00, a zip file?)")
    );
    let missing = d.join("missing.tscap").display().to_string();
    let line = fails(&["report", &missing]);
    assert!(
        line.starts_with(&format!("tickscope: error: {missing}: cannot open: ")),
        "{line}"
    );
    let mut c = sample(false);
    c.bytes.truncate(c.bytes.len() - 3);
    let cut = write(&d, "cut.tscap", &c.bytes);
    let line = fails(&["report", &cut]);
    assert!(
        line.contains(&format!("{cut}: at byte ")) && line.contains("truncated: chunk header says"),
        "{line}"
    );
    let line = fails(&[
        "convert",
        &cut,
        "--to",
        "chrome",
        "-o",
        &d.join("x.json").display().to_string(),
    ]);
    assert!(line.contains("truncated"), "{line}");
    assert!(
        !d.join("x.json").exists(),
        "no half-written output left behind"
    );
    // With --salvage the same file reads, with a warning.
    let out = tickscope(&["report", &cut, "--salvage"]);
    assert!(out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("tickscope: warning: ")
            && stderr.contains("salvaged the 4 complete chunks"),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("outer"));
    // A capture given to a profile command is named as what it is (the CLI tells the two
    // kinds of file apart; neither reader crate knows the other's format).
    let good = write(&d, "good.tscap", &sample(false).bytes);
    for cmd in ["top", "flamegraph"] {
        assert_eq!(
            fails(&[cmd, &good]),
            format!("tickscope: error: {good}: a tickscope timeline capture, not a profile: read it with `tickscope report`, or make one with `tickscope convert --to folded`")
        );
    }
}

#[test]
fn convert_writes_every_format() {
    let d = dir("convert");
    let f = write(&d, "run.tscap", &sample_split(4, true).bytes);
    for (format, name) in [
        ("chrome", "trace.json"),
        ("perfetto", "trace.pftrace"),
        ("speedscope", "profile.speedscope.json"),
        ("folded", "stacks.folded"),
    ] {
        let out_path = d.join(name).display().to_string();
        let out = tickscope(&["convert", &f, "--to", format, "-o", &out_path]);
        assert!(out.status.success(), "{format}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(&format!("wrote {out_path} ({format}, ")));
        let bytes = std::fs::read(&out_path).unwrap();
        match format {
            "chrome" | "speedscope" => {
                let _: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            }
            "folded" => assert!(text(&bytes).starts_with("main;alloc 100\n")),
            _ => assert!(bytes.len() > 100),
        }
    }
    let out = tickscope(&["convert", &f, "--to", "folded", "-o", "-"]);
    assert!(out.status.success());
    assert_eq!(
        text(&out.stdout),
        std::fs::read_to_string(d.join("stacks.folded")).unwrap()
    );
    // A usage error is clap's: exit status 2 and the reason.
    let out = tickscope(&["convert", &f, "--to", "svg", "-o", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr)
        .contains("unknown format \"svg\" (expected chrome, perfetto, speedscope or folded)"));
}

/// A running `tickscope capture listen` on an ephemeral loopback port.
struct Listener {
    child: Child,
    port: u16,
    stderr: std::thread::JoinHandle<String>,
}

fn listen(out: &Path, extra: &[&str]) -> Listener {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(["capture", "listen", "127.0.0.1:0", "-o"])
        .arg(out)
        .args(extra)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let port = first
        .split("listening on 127.0.0.1:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {first:?}"));
    let stderr = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = err.read_to_string(&mut rest);
        first + &rest
    });
    Listener {
        child,
        port,
        stderr,
    }
}

impl Listener {
    /// Waits (at most 30 s) for the listener to exit; returns its status code and stderr.
    fn wait(mut self) -> (Option<i32>, String) {
        let t = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if t.elapsed() > Duration::from_secs(30) {
                let _ = self.child.kill();
                panic!("listener did not exit: {}", self.stderr.join().unwrap());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (status.code(), self.stderr.join().unwrap())
    }

    /// Sends `bytes` in pieces, with pauses, then closes the connection.
    fn send(&self, bytes: &[u8], pause: Duration) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        for piece in bytes.chunks(bytes.len() / 5 + 1) {
            s.write_all(piece).unwrap();
            s.flush().unwrap();
            std::thread::sleep(pause);
        }
    }
}

#[test]
fn listen_records_a_stream_into_the_file_unchanged() {
    let d = dir("listen");
    let out = d.join("got.tscap");
    let l = listen(&out, &["--connections", "1"]);
    let c = sample_split(3, true);
    // Slow enough for a live line.
    l.send(&c.bytes, Duration::from_millis(300));
    let (code, stderr) = l.wait();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(std::fs::read(&out).unwrap(), c.bytes);
    assert!(
        stderr.contains(&format!("writing {}", out.display())),
        "{stderr}"
    );
    assert!(stderr.contains("32 events in"), "{stderr}");
    assert!(stderr.contains("capture complete"), "{stderr}");
    assert!(
        stderr.contains(&format!("tickscope: {}: ", out.display()))
            && stderr.contains(" events/s · ")
            && stderr.contains(" dropped so far · top: "),
        "a live line: {stderr}"
    );
}

#[test]
fn listen_keeps_the_file_valid_when_the_peer_leaves_mid_chunk_and_numbers_connections() {
    let d = dir("listen-cut");
    let out = d.join("got.tscap");
    let l = listen(&out, &["--connections", "2", "--quiet"]);
    let c = sample(false);
    let cut = c.bytes.len() - 10;
    l.send(&c.bytes[..cut], Duration::ZERO);
    l.send(&c.bytes, Duration::ZERO);
    let (code, stderr) = l.wait();
    assert_eq!(code, Some(0), "{stderr}");
    let first = std::fs::read(&out).unwrap();
    let second = std::fs::read(d.join("got.2.tscap")).unwrap();
    assert_eq!(second, c.bytes);
    assert!(first.len() < cut && c.bytes.starts_with(&first));
    assert!(stderr.contains("valid up to byte"), "{stderr}");
    // What was kept reads without --salvage.
    let f = out.display().to_string();
    let rep = tickscope(&["report", &f]);
    assert!(rep.status.success(), "{}", text(&rep.stderr));
    assert!(text(&rep.stderr).contains("no end record"));
    assert!(!stderr.contains("events/s"), "--quiet: {stderr}");
}

/// R6 (reliability probe 3): connections that send a capture's header and then hold their
/// slot in silence do not keep a real capture out: at the cap, the one silent the longest
/// (for the idle timeout) is closed, its file kept as far as it came.
#[test]
fn silent_connections_at_the_cap_give_way_to_a_new_capture() {
    let d = dir("listen-hold");
    let out = d.join("got.tscap");
    let l = listen(
        &out,
        &[
            "--connections",
            "3",
            "--max-connections",
            "2",
            "--idle-timeout",
            "1",
            "--quiet",
        ],
    );
    let c = sample(false);
    // The file header and the process chunk, as a capture's start sends them.
    let first = {
        let r = tickscope_timeline::tscap::Reader::new(&c.bytes[..], "x").unwrap();
        let (h, p) = r.chunk_bytes();
        r.header_bytes().len() + h.len() + p.len()
    };
    let header = &c.bytes[..first];
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(("127.0.0.1", l.port)).unwrap();
        s.write_all(header).unwrap();
        held.push(s);
    }
    let files = [out.clone(), d.join("got.2.tscap")];
    let deadline = Instant::now() + Duration::from_secs(60);
    while !files
        .iter()
        .all(|f| std::fs::metadata(f).is_ok_and(|m| m.len() >= header.len() as u64))
    {
        assert!(
            Instant::now() < deadline,
            "the held connections were not served"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Silent for longer than the idle timeout (a lower bound: a loaded machine only adds).
    std::thread::sleep(Duration::from_millis(1500));
    l.send(&c.bytes, Duration::ZERO);
    drop(held);
    let (code, stderr) = l.wait();
    assert_eq!(code, Some(0), "{stderr}");
    // One of the two held connections gave way: the one the listener heard from last the
    // longest ago, which depends on the order it read their headers in (a loaded machine
    // may read the second first).
    let closed = ["1", "2"]
        .iter()
        .filter(|n| stderr.contains(&format!("closed connection {n} (silent for")))
        .count();
    assert_eq!(closed, 1, "{stderr}");
    assert_eq!(std::fs::read(d.join("got.3.tscap")).unwrap(), c.bytes);
    for f in &files {
        assert_eq!(std::fs::read(f).unwrap(), header, "{}", f.display());
    }
}

#[test]
fn listen_refuses_a_non_loopback_address() {
    let line = fails(&["capture", "listen", "0.0.0.0:0", "-o", "x.tscap"]);
    assert_eq!(
        line,
        "tickscope: error: refusing to listen on 0.0.0.0:0: not a loopback address, and captures are not authenticated (pass --allow-remote to accept connections from other machines)"
    );
}

#[test]
fn listen_rejects_a_stream_that_is_not_a_capture() {
    let d = dir("listen-bad");
    let out = d.join("got.tscap");
    let l = listen(&out, &["--connections", "1"]);
    l.send(b"GET / HTTP/1.1\r\n\r\n", Duration::ZERO);
    let (code, stderr) = l.wait();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("not a tickscope capture"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn convert_refuses_an_output_that_is_its_input_under_any_name() {
    let d = dir("convert-same");
    let c = sample(true);
    let f = write(&d, "cap.tscap", &c.bytes);
    std::fs::hard_link(&f, d.join("hard.json")).unwrap();
    std::os::unix::fs::symlink(&f, d.join("soft.json")).unwrap();
    for out in ["cap.tscap", "hard.json", "soft.json"] {
        let out = d.join(out).display().to_string();
        assert_eq!(
            fails(&["convert", &f, "--to", "chrome", "-o", &out]),
            format!(
                "tickscope: error: refusing to write {out}: it is the same file as the input {f}"
            )
        );
        assert_eq!(std::fs::read(&f).unwrap(), c.bytes, "{out}");
    }
    assert_eq!(crate::names(&d), ["cap.tscap", "hard.json", "soft.json"]);
}

#[test]
fn convert_keeps_an_existing_output_when_the_input_is_bad() {
    let d = dir("convert-keep");
    let mut c = sample(false);
    c.bytes.truncate(c.bytes.len() - 3);
    let cut = write(&d, "cut.tscap", &c.bytes);
    let formats = ["chrome", "perfetto", "speedscope", "folded"];
    for format in formats {
        let out = write(&d, &format!("{format}.out"), b"the user's file");
        let line = fails(&["convert", &cut, "--to", format, "-o", &out]);
        assert!(line.contains("truncated"), "{format}: {line}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            b"the user's file",
            "{format}: the old output is kept"
        );
    }
    let mut want: Vec<String> = formats.iter().map(|f| format!("{f}.out")).collect();
    want.push("cut.tscap".into());
    want.sort();
    assert_eq!(crate::names(&d), want, "no temporary file is left");
    // A good input replaces it.
    let good = write(&d, "good.tscap", &sample(true).bytes);
    let out = d.join("folded.out").display().to_string();
    let ok = tickscope(&["convert", &good, "--to", "folded", "-o", &out]);
    assert!(ok.status.success(), "{}", text(&ok.stderr));
    assert!(std::fs::read_to_string(&out).unwrap().starts_with("main;"));
}

#[test]
fn listen_never_replaces_an_existing_file() {
    let d = dir("listen-keep");
    let out = d.join("got.tscap");
    std::fs::write(&out, "first").unwrap();
    std::fs::write(d.join("got.2.tscap"), "second").unwrap();
    let l = listen(&out, &["--connections", "3", "--quiet"]);
    // Garbage, nothing at all, then a capture.
    l.send(b"GET / HTTP/1.1\r\n\r\n", Duration::ZERO);
    drop(TcpStream::connect(("127.0.0.1", l.port)).unwrap());
    let c = sample(true);
    l.send(&c.bytes, Duration::ZERO);
    let (code, stderr) = l.wait();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("2 of 3 connections did not deliver a capture"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "first", "{stderr}");
    assert_eq!(
        std::fs::read_to_string(d.join("got.2.tscap")).unwrap(),
        "second"
    );
    // The bad connections removed only the files they created; the capture took the next
    // free name.
    let mut captures: Vec<String> = crate::names(&d)
        .into_iter()
        .filter(|n| n != "got.tscap" && n != "got.2.tscap")
        .collect();
    assert_eq!(captures.len(), 1, "{captures:?}\n{stderr}");
    let name = captures.pop().unwrap();
    assert_eq!(std::fs::read(d.join(&name)).unwrap(), c.bytes, "{name}");
}

/// Runs `tickscope ARGS` that must exit on its own; kills it after 60 s (a listener that
/// does not refuse would wait for connections forever).
fn exits(args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tickscope"))
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), text(&out.stderr))
}

#[test]
fn listen_refuses_an_output_directory_that_takes_no_files_before_listening() {
    let d = dir("listen-dir");
    let missing = d.join("no/such/got.tscap").display().to_string();
    let (code, stderr) = exits(&["capture", "listen", "127.0.0.1:0", "-o", &missing]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "tickscope: error: cannot write {missing}: the directory {} does not exist",
            d.join("no").display()
        )
    );
    let (code, stderr) = exits(&["capture", "listen", "127.0.0.1:0", "-o", "/proc/got.tscap"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(
            "tickscope: error: cannot write /proc/got.tscap: cannot create a file in /proc: "
        ) && stderr.lines().count() == 1,
        "{stderr}"
    );
}

/// A field of /proc/PID/status (`Threads:`) and the lines of /proc/PID/maps.
fn threads_and_maps(pid: u32) -> (usize, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .unwrap()
        .lines()
        .count();
    (threads, maps)
}

/// Opens a connection that sends nothing and waits (60 s at most) until the listener has
/// closed it: the connection's thread has finished.
fn empty_connection(port: u16) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut buf = [0u8; 16];
    let _ = s.read(&mut buf);
}

#[test]
fn listen_joins_the_threads_of_ended_connections() {
    let d = dir("listen-threads");
    let out = d.join("got.tscap");
    let mut l = listen(&out, &["--quiet"]);
    let pid = l.child.id();
    for _ in 0..10 {
        empty_connection(l.port);
    }
    let (_, maps_before) = threads_and_maps(pid);
    for _ in 0..300 {
        empty_connection(l.port);
    }
    // Each unjoined thread kept its stack: two more maps per connection. Joined, the count
    // stays near where it was (a connection or two may not be joined yet).
    let t = Instant::now();
    let (threads, maps) = loop {
        let (threads, maps) = threads_and_maps(pid);
        if (threads <= 4 && maps <= maps_before + 40) || t.elapsed() > Duration::from_secs(60) {
            break (threads, maps);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = l.child.kill();
    let _ = l.child.wait();
    assert!(
        threads <= 4,
        "{threads} threads after 310 empty connections"
    );
    assert!(
        maps <= maps_before + 40,
        "{maps} maps after 310 empty connections, {maps_before} after 10"
    );
    assert_eq!(
        crate::names(&d),
        Vec::<String>::new(),
        "no file for an empty connection"
    );
}

#[test]
fn listen_closes_an_idle_connection_and_refuses_more_than_its_maximum() {
    let d = dir("listen-idle");
    let out = d.join("got.tscap");
    // Short idle timeout: an idle connection is closed; the peer sees the end of the stream.
    let l = listen(
        &out,
        &["--idle-timeout", "1", "--connections", "1", "--quiet"],
    );
    let mut s = TcpStream::connect(("127.0.0.1", l.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut buf = [0u8; 16];
    assert!(
        matches!(s.read(&mut buf), Ok(0)),
        "the listener did not close an idle connection"
    );
    let (code, stderr) = l.wait();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("no capture header received in 1 s: connection closed"),
        "{stderr}"
    );
    assert!(!out.exists());

    // Once its header is in, a program may go quiet for longer than the timeout (a server
    // waiting for requests records no events) and its capture is still whole.
    let l = listen(
        &out,
        &["--idle-timeout", "1", "--connections", "1", "--quiet"],
    );
    let c = sample(true);
    let mut s = TcpStream::connect(("127.0.0.1", l.port)).unwrap();
    s.write_all(&c.bytes[..64]).unwrap();
    s.flush().unwrap();
    // Silence, three times the timeout: nothing is awaited here, the listener must do nothing.
    std::thread::sleep(Duration::from_secs(3));
    s.write_all(&c.bytes[64..]).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let (code, stderr) = l.wait();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(std::fs::read(&out).unwrap(), c.bytes, "{stderr}");
    std::fs::remove_file(&out).unwrap();

    // Two at once at most: the third is refused and logged by its address; the two go on.
    let mut l = listen(&out, &["--max-connections", "2", "--quiet"]);
    let c = sample(true);
    let mut a = TcpStream::connect(("127.0.0.1", l.port)).unwrap();
    let mut b = TcpStream::connect(("127.0.0.1", l.port)).unwrap();
    let mut extra = TcpStream::connect(("127.0.0.1", l.port)).unwrap();
    let extra_addr = extra.local_addr().unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    assert!(
        matches!(extra.read(&mut buf), Ok(0) | Err(_)),
        "the third connection was not closed"
    );
    for s in [&mut a, &mut b] {
        s.write_all(&c.bytes).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
    }
    // The listener closes each once it has recorded it.
    for mut s in [a, b] {
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        assert!(matches!(s.read(&mut buf), Ok(0)));
    }
    let _ = l.child.kill();
    let (_, stderr) = l.wait();
    assert!(
        stderr.contains(&format!(
            "refused a connection from {extra_addr}: 2 connections are open already"
        )),
        "{stderr}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), c.bytes, "{stderr}");
    assert_eq!(
        std::fs::read(d.join("got.2.tscap")).unwrap(),
        c.bytes,
        "{stderr}"
    );
}

/// A process's peak resident memory (KiB): `VmHWM` in /proc/PID/status.
fn peak_rss(pid: u32) -> i64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"))
}

/// Runs `tickscope ARGS` from a small process and returns its exit code, stderr and peak
/// resident memory (KiB, from `wait4`). The small process is this test binary again, running
/// [`measure_helper`] alone: a child's `ru_maxrss` starts from its parent's peak (Linux
/// carries the high-water mark of the memory a vfork child shares across its exec), and
/// this process's peak depends on the tests running beside it.
pub(crate) fn measured(args: &[&str]) -> (Option<i32>, String, i64) {
    let out_file = crate::support::writer::scratch_dir()
        .join(format!("measure-{:?}.txt", std::thread::current().id()));
    let _ = std::fs::remove_file(&out_file);
    let helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "timeline::measure_helper",
            "--exact",
            "--test-threads",
            "1",
            "-q",
        ])
        .env("TICKSCOPE_TEST_MEASURE", args.join("\n"))
        .env("TICKSCOPE_TEST_MEASURE_OUT", &out_file)
        .output()
        .unwrap();
    assert!(helper.status.success(), "{}", text(&helper.stdout));
    let got = std::fs::read_to_string(&out_file).unwrap();
    let mut lines = got.splitn(3, '\n');
    let code = lines.next().unwrap().parse().ok();
    let peak = lines.next().unwrap().parse().unwrap();
    (code, lines.next().unwrap_or("").to_owned(), peak)
}

/// The small process of [`measured`]: runs the command in `TICKSCOPE_TEST_MEASURE` (arguments
/// a line each) and writes its exit code, peak memory and stderr, a line each, to the file in
/// `TICKSCOPE_TEST_MEASURE_OUT`. Run without them, as every test is, it does nothing.
#[test]
fn measure_helper() {
    let (Ok(args), Ok(out)) = (
        std::env::var("TICKSCOPE_TEST_MEASURE"),
        std::env::var("TICKSCOPE_TEST_MEASURE_OUT"),
    ) else {
        return;
    };
    let args: Vec<&str> = args.split('\n').collect();
    let (code, stderr, peak) = crate::pprof::run_measured(&args);
    let code = code.map_or("signal".to_owned(), |c| c.to_string());
    std::fs::write(out, format!("{code}\n{peak}\n{stderr}")).unwrap();
}

/// Captures declaring many scopes (valid, checksums and all) cost memory in proportion to
/// their bytes: every reader's peak stays under 4 × the file's size plus a fixed allowance,
/// and a scope's histogram costs nothing until it has calls. What a reader prints is allowed
/// for besides: a report's rows (one per scope called, at 512 bytes a row), an export's
/// output (held in memory up to 32 MiB before it goes to a temporary file). Before: ~11 KB per scope
/// called (a percentile histogram), a per-thread table as long as all scope rows for each
/// thread, a copy of the metadata per metadata chunk in `capture listen`, and the whole text
/// or JSON document in memory before printing (report: 554 MB, --per-thread --json 772 MB,
/// listen 434 MB for 50,000 scopes in 1.8 MB).
#[test]
fn readers_memory_is_bounded_by_the_input_whatever_it_declares() {
    use crate::support::many_scopes;
    let d = dir("memory");
    // Each command's own footprint, on a tiny capture: the fixed part of its bound (the code
    // it runs is mapped in as it runs: a report's baseline was 0.5 MiB short of an export's),
    // with 8 MiB for the reader's buffers (a chunk, stored and decompressed, 64 KiB of file
    // buffer), an export's output buffers and allocator slack.
    let tiny = write(&d, "tiny.tscap", &sample(true).bytes);
    let tiny_out = d.join("tiny.out").display().to_string();
    let allowance = |args: &[&str]| {
        let mut args: Vec<&str> = args.to_vec();
        args[1] = &tiny;
        if let Some(o) = args.iter().position(|a| *a == "-o") {
            args[o + 1] = &tiny_out;
        }
        let (code, err, base) = measured(&args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        base + 8 * 1024
    };
    let captures = [
        // 200,000 scopes declared, 10 called.
        ("declared", many_scopes(200_000, 10, 0, false), 10, 10),
        // 50,000 scopes each called once, the last also once on each of 1,000 more threads.
        (
            "called",
            many_scopes(50_000, 50_000, 1_000, false),
            50_000,
            51_000,
        ),
        // 100,000 threads that each call one scope once: 32 bytes of file a thread, so every
        // reader's per-thread state (stacks, rows, export streams) must be as small.
        ("threads", many_scopes(10, 10, 100_000, false), 10, 100_010),
        (
            "called-lz4",
            many_scopes(50_000, 50_000, 1_000, true),
            50_000,
            51_000,
        ),
    ];
    // The listener's own footprint (its runtime and connection threads) is larger than a
    // report's: measured the same way, on the tiny capture.
    let listened = |name: &str, bytes: &[u8]| -> i64 {
        let got = d.join(format!("{name}.got.tscap"));
        let mut l = listen(&got, &["--quiet"]);
        let mut s = TcpStream::connect(("127.0.0.1", l.port)).unwrap();
        s.write_all(bytes).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        assert!(matches!(s.read(&mut [0u8; 16]), Ok(0)), "not closed");
        let peak = peak_rss(l.child.id());
        let _ = l.child.kill();
        let (_, err) = l.wait();
        assert_eq!(std::fs::read(&got).unwrap(), bytes, "{err}");
        peak
    };
    let listen_allowance = listened("tiny", &sample(true).bytes) + 8 * 1024;
    let mut over = Vec::new();
    for (name, c, rows, thread_rows) in &captures {
        let f = write(&d, &format!("{name}.tscap"), &c.bytes);
        let input = 4 * c.len() as i64 / 1024;
        let out = d.join(format!("{name}.out")).display().to_string();
        let runs: [(&[&str], i64); 6] = [
            (&["report", &f], rows * 512 / 1024),
            (
                &["report", &f, "--per-thread", "--json"],
                (rows + thread_rows) * 512 / 1024,
            ),
            (&["convert", &f, "--to", "chrome", "-o", &out], 0),
            (&["convert", &f, "--to", "perfetto", "-o", &out], 0),
            (&["convert", &f, "--to", "speedscope", "-o", &out], 0),
            (&["convert", &f, "--to", "folded", "-o", &out], 0),
        ];
        for (args, rows) in runs {
            let bound = input + allowance(args);
            let (code, err, peak) = measured(args);
            assert_eq!(code, Some(0), "{args:?}: {err}");
            let output = match args[0] {
                "convert" => std::fs::metadata(&out).unwrap().len() as i64 / 1024,
                _ => rows,
            };
            let what = format!("{name}: {} {}", args[0], args[2..].join(" "));
            let bound = bound + output;
            eprintln!("{what}: peak {peak} KiB, bound {bound} KiB");
            if peak > bound {
                over.push(format!("{what}: peak {peak} KiB over {bound} KiB"));
            }
        }
        // The listener closes a connection once it has recorded it; its peak is read then,
        // while it waits for the next.
        let peak = listened(name, &c.bytes);
        let bound = 4 * c.len() as i64 / 1024 + listen_allowance;
        eprintln!("{name}: capture listen: peak {peak} KiB, bound {bound} KiB");
        if peak > bound {
            over.push(format!(
                "{name}: capture listen: peak {peak} KiB over {bound} KiB"
            ));
        }
    }
    assert!(
        over.is_empty(),
        "files {:?} bytes:\n{}",
        captures.iter().map(|c| c.1.len()).collect::<Vec<_>>(),
        over.join("\n")
    );
    let _ = std::fs::remove_dir_all(&d);
}
