//! `tickscope view` without `--no-open`: the opener (a stand-in `xdg-open` on PATH that
//! records its arguments) is given the path of a file that redirects to the URL, never the
//! token, which every local user could read in `/proc/PID/cmdline`; the file is the user's
//! alone (0600 in a new 0700 directory) and goes once the page is served, or at Ctrl-C.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::{dir, tickscope};

const DEADLINE: Duration = Duration::from_secs(60);

/// Polls `done` every 10 ms until it holds; panics with `what` at the deadline.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < end, "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `tickscope view PROFILE` with the stand-in opener first on PATH and `run` as
/// `$XDG_RUNTIME_DIR`: the process and its URL.
fn view_opening(d: &Path, run: &Path) -> (Child, String) {
    let profile = d.join("p.folded");
    std::fs::write(&profile, "main;work 10\nmain;rest 5\n").unwrap();
    opening(d, run, &["view".as_ref(), profile.as_os_str()])
}

/// `tickscope ARGS` (a command that opens the viewer) with the stand-in opener first on PATH
/// and `run` as `$XDG_RUNTIME_DIR`: the process and the URL it printed first.
fn opening(d: &Path, run: &Path, args: &[&std::ffi::OsStr]) -> (Child, String) {
    let bin = d.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opener = bin.join("xdg-open");
    // Its arguments, one a line, written whole (renamed into place).
    std::fs::write(
        &opener,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$0.argv.tmp\" && mv \"$0.argv.tmp\" \"$0.argv\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = tickscope()
        .args(args)
        .env("PATH", path)
        .env("XDG_RUNTIME_DIR", run)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    assert!(url.contains("/?token="), "{url:?}");
    (child, url.trim().to_owned())
}

/// Ctrl-C to `child`: it ends as SIGINT would end it (130), having cleaned up.
fn interrupt(child: &mut Child) {
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
}

/// The file the opener was given, once it has run.
fn opened(d: &Path) -> (String, PathBuf) {
    let argv = d.join("bin/xdg-open.argv");
    wait_for("the opener did not run", || argv.exists());
    let args = std::fs::read_to_string(&argv).unwrap();
    let _ = std::fs::remove_file(&argv);
    let file = PathBuf::from(args.lines().next().unwrap());
    (args, file)
}

#[test]
fn the_browser_is_opened_through_a_private_file_never_with_the_token_in_a_command_line() {
    let d = dir("opener");
    let run = d.join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let (mut child, url) = view_opening(&d, &run);
    let token = url.split("token=").nth(1).unwrap().to_owned();
    let (args, file) = opened(&d);
    assert!(
        !args.contains(&token),
        "the token in the opener's arguments: {args}"
    );
    assert_eq!(args.lines().count(), 1, "{args}");
    // In a new directory under $XDG_RUNTIME_DIR; the user's alone; it holds the URL.
    let folder = file.parent().unwrap().to_owned();
    assert_eq!(folder.parent(), Some(run.as_path()), "{}", file.display());
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&file), mode(&folder)), (0o600, 0o700));
    let html = std::fs::read_to_string(&file).unwrap();
    assert!(html.contains(&url.replace('&', "&amp;")), "{html}");
    // The viewer's own command line has no token either.
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", child.id())).unwrap();
    assert!(!String::from_utf8_lossy(&cmdline).contains(&token));
    // The page served with the token: the file has done its job and goes.
    let addr = url
        .strip_prefix("http://")
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /?token={token} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:.100}");
    wait_for("the redirect is still there after the page", || {
        !file.exists() && !folder.exists()
    });
    let _ = child.kill();
    let _ = child.wait();

    // Ctrl-C before the browser came: the file goes with the viewer.
    let (mut child, _) = view_opening(&d, &run);
    let (_, file) = opened(&d);
    assert!(file.exists());
    interrupt(&mut child);
    assert!(!file.exists() && !file.parent().unwrap().exists());
    let _ = std::fs::remove_dir_all(&d);
}

/// `capture listen --view` opens the viewer the same way: no token in the opener's arguments,
/// and its redirect file goes at Ctrl-C (it used to wait for a two-minute timer).
#[test]
fn capture_listen_view_opens_the_browser_the_same_way() {
    let d = dir("opener-listen");
    let run = d.join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = d.join("live.tscap");
    let (mut child, url) = opening(
        &d,
        &run,
        &[
            "capture".as_ref(),
            "listen".as_ref(),
            "127.0.0.1:0".as_ref(),
            "--view".as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
        ],
    );
    let token = url.split("token=").nth(1).unwrap().to_owned();
    let (args, file) = opened(&d);
    assert!(!args.contains(&token), "{args}");
    assert!(file.exists());
    interrupt(&mut child);
    assert!(!file.exists() && !file.parent().unwrap().exists());
    let _ = std::fs::remove_dir_all(&d);
}
