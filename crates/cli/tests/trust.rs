//! The user's files, and everyone else's (reliability probe 3, rows S1-S4, D1, D3, R5, U1-U3):
//! an output never follows a link planted at its name, never replaces a device or FIFO;
//! `record` keeps its files where no other user reaches them and adopts none of theirs; a
//! full disk keeps the old file and says so; two runs into one output keep both profiles;
//! `record` killed takes its program with it.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::record::{bin, library, scratch, workload};

fn run(cmd: &mut Command) -> (Option<i32>, String) {
    let out: Output = cmd.stdin(Stdio::null()).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn tickscope(dir: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(dir)
        .env("TICKSCOPE_LIB", library())
        .env("TICKSCOPE_SUMMARY", "off");
    c
}

/// `demo` for `seconds` on one thread, without interval lines.
fn demo_args(seconds: &str) -> [&str; 7] {
    [
        "demo",
        "--seconds",
        seconds,
        "--threads",
        "1",
        "--interval",
        "off",
    ]
}

/// A small capture and CPU profile from the demo, in `dir`.
fn demo_files(dir: &Path) -> (PathBuf, PathBuf) {
    let (cap, prof) = (dir.join("small.tscap"), dir.join("small.pb.gz"));
    let (code, err) = run(tickscope(dir)
        .args(demo_args("0.3"))
        .arg("--capture")
        .arg(&cap)
        .arg("--cpuprofile")
        .arg(&prof));
    assert_eq!(code, Some(0), "{err}");
    (cap, prof)
}

/// Temporary files and run directories left in `dir`.
fn litter(dir: &Path) -> Vec<String> {
    crate::names(dir)
        .into_iter()
        .filter(|n| n.contains(".tmp-") || n.contains(".tickscope-"))
        .collect()
}

/// Root-only checks skip outside CI with a line saying so; CI runs as root and runs them.
fn root_or_skip(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{what} needs root, and CI runs as root"
    );
    eprintln!("skipped (needs root, as CI runs): {what}");
    false
}

/// The commands that write an output, each naming `out` (in `dir`).
fn writers(dir: &Path, cap: &Path, prof: &Path, exe: &Path, out: &str) -> Vec<(String, Command)> {
    let mut v = Vec::new();
    let mut c = tickscope(dir);
    c.arg("convert")
        .arg(cap)
        .args(["--to", "chrome", "-o", out]);
    v.push(("convert".to_string(), c));
    let mut c = tickscope(dir);
    c.arg("flamegraph").arg(prof).args(["-o", out]);
    v.push(("flamegraph".into(), c));
    let mut c = tickscope(dir);
    c.arg("diff").arg(prof).arg(prof).args(["-o", out]);
    v.push(("diff".into(), c));
    let mut c = tickscope(dir);
    c.args(["record", "--top", "0", "-o", out, "--"])
        .arg(exe)
        .arg("50");
    v.push(("record".into(), c));
    for flag in ["--cpuprofile", "--capture"] {
        let mut c = tickscope(dir);
        c.args(demo_args("0.1")).args([flag, out]);
        v.push((format!("demo {flag}"), c));
    }
    v
}

/// Plants a link at `at` to `to`, as another user would: as root, the link is given to
/// `nobody`; otherwise `to` must be a file of another user's for the link to count as planted.
fn plant_link(to: &Path, at: &Path) {
    let _ = std::fs::remove_file(at);
    std::os::unix::fs::symlink(to, at).unwrap();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        let c = std::ffi::CString::new(at.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path that lives across the call.
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), 65534, 65534) }, 0);
    }
}

/// S1: a symlink planted at an output's name by another user is refused with one line; the
/// file it points to is untouched and the link stays a link. (As root, a file of root's
/// behind a link of nobody's; otherwise this user's own link to a file of root's.)
#[test]
fn no_output_follows_a_link_planted_at_its_name() {
    let dir = scratch("trust-link");
    let exe = workload(&dir);
    let (cap, prof) = demo_files(&dir);
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let victim = match root {
        true => dir.join("victim"),
        false => PathBuf::from("/etc/hostname"),
    };
    let precious = match root {
        true => "precious".to_string(),
        false => std::fs::read_to_string(&victim).unwrap(),
    };
    for (what, mut cmd) in writers(&dir, &cap, &prof, &exe, "out") {
        if root {
            std::fs::write(&victim, &precious).unwrap();
        }
        plant_link(&victim, &dir.join("out"));
        let (code, err) = run(&mut cmd);
        assert_ne!(code, Some(0), "{what}: {err}");
        assert!(err.contains("symbolic link"), "{what}: {err}");
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            precious,
            "{what}"
        );
        let m = std::fs::symlink_metadata(dir.join("out")).unwrap();
        assert!(m.file_type().is_symlink(), "{what}");
        assert_eq!(litter(&dir), Vec::<String>::new(), "{what}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// S4: a FIFO named as the output gets the output, as a shell's `>` gives it, and stays a
/// FIFO; a device node (root: `mknod`) stays a device.
#[test]
fn a_fifo_or_device_output_is_written_into_never_replaced() {
    let dir = scratch("trust-fifo");
    let (cap, prof) = demo_files(&dir);
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    let (code, err) = run(tickscope(&dir)
        .arg("convert")
        .arg(&cap)
        .args(["--to", "folded", "-o", "fifo"]));
    assert_eq!(code, Some(0), "{err}");
    let got = reader.join().unwrap();
    let want = Command::new(bin())
        .arg("convert")
        .arg(&cap)
        .args(["--to", "folded", "-o", "-"])
        .output()
        .unwrap()
        .stdout;
    assert!(!want.is_empty());
    assert_eq!(got, want, "the FIFO's reader got the output");
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    // `record -o /dev/null`, as any user: the run's directory is not made in /dev.
    let exe = workload(&dir);
    let (code, err) = run(tickscope(&dir)
        .args(["record", "--top", "0", "-o", "/dev/null", "--"])
        .arg(&exe)
        .arg("50"));
    assert_eq!(code, Some(0), "{err}");
    let m = std::fs::symlink_metadata("/dev/null").unwrap();
    assert!(m.file_type().is_char_device());
    assert!(!crate::names(Path::new("/dev"))
        .iter()
        .any(|n| n.contains(".tickscope-")));
    if !root_or_skip("an output naming a device node (mknod)") {
        return;
    }
    let dnull = dir.join("dnull");
    let made = Command::new("mknod")
        .arg(&dnull)
        .args(["c", "1", "3"])
        .status()
        .unwrap();
    assert!(made.success(), "mknod");
    for (what, mut cmd) in writers(&dir, &cap, &prof, &exe, "dnull") {
        let (code, err) = run(&mut cmd);
        assert_eq!(code, Some(0), "{what}: {err}");
        let m = std::fs::symlink_metadata(&dnull).unwrap();
        assert!(m.file_type().is_char_device(), "{what} replaced the device");
        assert_eq!(m.rdev(), libc::makedev(1, 3), "{what}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// S2, S3, U2: names planted where an older `record` put its run's files (links to a file of
/// the user's at `.<out>.tmp-<pid>-0.<pid+N>`, a profile of someone else's at `…0.999999`,
/// and a thousand messages-file names in the temporary directory) neither stop the run nor
/// are followed or adopted: the run keeps exactly the profiles of the programs it exec'd.
#[test]
fn record_follows_adopts_and_trips_on_nothing_planted() {
    let dir = scratch("trust-plant");
    let exe = workload(&dir);
    let (_, prof) = demo_files(&dir);
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    std::fs::write(dir.join("victim"), "precious").unwrap();
    // `$$` is the shell's pid, and record's once it execs it.
    let script = format!(
        r#"i=1; while [ $i -le 50 ]; do ln -s victim .out.pb.gz.tmp-$$-0.$(($$ + i)); i=$((i + 1)); done
cp {prof} .out.pb.gz.tmp-$$-0.999999
i=0; while [ $i -lt 1000 ]; do : > tmp/tickscope-messages-$$-$i; i=$((i + 1)); done
exec {bin} record --top 0 -o out.pb.gz -- sh -c '{exe} 100; {exe} 100'"#,
        prof = prof.display(),
        bin = bin(),
        exe = exe.display()
    );
    let (code, err) = run(Command::new("sh")
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", library())
        .env("TMPDIR", &tmp)
        .args(["-c", &script]));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("victim")).unwrap(),
        "precious"
    );
    assert!(err.contains("2 programs it exec'd"), "{err}");
    let kept: Vec<String> = crate::names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("out.pb.gz."))
        .collect();
    assert_eq!(kept.len(), 2, "{kept:?}\n{err}");
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    for k in &kept {
        assert!(!k.ends_with(".999999"), "{k} adopted");
        let m = std::fs::symlink_metadata(dir.join(k)).unwrap();
        assert!(m.file_type().is_file() && m.uid() == euid, "{k}");
        assert!(tickscope_profile::load(dir.join(k)).is_ok(), "{k}");
    }
    let planted = crate::names(&dir)
        .into_iter()
        .filter(|n| n.starts_with(".out.pb.gz.tmp-"))
        .count();
    assert_eq!(planted, 51, "the planted names are left alone");
    assert!(!err.contains("starts with"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The pids of `parent`'s children.
fn children(parent: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Whether `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// R5: `record` killed by SIGKILL ends its program (a server would otherwise run for ever);
/// the next run naming the same output removes what the killed one left.
#[test]
fn record_killed_takes_its_program_with_it() {
    let dir = scratch("trust-kill");
    let exe = workload(&dir);
    let mut rec = tickscope(&dir)
        .args(["record", "--top", "0", "-o", "k.pb.gz", "--"])
        .arg(&exe)
        .arg("600000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let parent = rec.id();
    let program = wait_for("the program started", || children(parent).first().copied());
    // SAFETY: kill with a pid this test spawned and has not reaped.
    unsafe { libc::kill(parent as i32, libc::SIGKILL) };
    rec.wait().unwrap();
    wait_for("the program ended with record", || {
        ended(program).then_some(())
    });
    let (code, err) = run(tickscope(&dir)
        .args(["record", "--top", "0", "-o", "k.pb.gz", "--"])
        .arg(&exe)
        .arg("50"));
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(litter(&dir), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}

/// D3: a run that finds its output written by another run meanwhile keeps its profile apart
/// (`OUT.<run>`) and says so; both profiles are whole.
#[test]
fn two_runs_into_one_output_both_keep_their_profile() {
    let dir = scratch("trust-two");
    let exe = workload(&dir);
    // The first run's program waits for `go` (at most 60 s), then works.
    let script = format!(
        "i=0; while [ ! -e go ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i + 1)); done; {} 50",
        exe.display()
    );
    let first = tickscope(&dir)
        .args([
            "record",
            "--top",
            "0",
            "-o",
            "same.pb.gz",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let first_pid = first.id();
    wait_for("the first run's program", || {
        children(first_pid).first().copied()
    });
    let (code, err) = run(tickscope(&dir)
        .args(["record", "--top", "0", "-o", "same.pb.gz", "--"])
        .arg(&exe)
        .arg("50"));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("profile written to same.pb.gz"), "{err}");
    std::fs::write(dir.join("go"), "").unwrap();
    let out = first.wait_with_output().unwrap();
    let err1 = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err1}");
    assert!(
        err1.contains("another process wrote same.pb.gz while this run went on"),
        "{err1}"
    );
    let apart: Vec<String> = crate::names(&dir)
        .into_iter()
        .filter(|n| {
            n.strip_prefix("same.pb.gz.")
                .is_some_and(|run| run.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    assert_eq!(apart.len(), 1, "{apart:?}\n{err1}");
    assert!(
        err1.contains(&format!("profile written to {}", apart[0])),
        "{err1}"
    );
    for f in ["same.pb.gz", &apart[0]] {
        assert!(tickscope_profile::load(dir.join(f)).is_ok(), "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cmd` with files limited to `bytes` (RLIMIT_FSIZE, SIGXFSZ ignored): writes past it fail
/// with EFBIG, as on a full disk.
fn with_file_limit(cmd: &mut Command, bytes: u64) -> &mut Command {
    // SAFETY: `limit_files` runs between fork and exec and makes only async-signal-safe
    // calls (setrlimit, signal).
    unsafe { cmd.pre_exec(move || limit_files(bytes)) }
}

fn limit_files(bytes: u64) -> std::io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: bytes,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: `lim` is a valid rlimit that lives across the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: sets a disposition (ignore), no handler code.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    Ok(())
}

/// D1, U1: a capture or profile that cannot be written whole (files limited to a few KB, as
/// a full disk) keeps the old file, exits non-zero and says what it kept; a new capture keeps
/// what was written, which `report` refuses naming `--salvage`, and `--salvage` reads; record
/// gives no wrong cause and keeps no empty profile of a program it exec'd.
#[test]
fn a_full_disk_keeps_the_old_file_and_says_so() {
    let dir = scratch("trust-full");
    let exe = workload(&dir);
    let demo = |cap: &str| {
        let mut c = tickscope(&dir);
        c.args(demo_args("0.5")).args(["--capture", cap]);
        c
    };
    std::fs::write(dir.join("old.tscap"), "old capture").unwrap();
    let (code, err) = run(with_file_limit(&mut demo("old.tscap"), 64 << 10));
    assert_ne!(code, Some(0), "{err}");
    assert!(err.contains("old.tscap kept as it was"), "{err}");
    assert!(!err.contains("timeline written"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("old.tscap")).unwrap(),
        "old capture"
    );
    let (code, err) = run(with_file_limit(&mut demo("new.tscap"), 64 << 10));
    assert_ne!(code, Some(0), "{err}");
    assert!(
        err.contains("new.tscap holds the capture up to the failed write"),
        "{err}"
    );
    let (code, err) = run(tickscope(&dir).args(["report", "new.tscap"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("`--salvage` reads the"), "{err}");
    let (code, err) = run(tickscope(&dir).args(["report", "--salvage", "new.tscap"]));
    assert_eq!(code, Some(0), "{err}");
    // record: the profiles cannot be written.
    std::fs::write(dir.join("out.pb.gz"), "old profile").unwrap();
    let script = format!("{} 200", exe.display());
    let (code, err) = run(with_file_limit(
        tickscope(&dir).args([
            "record",
            "--top",
            "0",
            "-o",
            "out.pb.gz",
            "--",
            "sh",
            "-c",
            &script,
        ]),
        512,
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("File too large"), "{err}");
    assert!(!err.contains("killed or aborted"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.pb.gz")).unwrap(),
        "old profile"
    );
    let kept: Vec<String> = crate::names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("out.pb.gz."))
        .collect();
    assert!(kept.is_empty(), "{kept:?}\n{err}");
    // The same where the library in the program writes its own profile (--wall): it says so
    // to record (protocol::marks::WRITE_FAILED), which gives that cause.
    let (code, err) = run(with_file_limit(
        tickscope(&dir).args([
            "record",
            "--wall",
            "--top",
            "0",
            "-o",
            "out.pb.gz",
            "--",
            "sh",
            "-c",
            &script,
        ]),
        2048,
    ));
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("no profile of sh written: out.pb.gz is unchanged"),
        "{err}"
    );
    assert!(!err.contains("killed or aborted"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("out.pb.gz")).unwrap(),
        "old profile"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// U3: `record --pid` of a kernel thread says so (where this machine shows one: a PID
/// namespace may hide them all).
#[test]
fn record_pid_refuses_a_kernel_thread() {
    let kthread = std::fs::read_dir("/proc").unwrap().find_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let flags: u64 = stat
            .rsplit_once(')')?
            .1
            .split_whitespace()
            .nth(6)?
            .parse()
            .ok()?;
        (flags & 0x0020_0000 != 0).then_some(pid)
    });
    let Some(pid) = kthread else {
        eprintln!("skipped: no kernel thread visible here (a PID namespace)");
        return;
    };
    let dir = scratch("trust-kthread");
    let (code, err) =
        run(tickscope(&dir).args(["record", "--pid", &pid.to_string(), "--duration", "1"]));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is a kernel thread"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A program killed while it captured over an older file leaves that file whole (it is
/// replaced only by a whole capture) and its own capture in the temporary file beside it:
/// `report` of the name says so, and `--salvage` reads the unfinished one.
#[test]
fn a_capture_killed_over_an_old_file_keeps_it_and_report_points_to_the_new_one() {
    let dir = scratch("trust-killed-capture");
    let (cap, _) = demo_files(&dir);
    let old = std::fs::read(&cap).unwrap();
    let mut demo = tickscope(&dir)
        .args(demo_args("60"))
        .arg("--capture")
        .arg(&cap)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let tmp = wait_for("the new capture's chunks", || {
        crate::names(&dir)
            .into_iter()
            .find(|n| n.starts_with(".small.tscap.tmp-"))
            .filter(|n| std::fs::metadata(dir.join(n)).is_ok_and(|m| m.len() > 4096))
    });
    // SAFETY: kill with a pid this test spawned and has not reaped.
    unsafe { libc::kill(demo.id() as i32, libc::SIGKILL) };
    demo.wait().unwrap();
    assert_eq!(
        std::fs::read(&cap).unwrap(),
        old,
        "the old capture is whole"
    );
    let (code, err) = run(tickscope(&dir).args(["report", "small.tscap"]));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains(&format!("{tmp} is newer than small.tscap and unfinished")),
        "{err}"
    );
    let (code, err) = run(tickscope(&dir).args(["report", "--salvage", &tmp]));
    assert_eq!(code, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
