//! `tickscope record -- PROG`: the program runs with libtickscope.so preloaded, its exit
//! status comes back, and the top functions of its profile are printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

// `record --heap`.
mod heap;

pub(crate) fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_tickscope")
}

/// libtickscope.so next to the binary, where `record` looks for it (built by the test).
pub(crate) fn library() -> PathBuf {
    let lib = Path::new(bin()).with_file_name("libtickscope.so");
    crate::preload_support::build_library(lib.parent().unwrap());
    assert!(lib.exists(), "{} is missing after the build", lib.display());
    lib
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tickscope-record-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub(crate) fn workload(dir: &Path) -> PathBuf {
    let exe = dir.join("workload");
    crate::preload_support::build_workload(&exe, true);
    exe
}

#[test]
fn record_forwards_the_exit_status_and_prints_the_top_functions() {
    library();
    let dir = scratch("status");
    let exe = workload(&dir);
    let out = Command::new(bin())
        .current_dir(&dir)
        .args(["record", "-F", "1000", "-o", "w.pb.gz", "--"])
        .arg(&exe)
        .args(["600", "--exit", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    // The program's own output is untouched; the table and the path go to stderr.
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("cpu_ns "));
    assert!(
        stderr.contains("tickscope: profile written to w.pb.gz"),
        "{stderr}"
    );
    let rows: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .take_while(|l| !l.starts_with("tickscope:"))
        .collect();
    assert_eq!(rows.len(), 10, "{stderr}");
    let flat_pct = |name: &str| -> f64 {
        let row = rows
            .iter()
            .find(|r| r.split_whitespace().last() == Some(name))
            .unwrap_or_else(|| panic!("{name} not in the top 10:\n{stderr}"));
        row.split_whitespace()
            .nth(1)
            .unwrap()
            .trim_end_matches('%')
            .parse()
            .unwrap()
    };
    for (name, share) in [
        ("work_a", 40.0),
        ("work_b", 25.0),
        ("work_c", 20.0),
        ("work_d", 10.0),
    ] {
        let got = flat_pct(name);
        assert!(
            (got - share).abs() <= 6.0,
            "{name}: {got}% vs {share}%:\n{stderr}"
        );
    }
    assert!(dir.join("w.pb.gz").is_file());
    // The library's own "written" line is silenced: one line says where, not two.
    assert_eq!(stderr.matches("written to").count(), 1, "{stderr}");
}

#[test]
fn record_says_where_the_library_is_missing_and_what_a_program_did_not_write() {
    let dir = scratch("missing");
    let out = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", dir.join("nope.so"))
        .args(["record", "--", "true"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("TICKSCOPE_LIB=") && stderr.contains("nope.so: no such file"),
        "{stderr}"
    );

    // A program that never runs main's exit path (killed by a signal) writes nothing when
    // it samples itself (here by frame pointers, which `record` leaves to the library; or
    // where `record` cannot sample it from outside): said, with its status forwarded as a
    // shell does (128 + 9).
    let out = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", library())
        .env("TICKSCOPE_CPUPROFILE_UNWIND", "fp")
        .args([
            "record",
            "-o",
            "k.pb.gz",
            "--",
            "sh",
            "-c",
            "/bin/true; kill -KILL $$",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(stderr.contains("wrote no profile to"), "{stderr}");
    assert!(!dir.join("k.pb.gz").exists(), "{stderr}");
    // What the programs it ran said is kept all the same: /bin/true ended before its first
    // sample (100 Hz), and its profile is the run's `.unsampled` file.
    let line = said(&stderr, "1 program it exec'd ended before its first sample");
    let kept = line
        .rsplit("their profile: ")
        .next()
        .and_then(|f| f.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        kept.ends_with(".unsampled") && dir.join(kept).exists(),
        "{line}"
    );
    // Sampled from outside by `record` (CPU time, where perf events are permitted), the
    // same program killed has its profile all the same.
    let (code, _, stderr) = record_in(&dir, ["-o", "c.pb.gz", "--", "sh", "-c", "kill -KILL $$"]);
    assert_eq!(code, Some(137), "{stderr}");
    let top = top_ms(&dir.join("c.pb.gz"), &[]);
    if top.contains("sampled from outside the process") {
        assert!(!stderr.contains("wrote no profile"), "{stderr}");
        assert!(
            top.contains("File: dash") || top.contains("File: sh"),
            "{top}"
        );
    } else {
        assert!(stderr.contains("wrote no profile to c.pb.gz"), "{stderr}");
    }
}

/// A program that cannot run ends `record` as a shell ends: 127 for one not found, 126 for
/// a file that is not executable; no profile is written, an earlier one is kept.
#[test]
fn record_exits_as_a_shell_does_for_a_program_that_cannot_run() {
    let dir = scratch("cannot-run");
    let lib = library();
    std::fs::write(dir.join("old.pb.gz"), b"earlier").unwrap();
    std::fs::write(dir.join("data.txt"), b"not a program").unwrap();
    for (prog, code) in [
        ("./no-such-program", 127),
        ("no-such-program-on-path", 127),
        ("./data.txt", 126),
    ] {
        let out = Command::new(bin())
            .current_dir(&dir)
            .env("TICKSCOPE_LIB", &lib)
            .args(["record", "-o", "old.pb.gz", "--", prog])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{prog}: {stderr}");
        assert!(
            stderr.contains("cannot run") && stderr.contains(prog.trim_start_matches("./")),
            "{stderr}"
        );
        assert_eq!(std::fs::read(dir.join("old.pb.gz")).unwrap(), b"earlier");
    }
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 2, "nothing left behind: {names:?}");
}

/// tickscope's own messages from every process of the run go to `record`'s stderr, never to
/// the program's (here a file the shell redirected its stderr to before running two
/// programs; each of the three warns of its tiny profile); alike messages are said once,
/// counted.
#[test]
fn record_keeps_tickscopes_messages_out_of_the_programs_stderr() {
    let dir = scratch("messages");
    let child = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", library())
        .args(["record", "--top", "0", "-o", "p.pb.gz", "--", "sh", "-c"])
        .arg("exec 2>child.err; /bin/true; /bin/true")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let theirs = std::fs::read_to_string(dir.join("child.err")).unwrap();
    assert_eq!(
        theirs, "",
        "the program's stderr holds only its own: {theirs}"
    );
    let warned: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("holds only"))
        .collect();
    // The few samples are judged once, on the run's profiles together (the shell's, dash
    // at its `_exit`, and the two programs it ran, which ended before their first sample and
    // are said by one line of their own).
    assert_eq!(warned.len(), 0, "{stderr}");
    let few: Vec<&str> = stderr.lines().filter(|l| l.contains("hold only")).collect();
    assert_eq!(few.len(), 1, "{stderr}");
    assert!(
        few[0].starts_with(
            "tickscope: warning: the run's profiles hold only 0 samples (100 Hz requested, over "
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("2 programs it exec'd ended before their first sample"),
        "{stderr}"
    );
    // The run's directory (its messages, its processes' profiles) is gone.
    let left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains(".tickscope-"))
        .collect();
    assert!(left.is_empty(), "{left:?} left behind by run {pid}");
}

/// Whether a run's samples are too few to read shares from is judged once, on its profiles
/// together: a shell that only waited for a busy program (next to no samples of its own)
/// gives no warning where the run holds plenty; a run that holds too few is warned of once,
/// with the count its merged profile holds (tickscope's own threads left out, as from the
/// table), not once per process.
#[test]
fn too_few_samples_are_judged_on_the_whole_run() {
    let dir = scratch("few");
    let exe = workload(&dir);
    let script = format!("{} 300 >/dev/null; /bin/true", exe.display());
    let warnings = |stderr: &str| -> Vec<String> {
        stderr
            .lines()
            .filter(|l| l.contains("only") && l.contains("samples"))
            .map(String::from)
            .collect()
    };
    // 300 ms of CPU time at 1000 Hz: about 300 samples, all but none in the workload.
    let (code, _, stderr) = record_in(
        &dir,
        ["-F", "1000", "-o", "many.pb.gz", "--", "sh", "-c", &script],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(warnings(&stderr), Vec::<String>::new(), "{stderr}");
    // At 10 Hz: about 3 samples in all; one warning, for the run, with the merged count.
    let (code, _, stderr) = record_in(
        &dir,
        [
            "-F",
            "10",
            "--merge",
            "-o",
            "few.pb.gz",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let warned = warnings(&stderr);
    assert_eq!(warned.len(), 1, "{stderr}");
    let count: u64 = warned[0]
        .strip_prefix("tickscope: warning: the run's profiles hold only ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(warned[0].contains("(10 Hz requested, over "), "{stderr}");
    // The table's samples: tickscope's own threads left out, as the table leaves them.
    let raw = Command::new(bin())
        .args([
            "top",
            "--sample-index=samples",
            "--nodecount=1000",
            "--tagignore=thread=^tickscope-",
        ])
        .arg(dir.join("few.pb.gz"))
        .output()
        .unwrap();
    let top = String::from_utf8_lossy(&raw.stdout);
    let total = top
        .lines()
        .find_map(|l| l.split("Total samples = ").nth(1))
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{top}"));
    assert_eq!(count, total, "{stderr}\n{top}");
}

/// The program `record` (pid `parent`) runs, once libtickscope is loaded in it and catches
/// `sig` (the library, to write the profile, or the program's own handler): its pid.
fn profiled_child(parent: u32, sig: i32) -> u32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let children = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
            .unwrap_or_default();
        for pid in children
            .split_whitespace()
            .filter_map(|p| p.parse::<u32>().ok())
        {
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let caught = status
                .lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
                .unwrap_or(0);
            let wanted = 1 << (sig - 1);
            if maps.contains("libtickscope.so") && caught & wanted == wanted {
                return pid;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no profiled child of {parent}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Kills process group `.0` when dropped by a panic (a test that failed).
struct KillOnPanic(i32);

impl Drop for KillOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // SAFETY: kill has no memory arguments.
            unsafe { libc::kill(-self.0, libc::SIGKILL) };
        }
    }
}

/// Ctrl-C (SIGINT to the terminal's whole group) ends the program, not `record`: it waits
/// for the program's profile and shows it, and exits as the program did (130). A SIGTERM sent
/// to `record` alone is passed on to the program, with the same result (143). A program whose
/// own handler ends it by raising the signal again (dash) leaves its profile too, and so does
/// one that asked for the default action (dash, for SIGTERM). The signal is sent again every
/// 0.5 ms until `record` ends: more of them, while the profile is being written, do not cut
/// it short.
#[test]
fn record_outlives_ctrl_c_and_passes_on_a_signal_sent_to_it() {
    use std::os::unix::process::CommandExt;
    let dir = scratch("signals");
    let lib = library();
    // bash leaves SIGINT/SIGTERM to the library's handler; dash (Debian's sh) has a SIGINT
    // handler of its own, which puts the default action back and raises the signal again, and
    // it asks for SIGTERM's default action as it starts.
    for (shell, to_group, sig, code) in [
        ("bash", true, libc::SIGINT, 130),
        ("bash", false, libc::SIGTERM, 143),
        ("sh", true, libc::SIGINT, 130),
        ("sh", false, libc::SIGTERM, 143),
    ] {
        let _ = std::fs::remove_file(dir.join("p.pb.gz"));
        let child = Command::new(bin())
            .current_dir(&dir)
            .env("TICKSCOPE_LIB", &lib)
            .args([
                "record",
                "--top",
                "3",
                "-o",
                "p.pb.gz",
                "--",
                shell,
                "-c",
                "while :; do :; done",
            ])
            .process_group(0)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let record = child.id();
        // A failed assertion leaves no spinning shell behind.
        let _group = KillOnPanic(record as i32);
        profiled_child(record, sig);
        let target = if to_group {
            -(record as i32)
        } else {
            record as i32
        };
        // SAFETY: kill has no memory arguments.
        assert_eq!(unsafe { libc::kill(target, sig) }, 0);
        // Then again and again (every 0.5 ms) until record has ended: a
        // signal that comes while the profile is being written does not cut it short.
        let ended = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let again = {
            let ended = ended.clone();
            std::thread::spawn(move || {
                while !ended.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(std::time::Duration::from_micros(500));
                    // SAFETY: as above (record is not reaped before `ended`: its pid and
                    // group are not anyone else's).
                    unsafe { libc::kill(target, sig) };
                }
            })
        };
        // Waits for record to end without reaping it, then stops the signals, then reaps.
        // SAFETY: siginfo_t is plain data; waitid fills it (WNOWAIT: the child stays).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a valid, writable siginfo_t.
        let waited = unsafe {
            libc::waitid(
                libc::P_PID,
                record as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        ended.store(true, std::sync::atomic::Ordering::SeqCst);
        again.join().unwrap();
        assert_eq!(waited, 0, "waitid: {}", std::io::Error::last_os_error());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{shell}: {stderr}");
        assert!(
            stderr.contains("profile written to p.pb.gz") && stderr.contains("flat%"),
            "{shell}: {stderr}"
        );
        assert!(dir.join("p.pb.gz").exists(), "{shell}");
    }
}

/// A SIGINT sent to the group `record` runs in by another process (`timeout -s INT`, `kill
/// -INT -- -PGID`, a supervisor), not from a terminal: the program gets it once. Sharing
/// `record`'s group, it got it twice (the group's, and `record`'s forwarded copy), and a
/// program with its own SIGINT handler could die of the second while writing its profile.
#[test]
fn a_signal_sent_to_records_group_reaches_the_program_once() {
    use std::os::unix::process::CommandExt;
    let dir = scratch("group-signal");
    let script = "import signal, sys, time\n\
        n = 0\n\
        def h(s, f):\n    global n\n    n += 1\n\
        signal.signal(signal.SIGINT, h)\n\
        open('ready', 'w').close()\n\
        while n == 0:\n    sum(range(1000))\n\
        time.sleep(0.5)\n\
        print('SIGINTs:', n)\n";
    std::fs::write(dir.join("count.py"), script).unwrap();
    let child = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", library())
        .args([
            "record", "--top", "3", "-o", "p.pb.gz", "--", "python3", "count.py",
        ])
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let record = child.id();
    let _group = KillOnPanic(record as i32);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !dir.join("ready").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "python3 never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill has no memory arguments; `record` is not reaped yet.
    assert_eq!(unsafe { libc::kill(-(record as i32), libc::SIGINT) }, 0);
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(stdout.trim(), "SIGINTs: 1", "{stderr}");
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("profile written to p.pb.gz"), "{stderr}");
}

/// An output that is the program (`cp prog p2; record -o p2 -- ./p2`), the library or a file
/// the program is given is refused before the program starts; the file is untouched.
#[test]
fn record_refuses_an_output_that_is_the_program_or_an_input() {
    let lib = library();
    let dir = scratch("same");
    let exe = workload(&dir);
    std::fs::copy(&exe, dir.join("p2")).unwrap();
    std::fs::write(dir.join("in.txt"), "data").unwrap();
    let lib_link = dir.join("lib.pb.gz");
    std::os::unix::fs::symlink(&lib, &lib_link).unwrap();
    let cases: [(&str, &[&str], String); 3] = [
        ("p2", &["./p2", "10"], "./p2".into()),
        (
            "in.txt",
            &["sh", "-c", "touch ran", "in.txt"],
            "in.txt".into(),
        ),
        (
            "lib.pb.gz",
            &["sh", "-c", "touch ran"],
            std::fs::canonicalize(&lib).unwrap().display().to_string(),
        ),
    ];
    for (output, command, input) in cases {
        let before = std::fs::read(dir.join(output)).unwrap();
        let out = Command::new(bin())
            .current_dir(&dir)
            .env("TICKSCOPE_LIB", &lib)
            .args(["record", "-o", output, "--"])
            .args(command)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{output}: {stderr}");
        assert_eq!(
            stderr,
            format!("tickscope: error: refusing to write {output}: it is the same file as the input {input}\n")
        );
        assert_eq!(std::fs::read(dir.join(output)).unwrap(), before, "{output}");
        assert!(!dir.join("ran").exists(), "{output}: the program ran");
    }
}

/// A directory that is missing or takes no files is refused before the program starts,
/// with the real cause (not "it was killed or aborted ...").
#[test]
fn record_checks_the_output_directory_before_starting_the_program() {
    let lib = library();
    let dir = scratch("nodir");
    let missing = dir.join("no/such/o.pb.gz");
    for (output, says) in [
        (
            missing.display().to_string(),
            format!(
                "tickscope: error: cannot write {}: the directory {} does not exist\n",
                missing.display(),
                dir.join("no").display()
            ),
        ),
        (
            "/proc/o.pb.gz".to_owned(),
            "tickscope: error: cannot write /proc/o.pb.gz: cannot create a file in /proc: "
                .to_owned(),
        ),
    ] {
        let out = Command::new(bin())
            .current_dir(&dir)
            .env("TICKSCOPE_LIB", &lib)
            .args(["record", "-o", &output, "--", "sh", "-c", "touch ran"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.starts_with(&says) && stderr.lines().count() == 1,
            "{stderr}"
        );
        assert!(!dir.join("ran").exists(), "the program ran: {stderr}");
    }
}

/// A run that writes no profile (killed, `_exit`, static) leaves the old one as it was; a run
/// that writes one replaces it, and a program it exec'd has its own file beside it. No
/// temporary file is left either way.
#[test]
fn record_keeps_the_old_profile_when_the_run_writes_none() {
    let lib = library();
    let dir = scratch("keep");
    let exe = workload(&dir);
    std::fs::write(dir.join("old.pb.gz"), "the old profile").unwrap();
    // (Wall time: the program samples itself, and a killed one writes nothing. In CPU time
    // `record` samples it from outside, and writes its profile however it ends.)
    let out = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", &lib)
        .args([
            "record",
            "--wall",
            "-o",
            "old.pb.gz",
            "--",
            "sh",
            "-c",
            "kill -KILL $$",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(stderr.contains("wrote no profile to old.pb.gz"), "{stderr}");
    assert_old_profile_kept(&dir);
    // A profile cut short (here: written by hand, then killed) does not replace it either.
    let out = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", &lib)
        .args(["record", "--wall", "-o", "old.pb.gz", "--", "sh", "-c"])
        .arg(r#"printf '\037\213cut' > "$TICKSCOPE_CPUPROFILE"; kill -KILL $$"#)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(137), "{stderr}");
    assert!(
        stderr.starts_with("tickscope: error: sh wrote a damaged profile, not kept (gzip data")
            && stderr.ends_with("; old.pb.gz is unchanged\n"),
        "{stderr}"
    );
    assert_old_profile_kept(&dir);

    // `bash` runs the workload as a child: both write a profile, each to its own name.
    let out = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", &lib)
        .args(["record", "-o", "old.pb.gz", "--", "bash", "-c"])
        .arg(format!("{} 50; true", exe.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let names = crate::names(&dir);
    assert_eq!(names.len(), 3, "{names:?}");
    let child = names
        .iter()
        .find(|n| n.starts_with("old.pb.gz."))
        .unwrap_or_else(|| panic!("{names:?}"));
    assert!(
        stderr.contains(&format!("a program it exec'd: {child}")),
        "{stderr}"
    );
    for f in ["old.pb.gz", child] {
        let top = Command::new(bin())
            .args(["top"])
            .arg(dir.join(f))
            .output()
            .unwrap();
        assert!(
            top.status.success(),
            "{f}: {}",
            String::from_utf8_lossy(&top.stderr)
        );
    }
}

/// `old.pb.gz` in `dir` still holds the old profile, and no temporary file was left beside it.
fn assert_old_profile_kept(dir: &Path) {
    assert_eq!(
        std::fs::read_to_string(dir.join("old.pb.gz")).unwrap(),
        "the old profile"
    );
    assert_eq!(crate::names(dir), ["old.pb.gz", "workload"]);
}

/// The processes of a run: the printed table covers all of them; the programs it exec'd keep
/// files named by the run, so a second run into the same `-o` never takes or replaces the
/// first one's; `--merge` writes one file that `go tool pprof` reads, each sample labelled
/// with its process.
#[test]
fn runs_into_one_output_never_mix_and_merge_writes_one_profile_of_every_process() {
    let lib = library();
    let dir = scratch("runs");
    let exe = workload(&dir);
    let script = format!("{0} 60; {0} 60; true", exe.display());
    let record = |args: &[&str]| {
        let out = Command::new(bin())
            .current_dir(&dir)
            .env("TICKSCOPE_LIB", &lib)
            .arg("record")
            .args(args)
            .args(["--", "bash", "-c", &script])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        stderr
    };
    let first = record(&["-o", "s.pb.gz"]);
    let files = |prefix: &str| -> Vec<String> {
        crate::names(&dir)
            .into_iter()
            .filter(|n| n.starts_with(prefix))
            .collect()
    };
    let runs1 = files("s.pb.gz.");
    assert_eq!(runs1.len(), 2, "{runs1:?}\n{first}");
    assert!(first.contains("Processes: 3"), "{first}");
    assert!(first.contains("2 programs it exec'd"), "{first}");
    let saved: Vec<Vec<u8>> = runs1
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect();
    // The table is of every process: the workload's functions (in the exec'd programs)
    // lead it, though the program itself (bash) hardly ran.
    assert!(first.contains("work_a"), "{first}");

    let second = record(&["-o", "s.pb.gz"]);
    let runs2: Vec<String> = files("s.pb.gz.")
        .into_iter()
        .filter(|f| !runs1.contains(f))
        .collect();
    assert_eq!(runs2.len(), 2, "{runs2:?}");
    for (f, bytes) in runs1.iter().zip(&saved) {
        assert_eq!(&std::fs::read(dir.join(f)).unwrap(), bytes, "{f} changed");
        assert!(
            !second.contains(f.as_str()),
            "the second run names {f}: {second}"
        );
    }
    // Each run's files share its run id, and differ from the other run's.
    let run = |f: &String| f.split('.').nth(3).unwrap().to_string();
    assert_eq!(run(&runs2[0]), run(&runs2[1]));
    assert_ne!(run(&runs1[0]), run(&runs2[0]));

    let merged = record(&["-o", "m.pb.gz", "--merge"]);
    assert_eq!(files("m.pb.gz"), ["m.pb.gz"], "{merged}");
    assert!(
        merged.contains("profile of 3 processes written to m.pb.gz"),
        "{merged}"
    );
    let m = dir.join("m.pb.gz");
    // go tool pprof reads it: the same rows as ours, and the processes' labels.
    let go = |args: &[&str]| {
        let out = Command::new("go")
            .args(["tool", "pprof"])
            .args(args)
            .arg(&m)
            .output()
            .expect("`go` not found: install Go (Debian: golang-go; .ci/run does)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let rows = |t: &str| -> Vec<String> {
        t.lines()
            .skip_while(|l| !l.trim_start().starts_with("flat  flat%"))
            .skip(1)
            .map(|l| l.trim_end().to_string())
            .collect()
    };
    let ours = Command::new(bin()).arg("top").arg(&m).output().unwrap();
    let ours = String::from_utf8_lossy(&ours.stdout).into_owned();
    let theirs = go(&["-top"]);
    assert!(!rows(&theirs).is_empty(), "{theirs}");
    assert_eq!(
        rows(&ours),
        rows(&theirs),
        "-- go:\n{theirs}\n-- ours:\n{ours}"
    );
    let tags = go(&["-tags"]);
    assert!(tags.contains("pid") && tags.contains("program"), "{tags}");
    assert!(tags.contains("workload") && tags.contains("bash"), "{tags}");
}

/// A program the run exec'd that ends before its first sample (most commands of a shell
/// script) writes no file of its own: it says its CPU time to `record`, which counts and names
/// such programs, puts their time in its table as one row, and keeps one profile of them all
/// (`<output>.<run>.unsampled`) beside those of the programs that were sampled; with
/// `--merge`, they are in the merged profile, each labelled with its pid and program.
#[test]
fn programs_that_end_before_their_first_sample_leave_a_line_not_a_file() {
    let dir = scratch("unsampled");
    let exe = workload(&dir);
    // At 100 Hz, /bin/true ends long before 10 ms of CPU time; the workload runs 300 ms.
    // (`; :` keeps bash from exec'ing the workload in its own place.)
    let script = format!("/bin/true; /bin/true; /bin/true; {} 300; :", exe.display());
    let (code, _, stderr) = record_in(&dir, ["-o", "u.pb.gz", "--", "bash", "-c", &script]);
    assert_eq!(code, Some(0), "{stderr}");
    let files: Vec<String> = crate::names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("u.pb.gz"))
        .collect();
    let run = files
        .iter()
        .find_map(|f| f.strip_suffix(".unsampled"))
        .and_then(|f| f.strip_prefix("u.pb.gz."))
        .unwrap_or_else(|| panic!("no .unsampled profile: {files:?}\n{stderr}"))
        .to_string();
    let mut want = vec!["u.pb.gz".to_string(), format!("u.pb.gz.{run}.unsampled")];
    // The workload's own file, and none for the three /bin/true.
    let sampled: Vec<&String> = files.iter().filter(|f| !want.contains(f)).collect();
    assert_eq!(sampled.len(), 1, "{files:?}\n{stderr}");
    want.push(sampled[0].clone());
    assert!(stderr.contains("Processes: 5"), "{stderr}");
    let line = said(&stderr, "it exec'd ended before their first sample");
    assert!(
        line.contains("3 programs it exec'd") && line.contains(": true (3)"),
        "{line}"
    );
    assert!(line.contains(&format!("u.pb.gz.{run}.unsampled")), "{line}");
    // Their warnings of an empty profile are said by that line, not 3 times more (bash's
    // own, of its file, stays).
    assert!(!stderr.contains("more like it"), "{stderr}");
    // Their time is a row of the table, and of the files read together.
    let row = "[not sampled: programs that ended before their first sample]";
    assert!(stderr.contains(row), "{stderr}");
    let unsampled = dir.join(format!("u.pb.gz.{run}.unsampled"));
    let out = Command::new("go")
        .args(["tool", "pprof", "-tags"])
        .arg(&unsampled)
        .output()
        .expect("`go` not found: install Go (Debian: golang-go; .ci/run does)");
    let go = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(go.contains("program") && go.contains("true"), "{go}");
    let ms = top_ms(&unsampled, &[]);
    assert!(ms.contains(row), "{ms}");
    // Each said a CPU time: three processes' exec, loading and exit, more than nothing.
    assert!(self::ms(&ms, row, 0) > 0.0, "{ms}");

    let (code, _, stderr) = record_in(
        &dir,
        ["-o", "m.pb.gz", "--merge", "--", "bash", "-c", &script],
    );
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("profile of 5 processes written to m.pb.gz"),
        "{stderr}"
    );
    let merged: Vec<String> = crate::names(&dir)
        .into_iter()
        .filter(|n| n.starts_with("m.pb.gz"))
        .collect();
    assert_eq!(merged, ["m.pb.gz"], "{stderr}");
    let tags = Command::new("go")
        .args(["tool", "pprof", "-tags"])
        .arg(dir.join("m.pb.gz"))
        .output()
        .unwrap();
    let tags = String::from_utf8_lossy(&tags.stdout);
    assert!(tags.contains("true") && tags.contains("workload"), "{tags}");
}

/// `record`'s settings that keep it from sampling its program from outside (the library's
/// frame-pointer walk): its fork children are then not followed either.
const NOT_OUTSIDE: &[(&str, &str)] = &[("TICKSCOPE_CPUPROFILE_UNWIND", "fp")];

/// A `multiprocessing` pool of two forked workers (no exec). By default `record` samples
/// them from outside as it samples the program, each into a profile of its own: the run's
/// CPU time is held. Where it cannot sample from outside, each is counted and named with its
/// CPU time, though the pool ends them by SIGTERM, even one already on its way out by `_exit`
/// when the signal comes (which once lost its line in 2 runs of 10). With `--forks` each
/// samples itself into a file of its own (both: the two once shared the pipe their `_exit`
/// waits on, and the first one written ended the other's wait before its profile was).
#[test]
fn a_python_pools_forked_workers_are_sampled_from_outside_or_by_themselves_with_forks() {
    let dir = scratch("pool");
    let script = "import multiprocessing\n\
def f(n):\n    s = 0\n    for i in range(n):\n        s += i * i % 7\n    return s\n\
if __name__ == '__main__':\n    multiprocessing.set_start_method('fork')\n\
    with multiprocessing.Pool(2) as p:\n        print(sum(p.map(f, [300000] * 4)))\n";
    std::fs::write(dir.join("pool.py"), script).unwrap();
    // Not from outside: the workers are said, with their CPU time.
    let (code, _, stderr) = record_with(
        &dir,
        NOT_OUTSIDE,
        ["-o", "p.pb.gz", "--", "python3", "pool.py"],
    );
    assert_eq!(code, Some(0), "python3 (Debian: python3): {stderr}");
    let forks = said(&stderr, "that did not exec ran unprofiled");
    // (A `python3` that is a shell script, pyenv's, adds its shell's subshells.)
    assert!(forks.contains("python3 (2)"), "{forks}");
    assert!(forks.contains("record --forks samples them too"), "{forks}");
    let (without, line) = accounting(&stderr);
    // The workers' share of the run's CPU time, which following them puts in the profiles.
    let ms = |text: &str| match text.trim().split_once(' ') {
        Some((v, "ms")) => v.parse::<f64>().ok(),
        Some((v, "s")) => v.parse::<f64>().ok().map(|s| s * 1e3),
        _ => None,
    };
    let workers_ms = (forks.split(" of CPU time").next())
        .and_then(|l| ms(l.rsplit(", ").next()?))
        .unwrap_or_else(|| panic!("{forks}"));
    let run_ms = (line.split_once(" of the "))
        .and_then(|(_, r)| ms(r.split(" of CPU time").next()?))
        .unwrap_or_else(|| panic!("{line}"));
    let share = 100.0 * workers_ms / run_ms;
    // By default, and with --forks: the run's CPU time is in the profiles, no worker is
    // said unprofiled, and each worker has a profile of its own, sampled from outside (no
    // thread of tickscope's in it) by default, by itself with --forks.
    for (flags, output, outside) in [
        (&[][..], "o.pb.gz", true),
        (&["--forks"][..], "q.pb.gz", false),
    ] {
        let mut args: Vec<&str> = flags.to_vec();
        args.extend(["-o", output, "--", "python3", "pool.py"]);
        let (code, _, stderr) = record_in(&dir, &args);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(
            !stderr
                .lines()
                .any(|l| l.contains("ran unprofiled") && l.contains("python3")),
            "{flags:?}: {stderr}"
        );
        let (pct, line) = accounting(&stderr);
        // The issue's target for the default; --forks holds the workers' first moments
        // before their start as not sampled, as a program exec'd does.
        assert!(
            pct >= 98.0 && pct >= without + 0.7 * share,
            "{flags:?}: {without:.0}% held not from outside, the workers {share:.0}%; {line}"
        );
        let workers: Vec<PathBuf> = others_of(&dir, output)
            .into_iter()
            .filter(|p| comments_of(p).contains("python3"))
            .collect();
        let from_outside = workers
            .iter()
            .filter(|p| comments_of(p).contains("sampled from outside the process"))
            .count();
        assert!(workers.len() >= 2, "{flags:?}: {workers:?}: {stderr}");
        match outside {
            true => assert!(from_outside >= 2, "{workers:?}"),
            false => assert_eq!(from_outside, 0, "{workers:?}"),
        }
    }
}

/// The profiles of a run's other processes beside `output` in `dir` (`OUTPUT.<run>.<pid>`).
fn others_of(dir: &Path, output: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with(&format!("{output}.")) && !name.ends_with(".unsampled")
        })
        .collect()
}

/// What `go tool pprof -comments` and `-top` say of a profile (its comments and `File:`).
fn comments_of(profile: &Path) -> String {
    let run = |what: &str| {
        let out = Command::new("go")
            .args(["tool", "pprof", what])
            .arg(profile)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run("-comments") + &run("-top")
}

/// A fork child that does not exec (a bash subshell looping in bash): followed from
/// outside by default, its CPU time in a profile of its own; where `record` cannot sample
/// from outside, not profiled, and its CPU time said beside what the profiles hold, never
/// silently missing. Every run gives the profiles' CPU time against its process tree's.
#[test]
fn cpu_of_processes_not_profiled_is_said() {
    let dir = scratch("fork");
    let subshell = "( i=0; while [ $i -lt 150000 ]; do i=$((i+1)); done ); true";
    let (code, _, stderr) = record_in(&dir, ["-o", "e.pb.gz", "--", "bash", "-c", subshell]);
    assert_eq!(code, Some(0), "{stderr}");
    let (pct, line) = accounting(&stderr);
    assert!(pct >= 98.0, "{line}");
    assert!(!stderr.contains("ran unprofiled"), "{stderr}");
    assert!(
        stderr.contains("a process it started: e.pb.gz."),
        "{stderr}"
    );
    let (code, _, stderr) = record_with(
        &dir,
        NOT_OUTSIDE,
        ["-o", "f.pb.gz", "--", "bash", "-c", subshell],
    );
    assert_eq!(code, Some(0), "{stderr}");
    // Most of the run's CPU time was the subshell's: a fork child that did not exec, which
    // says so, named, with its CPU time.
    let (pct, line) = accounting(&stderr);
    assert!(pct < 50.0, "{line}");
    let forks = said(&stderr, "that did not exec ran unprofiled");
    assert!(
        forks.contains("1 fork child ") && forks.ends_with("bash (1)"),
        "{forks}"
    );
    let time = forks
        .split(" of CPU time")
        .next()
        .and_then(|l| l.rsplit(", ").next())
        .unwrap_or_default();
    let said_ms = match time.split_once(' ') {
        Some((v, "ms")) => v.parse::<f64>().unwrap_or(0.0),
        Some((v, "s")) => v.parse::<f64>().unwrap_or(0.0) * 1e3,
        _ => panic!("no CPU time in {forks}"),
    };
    assert!(said_ms > 10.0, "the subshell's loop took more: {forks}");
    // Explained: no guess at what else was not profiled.
    assert!(!line.contains("not profiled"), "{line}");
    // A run whose processes are all profiled: nearly all held, no explanation to give.
    let exe = workload(&dir);
    let (code, _, stderr) = record_in(&dir, ["-o", "g.pb.gz", "--", exe.to_str().unwrap(), "100"]);
    assert_eq!(code, Some(0), "{stderr}");
    let (pct, line) = accounting(&stderr);
    assert!(pct >= 90.0 && !line.contains("not profiled"), "{line}");
}

/// The issue's trees, by default: `make -j2` whose recipes' shells loop in the shell and in
/// a subshell (fork children of programs the run exec'd), and a bash loop of subshells,
/// short ones (most end before `record`, which looks every 10 ms, finds them: their lines
/// hold them) and commands exec'd. Each run holds at least 98% of its tree's CPU time, and
/// the subshells that lived long enough have profiles of their own, sampled from outside.
#[test]
fn record_holds_the_cpu_of_every_process_of_make_and_shell_loops() {
    let dir = scratch("trees");
    let lp = "i=0; while [ $$i -lt 60000 ]; do i=$$((i+1)); done";
    std::fs::write(
        dir.join("Makefile"),
        format!("all: a b\na:\n\t@{lp}\nb:\n\t@( {lp} ); ( {lp} )\n"),
    )
    .unwrap();
    let shell = "for i in 1 2 3; do ( i=0; while [ $i -lt 40000 ]; do i=$((i+1)); done ); \
                 x=$(echo $i); /bin/true; done";
    for (output, command) in [
        ("m.pb.gz", &["make", "-j2", "-s"][..]),
        ("s.pb.gz", &["bash", "-c", shell][..]),
    ] {
        let mut args = vec!["--top", "0", "-o", output, "--"];
        args.extend(command);
        let (code, _, stderr) = record_in(&dir, &args);
        assert_eq!(code, Some(0), "{command:?} (Debian: make): {stderr}");
        let (pct, line) = accounting(&stderr);
        assert!(pct >= 98.0, "{command:?}: {line}");
        assert!(!stderr.contains("ran unprofiled"), "{command:?}: {stderr}");
        let outside = others_of(&dir, output)
            .iter()
            .filter(|p| comments_of(p).contains("sampled from outside the process"))
            .count();
        // make's recipe subshells (two), the loop's (three).
        let want = if output == "m.pb.gz" { 2 } else { 3 };
        assert!(
            outside >= want,
            "{command:?}: {outside} sampled from outside: {stderr}"
        );
    }
}

/// `record ... 2>&1 | head -1`: its report goes to a pipe nobody reads any more. The report
/// is lost, never the program's status (a panic on the write gave 101) or its profile.
#[test]
fn record_forwards_the_status_when_its_stderr_reader_has_gone() {
    library();
    let dir = scratch("stderr-gone");
    let mut child = Command::new(bin())
        .current_dir(&dir)
        .env("TICKSCOPE_LIB", library())
        .args(["record", "-o", "s.pb.gz", "--", "sh", "-c", "exit 3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes before record writes a line.
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(3), "{status:?}");
    assert!(dir.join("s.pb.gz").exists(), "no profile");
}

/// A script of short commands (each ends before its first sample): their CPU time is held
/// whole, the kernel's work as each one ended included (a tenth of each `/bin/true`'s, which
/// its own line, written before, cannot hold: the shell reaping it passes on what the kernel
/// gives it). Without that, 88-92% was held.
#[test]
fn the_cpu_time_of_short_commands_is_held_to_their_end() {
    let dir = scratch("short-commands");
    let script = "for i in $(seq 40); do /bin/true; done";
    let (code, _, stderr) = record_in(&dir, ["-o", "s.pb.gz", "--", "sh", "-c", script]);
    assert_eq!(code, Some(0), "{stderr}");
    let unsampled = said(&stderr, "ended before their first sample,");
    assert!(unsampled.contains("true (40)"), "{unsampled}");
    let (pct, line) = accounting(&stderr);
    assert!(pct >= 97.0, "{line}");
    // A shell whose sampler started (it lives past the start's delay, asleep) but took no
    // sample: its children's time, in what its parent reaps it with, is not held a second
    // time (a first version held 118 % of a run's; the preload test checks the line).
    let script = "sh -c 'sleep 0.2; for i in $(seq 40); do /bin/true; done'";
    let (code, _, stderr) = record_in(&dir, ["-o", "t.pb.gz", "--", "sh", "-c", script]);
    assert_eq!(code, Some(0), "{stderr}");
    let (pct, line) = accounting(&stderr);
    assert!((97.0..=100.0).contains(&pct), "{line}");
}

/// What a process's end takes after it wrote its profile (the kernel unmapping its memory:
/// a tenth of a run of a program that touches 128 MiB and computes 50 ms) is said, from the
/// figure its parent gets as it reaps it: for the program `record` runs, which `record`
/// reaps, and for one it exec'd, which a profiled shell reaps. With it, the run's CPU time
/// is accounted for; without, 85-90% of it was held and the rest unexplained.
#[test]
fn the_end_of_each_process_after_its_profile_is_said() {
    let dir = scratch("ends");
    build_c(
        &dir,
        "bigmem",
        // Small pages (a huge page is freed at once: the end took 0.5 ms in some runs). A
        // thread made first starts the sampler of a program the shell runs at once, not
        // a moment late on a thread that a loaded machine may leave waiting.
        "#include <pthread.h>\n#include <stdlib.h>\n#include <string.h>\n#include <sys/mman.h>\n\
         #include <time.h>\n\
         static void *nothing(void *a) { return a; }\n\
         int main(int argc, char **argv) {\n\
           pthread_t t; if (pthread_create(&t, 0, nothing, 0) == 0) pthread_join(t, 0);\n\
           size_t n = (size_t)atol(argv[1]) << 20;\n\
           char *p = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);\n\
           if (p == MAP_FAILED) return 2;\n\
           madvise(p, n, MADV_NOHUGEPAGE); memset(p, 1, n);\n\
           clock_t end = clock() + atol(argv[2]) * (CLOCKS_PER_SEC / 1000); volatile long x = 0;\n\
           while (clock() < end) x++;\n\
           return p[n / 2] == 1 ? 0 : 1;\n\
         }\n",
    );
    let ms = |v: &str| -> f64 {
        match v.trim().split_once(' ') {
            Some((n, "ms")) => n.parse().unwrap_or(f64::NAN),
            Some((n, "s")) => n.parse::<f64>().unwrap_or(f64::NAN) * 1e3,
            _ => f64::NAN,
        }
    };
    for (out, command) in [
        ("top.pb.gz", vec!["./bigmem", "128", "50"]),
        ("sh.pb.gz", vec!["sh", "-c", "./bigmem 128 50; true"]),
    ] {
        let mut args = vec!["-F", "1000", "-o", out, "--"];
        args.extend(command);
        let (code, _, stderr) = record_in(&dir, &args);
        assert_eq!(code, Some(0), "{stderr}");
        // It wrote a profile (it did not end before its first sample).
        assert!(!stderr.contains("bigmem (1)"), "{stderr}");
        let (_, line) = accounting(&stderr);
        let held = line
            .split_once("hold ")
            .and_then(|(_, r)| r.split(" of the ").next())
            .map_or(f64::NAN, ms);
        let tree = line
            .split_once(" of the ")
            .and_then(|(_, r)| r.split(" of CPU time").next())
            .map_or(f64::NAN, ms);
        let ends = line
            .split_once("%; ")
            .and_then(|(_, r)| {
                r.split(" more was the ends of the processes that wrote them")
                    .next()
            })
            .map_or(0.0, ms);
        // The program `record` runs, sampled from outside: its end is in its profile (its
        // CPU clock read as a zombie): the exit row, or the not-sampled one where a poll
        // came in its last moments.
        let top = top_ms(&dir.join(out), &[]);
        let exit = crate::record::ms(&top, "[kernel mode: process exit]", 0)
            + crate::record::ms(&top, "ended before discovery, last partial periods]", 0);
        match (out, top.contains("sampled from outside the process")) {
            ("top.pb.gz", true) => {
                assert!(exit >= 1.0, "{out}: {top}");
                assert!(held >= 0.97 * tree, "{out}: {line}");
            }
            // Sampled by the library only where perf events are not permitted.
            ("top.pb.gz", false) => {
                assert!(!top.contains("source perf_event"), "{top}");
                assert!(ends >= 1.0, "{out}: {line}");
            }
            _ => assert!(ends >= 1.0, "{out}: {line}"),
        }
        assert!(held + ends >= 0.97 * tree, "{out}: {line}");
        assert!(held + ends <= 1.005 * tree + 0.1, "{out}: {line}");
    }
}

/// The line of `stderr` that holds `what`; the test fails, showing `stderr`, if none does.
fn said<'a>(stderr: &'a str, what: &str) -> &'a str {
    stderr
        .lines()
        .find(|l| l.contains(what))
        .unwrap_or_else(|| panic!("not said ({what:?}): {stderr}"))
}

/// `record`'s accounting line in `stderr` ("the profiles hold H s of the T s of CPU time
/// the run's processes used (P%) ..."): P and the line.
fn accounting(stderr: &str) -> (f64, &str) {
    let line = said(stderr, "of CPU time the run's processes used");
    let pct = line
        .split_once("used (")
        .and_then(|(_, r)| r.split('%').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    (pct, line)
}

/// Runs `compiler ARGS` in `dir`; the compiler's messages fail the test.
fn compile(dir: &Path, compiler: &str, args: &[&str]) {
    let cc = Command::new(compiler)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{compiler}: {e} (Debian: gcc, g++)"));
    assert!(
        cc.status.success(),
        "{compiler} {args:?}: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
}

/// Builds C program `name` from `source` in `dir` (`-O1 -g -fno-omit-frame-pointer
/// -pthread`).
fn build_c(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = format!("{name}.c");
    std::fs::write(dir.join(&src), source).unwrap();
    compile(
        dir,
        "cc",
        &[
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-pthread",
            "-o",
            name,
            &src,
        ],
    );
    dir.join(name)
}

/// `tickscope record ARGS` in `dir`: its exit status, stdout (the program's) and stderr.
fn record_in<S: AsRef<std::ffi::OsStr>>(
    dir: &Path,
    args: impl IntoIterator<Item = S>,
) -> (Option<i32>, String, String) {
    record_with(dir, &[], args)
}

/// [`record_in`] with more environment variables (the program inherits them).
fn record_with<S: AsRef<std::ffi::OsStr>>(
    dir: &Path,
    env: &[(&str, &str)],
    args: impl IntoIterator<Item = S>,
) -> (Option<i32>, String, String) {
    let out = Command::new(bin())
        .current_dir(dir)
        .env("TICKSCOPE_LIB", library())
        .envs(env.iter().copied())
        .arg("record")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `tickscope top --unit=ms --nodecount=60 ARGS FILE`'s text.
fn top_ms(file: &Path, args: &[&str]) -> String {
    let top = Command::new(bin())
        .args(["top", "--unit=ms", "--nodecount=60"])
        .args(args)
        .arg(file)
        .output()
        .unwrap();
    String::from_utf8_lossy(&top.stdout).into_owned()
}

/// The flat (`column` 0) or cum (3) milliseconds of row `name` of a `top_ms` table; 0 if
/// it is not there.
fn ms(top: &str, name: &str, column: usize) -> f64 {
    top.lines()
        .find(|l| l.trim_end().ends_with(name))
        .and_then(|l| l.split_whitespace().nth(column))
        .and_then(|v| v.trim_end_matches("ms").parse().ok())
        .unwrap_or(0.0)
}

/// The number after `key` in a program's output (`user_ms 275`).
fn printed(stdout: &str, key: &str) -> f64 {
    stdout
        .split_whitespace()
        .skip_while(|w| *w != key)
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} in {stdout}"))
}

/// dash ends by `_exit`, and so does Python's `os._exit`: neither runs the exit hooks, yet
/// each leaves its profile (written by the library's writer thread before `_exit` goes on),
/// and its exit status is forwarded exactly.
#[test]
fn programs_ending_by_exit_underscore_leave_their_profile_and_status() {
    let dir = scratch("underscore");
    for (i, (script, code)) in [("true", 0), ("exit 3", 3)].into_iter().enumerate() {
        let name = format!("d{i}.pb.gz");
        let (got, _, stderr) = record_in(&dir, ["-o", &name, "--", "dash", "-c", script]);
        assert_eq!(got, Some(code), "{script}: {stderr}");
        assert!(!stderr.contains("wrote no profile"), "{stderr}");
        assert!(stderr.contains("File: dash"), "the program named: {stderr}");
        assert!(top_ms(&dir.join(&name), &[]).contains("Type: cpu"));
    }
    // A C program that calls _exit after its work: the work is in the profile.
    let exe = build_c(
        &dir,
        "quick_exit",
        "#include <unistd.h>\n\
         __attribute__((noinline)) static double spin(void) { double x = 0; \
         for (long i = 0; i < 300000000L; i++) x += i * 1e-9; return x; }\n\
         int main(void) { volatile double v = spin(); (void)v; _exit(7); }\n",
    );
    let (code, _, stderr) = record_in(&dir, ["-o", "q.pb.gz", "--", exe.to_str().unwrap()]);
    assert_eq!(code, Some(7), "{stderr}");
    assert!(stderr.contains("spin"), "{stderr}");
}

/// A stripped program whose debug info was put in a separate file (`objcopy
/// --only-keep-debug`, `.gnu_debuglink`, as distributions ship them): its static functions
/// are named, with source lines, from that file.
#[test]
fn a_stripped_programs_functions_are_named_from_its_debug_file() {
    let dir = scratch("debuglink");
    let exe = build_c(
        &dir,
        "hidden",
        "static __attribute__((noinline)) double hidden_spin(long n) { double x = 0; \
         for (long i = 0; i < n; i++) x += i * 1e-9; return x; }\n\
         int main(void) { volatile double v = hidden_spin(400000000L); (void)v; return 0; }\n",
    );
    let run = |cmd: &mut Command| {
        let out = cmd.output().expect("binutils (Debian: binutils)");
        assert!(
            out.status.success(),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&exe)
        .arg(dir.join("hidden.debug")));
    run(Command::new("strip").arg("--strip-all").arg(&exe));
    run(Command::new("objcopy")
        .arg("--add-gnu-debuglink=hidden.debug")
        .arg(&exe)
        .current_dir(&dir));
    let nm = Command::new("nm").arg(&exe).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&nm.stdout).contains("hidden_spin"),
        "the program is stripped"
    );
    let (code, _, stderr) = record_in(&dir, ["-o", "h.pb.gz", "--", exe.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("hidden_spin"), "{stderr}");
    // With its source line, from the debug file's DWARF.
    let lines = top_ms(&dir.join("h.pb.gz"), &["--lines"]);
    assert!(
        lines
            .lines()
            .any(|l| l.contains("hidden_spin ") && l.contains("hidden.c:1")),
        "{lines}"
    );
}

/// Time in system calls: with the perf source (which samples user mode only) it is each
/// thread's `[kernel mode]` row, near the program's own system time, and never spread over
/// its user functions; the user spin keeps its user time.
#[test]
fn kernel_time_is_its_own_row_not_spread_over_user_code() {
    let dir = scratch("kernel");
    let exe = build_c(
        &dir,
        "sys",
        "#include <fcntl.h>\n#include <stdio.h>\n#include <unistd.h>\n#include <sys/resource.h>\n\
         static char buf[1 << 16];\n\
         __attribute__((noinline)) static double user_spin(long n) { double x = 0; \
         for (long i = 0; i < n; i++) x += i * 1e-9; return x; }\n\
         __attribute__((noinline)) static long kernel_reads(int fd, int n) { long t = 0; \
         for (int i = 0; i < n; i++) t += read(fd, buf, sizeof buf); return t; }\n\
         int main(void) { int fd = open(\"/dev/zero\", O_RDONLY); \
         volatile double v = user_spin(300000000L); volatile long r = kernel_reads(fd, 60000); \
         (void)v; (void)r; struct rusage u; getrusage(RUSAGE_SELF, &u); \
         printf(\"user_ms %ld sys_ms %ld\\n\", u.ru_utime.tv_sec * 1000 + u.ru_utime.tv_usec / 1000, \
         u.ru_stime.tv_sec * 1000 + u.ru_stime.tv_usec / 1000); return 0; }\n",
    );
    let (code, stdout, stderr) = record_in(
        &dir,
        ["-F", "1000", "-o", "k.pb.gz", "--", exe.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let (user_ms, sys_ms) = (printed(&stdout, "user_ms"), printed(&stdout, "sys_ms"));
    let top = top_ms(&dir.join("k.pb.gz"), &[]);
    if !top.contains("source perf_event") {
        // The CPU timer's signals arrive as the system call returns: its time is at the
        // call site, in user code, as the kernel reports it.
        return;
    }
    let kernel = ms(&top, "[kernel mode]", 0);
    // The kernel's own split is sampled at its ticks: tolerances of a few ticks and 25%.
    assert!(
        (kernel - sys_ms).abs() <= 0.25 * sys_ms + 40.0,
        "[kernel mode] {kernel} ms against the program's system time {sys_ms} ms:\n{top}"
    );
    let spin = ms(&top, "user_spin", 0);
    assert!(
        spin <= user_ms + 40.0 && spin >= 0.6 * user_ms - 40.0,
        "user_spin {spin} ms against the program's user time {user_ms} ms:\n{top}"
    );
    // The reading loop's user part is small: its system calls are not put on it.
    assert!(ms(&top, "kernel_reads", 0) < 0.25 * sys_ms + 20.0, "{top}");
}

/// Threads that block every signal (as xz's workers do, inheriting the mask from the thread
/// that created them, or blocking it themselves once running) are sampled all the same,
/// through a perf ring: their functions hold their CPU time, not `[not sampled: ...]`.
#[test]
fn threads_that_block_signals_are_sampled() {
    let dir = scratch("blocked");
    let exe = build_c(
        &dir,
        "blocked",
        "#include <pthread.h>\n#include <signal.h>\n#include <stdio.h>\n#include <time.h>\n\
         #define SPIN(name) __attribute__((noinline)) static double name(long n) { double x = 0; \
         for (long i = 0; i < n; i++) x += i * 1e-9; return x; }\n\
         SPIN(inherited_mask)\nSPIN(blocks_itself)\n\
         static long cpu_ms(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); \
         return t.tv_sec * 1000 + t.tv_nsec / 1000000; }\n\
         static void *first(void *a) { volatile double v = inherited_mask(250000000L); \
         (void)v; printf(\"inherited_ms %ld\\n\", cpu_ms()); return a; }\n\
         static void *second(void *a) { sigset_t all; sigfillset(&all); \
         pthread_sigmask(SIG_BLOCK, &all, 0); volatile double v = blocks_itself(250000000L); (void)v; \
         printf(\"itself_ms %ld\\n\", cpu_ms()); return a; }\n\
         int main(void) { sigset_t all, old; pthread_t a, b; sigfillset(&all); \
         pthread_sigmask(SIG_BLOCK, &all, &old); pthread_create(&a, 0, first, 0); \
         pthread_sigmask(SIG_SETMASK, &old, 0); pthread_create(&b, 0, second, 0); \
         pthread_join(a, 0); pthread_join(b, 0); fflush(stdout); return 0; }\n",
    );
    // Walked by the unwind tables (record's default) and, through a call-chain ring, by
    // frame pointers.
    for unwind in ["tables", "fp"] {
        let out = format!("b-{unwind}.pb.gz");
        let (code, stdout, stderr) = record_with(
            &dir,
            &[("TICKSCOPE_CPUPROFILE_UNWIND", unwind)],
            ["-F", "1000", "-o", &out, "--", exe.to_str().unwrap()],
        );
        assert_eq!(code, Some(0), "{stderr}");
        let top = top_ms(&dir.join(&out), &["--tagignore=thread=^tickscope-"]);
        if !top.contains("source perf_event") {
            // Without perf events there is no ring: the CPU time is counted as not sampled.
            assert!(top.contains("[not sampled: no signal arrived]"), "{top}");
            return;
        }
        let said = match unwind {
            "tables" => "stacks are walked by the unwind tables",
            _ => "blocked the sampling signal",
        };
        assert!(top.contains(said), "{unwind}: {top}");
        for (func, key) in [
            ("inherited_mask", "inherited_ms"),
            ("blocks_itself", "itself_ms"),
        ] {
            let (got, cpu) = (ms(&top, func, 3), printed(&stdout, key));
            // With frame pointers, the thread that blocks itself runs up to one reading
            // (100 ms) on its first event before the ring takes over; the inherited mask is
            // on a ring from the start.
            assert!(
                got >= 0.6 * cpu - 30.0 && got <= cpu + 30.0,
                "{unwind}, {func}: {got} ms of its thread's {cpu} ms:\n{top}"
            );
        }
    }
}

/// The rows of `tickscope tree --unit=ms`: (depth, function, cum ms), in order.
fn tree_rows(file: &Path) -> Vec<(usize, String, f64)> {
    let out = Command::new(bin())
        .args([
            "tree",
            "--unit=ms",
            "--nodefraction=0",
            "--tagignore=thread=^tickscope-",
        ])
        .arg(file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("cum") && l.trim_end().ends_with("name"))
        .unwrap_or_else(|| panic!("no tree header:\n{text}"));
    let at = header.rfind("name").unwrap();
    text.lines()
        .skip_while(|l| *l != header)
        .skip(1)
        .filter(|l| l.len() > at)
        .filter_map(|l| {
            let name = &l[at..];
            let depth = (name.len() - name.trim_start().len()) / 2;
            let cum = l
                .split_whitespace()
                .next()?
                .trim_end_matches("ms")
                .parse()
                .ok()?;
            Some((depth, name.trim().to_string(), cum))
        })
        .collect()
}

/// Milliseconds the tree holds on paths that pass through `chain` (function names, each
/// matched as a prefix: C++ names carry their parameters) caller first, consecutively, and
/// end at its last element.
fn chain_ms(rows: &[(usize, String, f64)], chain: &[&str]) -> f64 {
    let mut path: Vec<&str> = Vec::new();
    let mut total = 0.0;
    for (depth, name, cum) in rows {
        path.truncate(*depth);
        path.push(name);
        let n = chain.len();
        if path.len() >= n
            && path[path.len() - n..]
                .iter()
                .zip(chain)
                .all(|(got, want)| got.starts_with(want))
        {
            total += cum;
        }
    }
    total
}

/// Records `program` at 1000 Hz into `out` (in `dir`). Where its stacks were walked by the
/// unwind tables, ≥ 95 % of the time of `chain`'s last function must be under the whole
/// chain, caller first; where perf events are not permitted, the profile must say why the
/// tables were not used.
fn assert_callers_in_order(dir: &Path, program: &str, out: &str, chain: &[&str]) {
    let (code, _, stderr) = record_in(dir, ["-F", "1000", "-o", out, "--", program]);
    assert_eq!(code, Some(0), "{stderr}");
    let out = dir.join(out);
    let top = top_ms(&out, &[]);
    if !top.contains("stacks are walked by the unwind tables") {
        assert!(
            top.contains("unwind tables were asked for, but"),
            "the profile says how its stacks were walked:\n{top}"
        );
        return;
    }
    let rows = tree_rows(&out);
    let leaf = chain.last().unwrap();
    let whole = chain_ms(&rows, &[leaf]);
    let under_main = chain_ms(&rows, chain);
    // At 1000 Hz over ~0.3 s: a few hundred samples, every one of them walked whole.
    assert!(whole > 100.0, "{leaf} holds {whole} ms: {rows:?}");
    assert!(
        under_main >= 0.95 * whole,
        "{chain:?} holds {under_main} of {leaf}'s {whole} ms: {rows:?}"
    );
}

/// C and C++ built `-O2 -fomit-frame-pointer`, as distributions build them: every caller
/// of the hot function is on its stacks, in order, up to `main`, found by the unwind tables.
#[test]
fn code_without_frame_pointers_has_every_caller_in_order() {
    let dir = scratch("no-fp");
    let sources = [
        (
            "cc",
            "chain.c",
            "#include <stdio.h>\n#include <stdlib.h>\nvolatile unsigned long sink;\n\
             __attribute__((noinline)) void leaf_work(unsigned long n) { unsigned long x = sink; \
             for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + i; sink = x; }\n\
             __attribute__((noinline)) void level3(unsigned long n) { volatile char pad[256]; \
             pad[n & 255] = 1; leaf_work(n); sink += pad[n & 255]; }\n\
             __attribute__((noinline)) void level2(unsigned long n) { level3(n); sink++; }\n\
             __attribute__((noinline)) void level1(unsigned long n) { level2(n); sink++; }\n\
             int main(int argc, char **argv) { level1(250000000UL + argc); \
             printf(\"%lu\\n\", sink & 1); return 0; }\n",
            &["main", "level1", "level2", "level3", "leaf_work"][..],
        ),
        (
            "c++",
            "shapes.cpp",
            "#include <cstdio>\n\
             struct Shape { virtual ~Shape() {} virtual unsigned long area(unsigned long n) const = 0; };\n\
             struct Square : Shape { unsigned long area(unsigned long n) const override; };\n\
             __attribute__((noinline)) unsigned long Square::area(unsigned long n) const { \
             unsigned long x = 1; for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + i; \
             return x; }\n\
             namespace geo { __attribute__((noinline)) unsigned long measure(const Shape &s, unsigned long n) \
             { return s.area(n) + 1; } }\n\
             int main(int argc, char **) { Square sq; unsigned long r = geo::measure(sq, 250000000UL + argc); \
             std::printf(\"%lu\\n\", r & 1); return 0; }\n",
            &["main", "geo::measure", "Square::area"][..],
        ),
    ];
    for (compiler, src, source, chain) in sources {
        std::fs::write(dir.join(src), source).unwrap();
        let exe = src.split('.').next().unwrap();
        compile(
            &dir,
            compiler,
            &["-O2", "-g", "-fomit-frame-pointer", "-o", exe, src],
        );
        assert_callers_in_order(&dir, &format!("./{exe}"), &format!("{exe}.pb.gz"), chain);
    }
}

/// A library loaded by `dlopen` after the sampler started, built without frame pointers:
/// its unwind tables are found when a sample first lands in it, and its callers, in the
/// program, are on its stacks.
#[test]
fn a_dlopened_library_is_walked_by_its_own_tables() {
    let dir = scratch("dlopen");
    std::fs::write(
        dir.join("plugin.c"),
        "volatile unsigned long plugin_sink;\n\
         __attribute__((noinline)) void plugin_spin(unsigned long n) { unsigned long x = plugin_sink; \
         for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + i; plugin_sink = x; }\n\
         __attribute__((noinline)) unsigned long plugin_entry(unsigned long n) { plugin_spin(n); \
         return plugin_sink + 1; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("host.c"),
        "#include <dlfcn.h>\n#include <stdio.h>\n\
         __attribute__((noinline)) unsigned long run_plugin(unsigned long (*f)(unsigned long), \
         unsigned long n) { unsigned long r = f(n); return r + 1; }\n\
         int main(int argc, char **argv) { void *h = dlopen(\"./libplugin.so\", RTLD_NOW); \
         if (!h) { fprintf(stderr, \"%s\\n\", dlerror()); return 1; } \
         unsigned long (*f)(unsigned long) = (unsigned long (*)(unsigned long))dlsym(h, \"plugin_entry\"); \
         printf(\"%lu\\n\", run_plugin(f, 250000000UL + argc) & 1); return 0; }\n",
    )
    .unwrap();
    let flags = ["-O2", "-g", "-fomit-frame-pointer"];
    compile(
        &dir,
        "cc",
        &[
            &flags[..],
            &["-shared", "-fPIC", "-o", "libplugin.so", "plugin.c"],
        ]
        .concat(),
    );
    compile(
        &dir,
        "cc",
        &[&flags[..], &["-o", "host", "host.c", "-ldl"]].concat(),
    );
    assert_callers_in_order(
        &dir,
        "./host",
        "d.pb.gz",
        &["main", "run_plugin", "plugin_entry", "plugin_spin"],
    );
}

/// An interactive shell on a terminal of its own (a pseudo-terminal): what it prints is
/// read as it comes, with a deadline for each thing waited for.
struct Terminal {
    master: std::fs::File,
    shell: std::process::Child,
    seen: String,
}

impl Terminal {
    fn bash(dir: &Path) -> Terminal {
        use std::os::unix::io::FromRawFd;
        use std::os::unix::process::CommandExt;
        let (mut master, mut slave) = (-1, -1);
        // SAFETY: openpty writes two descriptors; the name, termios and size are optional.
        let r = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        assert_eq!(r, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened and are owned here alone.
        let master = unsafe { std::fs::File::from_raw_fd(master) };
        // SAFETY: as above.
        let slave = unsafe { std::fs::File::from_raw_fd(slave) };
        let mut command = Command::new("bash");
        command
            .args(["--norc", "--noprofile", "-i"])
            .current_dir(dir)
            .env("PS1", "PROMPT> ")
            .env("TICKSCOPE_LIB", library())
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave);
        // Between fork and exec: a new session, whose controlling terminal is the
        // pseudo-terminal on descriptor 0, and the job control signals at their defaults, as
        // a login shell has them (a test run under `timeout` inherits SIGTTIN and SIGTTOU
        // ignored, and the shell passes that on to its jobs).
        let session = || {
            // SAFETY: setsid has no arguments; async-signal-safe.
            if unsafe { libc::setsid() } == -1 {
                return Err(std::io::Error::last_os_error());
            }
            // SAFETY: TIOCSCTTY takes an int argument; descriptor 0 is the terminal.
            if unsafe { libc::ioctl(0, libc::TIOCSCTTY, 0) } == -1 {
                return Err(std::io::Error::last_os_error());
            }
            for sig in [libc::SIGTTIN, libc::SIGTTOU, libc::SIGTSTP] {
                // SAFETY: resetting a signal to its default action; async-signal-safe.
                unsafe { libc::signal(sig, libc::SIG_DFL) };
            }
            Ok(())
        };
        // SAFETY: `session` makes only async-signal-safe calls and allocates nothing.
        unsafe { command.pre_exec(session) };
        let shell = command.spawn().expect("bash, for the job control test");
        Terminal {
            master,
            shell,
            seen: String::new(),
        }
    }

    fn send(&mut self, keys: &str) {
        use std::io::Write;
        self.master.write_all(keys.as_bytes()).unwrap();
    }

    /// Reads until `what` appears in what the terminal shows after byte `from` of it;
    /// returns where it ends. Fails after 60 s.
    fn wait_for(&mut self, what: &str, from: usize) -> usize {
        use std::io::Read;
        use std::os::unix::io::AsRawFd;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(at) = self.seen[from..].find(what) {
                return from + at + what.len();
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(
                !left.is_zero(),
                "{what:?} never appeared on the terminal:\n{}",
                self.seen
            );
            let mut p = libc::pollfd {
                fd: self.master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: polls one valid pollfd on the stack.
            if unsafe { libc::poll(&mut p, 1, left.as_millis().min(500) as i32) } == 1 {
                let mut buf = [0u8; 4096];
                match self.master.read(&mut buf) {
                    Ok(n) if n > 0 => self.seen.push_str(&String::from_utf8_lossy(&buf[..n])),
                    _ => panic!("the terminal closed:\n{}", self.seen),
                }
            }
        }
    }
}

impl Terminal {
    /// Waits (at most 60 s) until process group `group` is the terminal's foreground group.
    fn wait_until_foreground(&self, group: i32) {
        self.wait_for_foreground(|g| g == group, &format!("group {group}"));
    }

    /// Waits (at most 60 s) until `record`, started as job `job`, has lent the terminal to
    /// its program's group: a group that is neither the shell's nor the job's.
    fn wait_until_lent(&self, job: i32) {
        let shell = self.shell.id() as i32;
        self.wait_for_foreground(
            |g| g > 0 && g != shell && g != job,
            &format!("the program of job {job}"),
        );
    }

    fn wait_for_foreground(&self, wanted: impl Fn(i32) -> bool, what: &str) {
        use std::os::unix::io::AsRawFd;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        // SAFETY: tcgetpgrp takes a descriptor only (a pseudo-terminal's master answers
        // for its terminal).
        while !wanted(unsafe { libc::tcgetpgrp(self.master.as_raw_fd()) }) {
            assert!(
                std::time::Instant::now() < deadline,
                "{what} never had the terminal:\n{}",
                self.seen
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The pid the shell gives for the job just started in the background (`[1] 1234`),
    /// the job's process group; and where that line ends.
    fn job_started(&mut self, from: usize) -> (i32, usize) {
        let at = self.wait_for("] ", from);
        let end = self.wait_for("\r", at);
        (self.seen[at..end - 1].trim().parse().unwrap(), end)
    }
}

impl Drop for Terminal {
    /// Ends every process of the shell's session (its session id is its pid): a job left
    /// stopped or waiting by a failed test would outlive the shell.
    fn drop(&mut self) {
        let session = self.shell.id().to_string();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            // pid (comm) state ppid pgrp session ...
            let fields: Vec<&str> = stat
                .rsplit_once(')')
                .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
            if fields.get(3) == Some(&session.as_str()) {
                if let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() {
                    // SAFETY: kill has no memory arguments.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        let _ = self.shell.wait();
    }
}

/// `record … &` in an interactive shell, then `fg`: `record` and its program are one job.
/// The program, in a process group of its own (`record` is not in the foreground as it
/// starts), is stopped by the terminal when it reads from the background, and `record`
/// with it (the shell says `Stopped`); `fg` gives the program the terminal; Ctrl-Z stops
/// both and gives the shell its prompt back; `fg` again, and the program ends as it
/// should, its profile written (six times stopped and continued); as when `fg` comes
/// before the program reads. Before,
/// `record` did not stop: the job stayed `Running`
/// and, after `fg`, the program never got the terminal, and both waited for ever.
#[test]
fn record_in_the_background_of_a_shell_is_one_job_with_its_program() {
    let dir = scratch("job");
    let mut tty = Terminal::bash(&dir);
    let at = tty.wait_for("PROMPT> ", 0);
    tty.send(&format!(
        "{} record --top 0 -o p.pb.gz -- sh -c 'read x; echo got $x; read y; echo got $y' &\n",
        bin()
    ));
    let (job, at) = tty.job_started(at);
    let mut at = tty.wait_for("PROMPT> ", at);
    // The shell says what became of its jobs as it prompts, or when asked.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        tty.send("jobs\n");
        let next = tty.wait_for("PROMPT> ", at);
        let said = tty.seen[at..next].to_string();
        at = next;
        if said.contains("Stopped") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            std::time::Instant::now() < deadline,
            "record never stopped with its program:\n{}",
            tty.seen
        );
    }
    tty.send("fg\n");
    let at = tty.wait_for("read y", at);
    tty.send("abc\n");
    let at = tty.wait_for("got abc", at);
    // Stopped and continued again and again. (A continue the kernel handed to another of
    // `record`'s threads than the waiting one was missed, and the job hung after `fg`: 2
    // of 6 runs by hand with python3; this loop did not make that happen here.)
    let mut at = at;
    for _ in 0..6 {
        // Ctrl-Z once the program has the terminal (before `fg` has given it to `record`, the
        // shell would take it).
        tty.wait_until_lent(job);
        tty.send("\x1a");
        at = tty.wait_for("Stopped", at);
        at = tty.wait_for("PROMPT> ", at);
        tty.send("fg\n");
        at = tty.wait_for("read y", at);
    }
    tty.send("def\n");
    let at = tty.wait_for("got def", at);
    let at = tty.wait_for("profile written to p.pb.gz", at);
    tty.send("echo status=$?\n");
    let at = tty.wait_for("status=0", at);
    assert!(dir.join("p.pb.gz").exists());
    // `fg` before the program reads: `record` has the terminal, and hands it over when the
    // program is stopped for reading it.
    tty.send(&format!(
        "{} record --top 0 -o q.pb.gz -- sh -c 'until [ -e go ]; do sleep 0.05; done; read z; echo got $z' &\n",
        bin()
    ));
    let (job, at) = tty.job_started(at);
    let at = tty.wait_for("PROMPT> ", at);
    tty.send("fg\n");
    let at = tty.wait_for("read z", at);
    tty.wait_until_foreground(job);
    std::fs::write(dir.join("go"), "").unwrap();
    tty.send("ghi\n");
    let at = tty.wait_for("got ghi", at);
    let at = tty.wait_for("profile written to q.pb.gz", at);
    tty.send("echo status=$?\n");
    tty.wait_for("status=0", at);
}

/// The CPU time (ms) a `top_ms` table's header gives as its total (`Total samples = X`).
fn total_ms(top: &str) -> f64 {
    let v = top
        .split_once("Total samples = ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no total:\n{top}"));
    match (
        v.strip_suffix("ms"),
        v.strip_suffix("us"),
        v.strip_suffix('s'),
    ) {
        (Some(ms), ..) => ms.parse().unwrap(),
        (_, Some(us), _) => us.parse::<f64>().unwrap() / 1e3,
        (_, _, Some(s)) => s.parse::<f64>().unwrap() * 1e3,
        _ => panic!("total {v}"),
    }
}

/// The program `record` runs is sampled from outside it (CPU time, where perf events are
/// permitted): no thread of tickscope's runs in it (a shell that forks for every command
/// pays for any thread at each fork), yet its profile has every caller up to `main`, and
/// a program it execs still samples itself into a file of its own.
#[test]
fn the_program_record_runs_has_no_thread_of_tickscopes() {
    let dir = scratch("outside");
    let exe = build_c(
        &dir,
        "threads",
        "#include <dirent.h>\n#include <stdio.h>\n\
         static int threads(void) { int n = 0; DIR *d = opendir(\"/proc/self/task\"); \
         struct dirent *e; while ((e = readdir(d))) n += e->d_name[0] != '.'; closedir(d); \
         return n; }\n\
         volatile unsigned long sink;\n\
         __attribute__((noinline)) void spin(unsigned long n) { unsigned long x = sink; \
         for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + i; sink = x; }\n\
         int main(void) { int before = threads(); spin(200000000UL); \
         printf(\"threads %d %d\\n\", before, threads()); return 0; }\n",
    );
    let (code, stdout, stderr) = record_in(
        &dir,
        ["-F", "1000", "-o", "t.pb.gz", "--", exe.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let top = top_ms(&dir.join("t.pb.gz"), &[]);
    if !top.contains("sampled from outside the process") {
        // No perf events here: the library samples the program, with a thread of its own
        // (where the library's own source is perf, `record` should have sampled from outside).
        assert!(!top.contains("source perf_event"), "{top}");
        assert!(stdout.contains("threads 2 2"), "{stdout}\n{top}");
        return;
    }
    assert_eq!(stdout.trim(), "threads 1 1", "{top}");
    assert!(ms(&top, "spin", 0) > 100.0, "{top}");
    let rows = tree_rows(&dir.join("t.pb.gz"));
    assert!(
        chain_ms(&rows, &["main", "spin"]) >= 0.95 * chain_ms(&rows, &["spin"]),
        "{rows:?}"
    );
    // Exec'd by a shell that `record` samples from outside: the program samples itself (a
    // thread of the library's beside its own: the deferred start's, or the drain thread)
    // into the run's file of its own.
    let (code, stdout, stderr) = record_in(
        &dir,
        [
            "-F",
            "1000",
            "-o",
            "s.pb.gz",
            "--",
            "sh",
            "-c",
            &format!("{}; true", exe.display()),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
    let counts: Vec<u32> = stdout
        .split_whitespace()
        .skip(1)
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(
        counts.len() == 2 && counts.iter().all(|&n| n >= 2),
        "{stdout}"
    );
    let child = said(&stderr, "a program it exec'd: ");
    assert!(child.contains("s.pb.gz."), "{stderr}");
}

/// `record --pid`: a process already running, never preloaded, built `-O2
/// -fomit-frame-pointer`, is sampled from outside until it ends: its callers up to `main`
/// in order, a thread it starts later (found by polling), and the profile's total is the
/// CPU time it used while sampled. A process that does not exist is one line and status 2.
#[test]
fn a_running_process_is_sampled_from_outside_until_it_ends() {
    use std::io::{BufRead, Write};
    let dir = scratch("pid");
    std::fs::write(
        dir.join("attach.c"),
        "#include <pthread.h>\n#include <stdio.h>\n#include <time.h>\n\
         volatile unsigned long sink;\n\
         static double cpu_ms(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); \
         return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }\n\
         __attribute__((noinline)) void leaf_work(unsigned long n) { unsigned long x = sink; \
         for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005UL + i; sink = x; }\n\
         __attribute__((noinline)) void level2(unsigned long n) { leaf_work(n); sink++; }\n\
         __attribute__((noinline)) void level1(unsigned long n) { level2(n); sink++; }\n\
         __attribute__((noinline)) void *helper_work(void *a) { leaf_work(150000000UL); return a; }\n\
         int main(void) { char line[16]; if (!fgets(line, sizeof line, stdin)) return 1; \
         double at = cpu_ms(); pthread_t t; pthread_create(&t, 0, helper_work, 0); \
         level1(300000000UL); pthread_join(t, 0); \
         printf(\"cpu_ms %.1f\\n\", cpu_ms() - at); return 0; }\n",
    )
    .unwrap();
    compile(
        &dir,
        "cc",
        &[
            "-O2",
            "-g",
            "-fomit-frame-pointer",
            "-pthread",
            "-o",
            "attach",
            "attach.c",
        ],
    );
    let mut program = Command::new(dir.join("attach"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut record = Command::new(bin())
        .current_dir(&dir)
        .args(["record", "-F", "1000", "-o", "a.pb.gz", "--pid"])
        .arg(program.id().to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The program starts its work once `record` says it is attached (a deadline, no sleep).
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = record.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("attached to process") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if rx.recv_timeout(std::time::Duration::from_secs(60)).is_err() {
        let _ = program.kill();
        let _ = record.wait();
        panic!("record did not attach: {}", reader.join().unwrap());
    }
    program.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = program.wait_with_output().unwrap();
    let status = record.wait().unwrap();
    let said = reader.join().unwrap();
    if said.contains("cannot sample it") {
        // perf events not permitted here (perf_event_paranoid 3, or a seccomp filter).
        assert_eq!(status.code(), Some(2), "{said}");
        return;
    }
    assert_eq!(status.code(), Some(0), "{said}");
    assert!(said.contains("the process ended"), "{said}");
    let cpu = printed(&String::from_utf8_lossy(&out.stdout), "cpu_ms");
    let file = dir.join("a.pb.gz");
    let top = top_ms(&file, &[]);
    assert!(top.contains("File: attach"), "{top}");
    // Its CPU time while sampled: the work (and what little ran between the attachment and
    // the work's start, and its end after main), counted by the events (whose task clock
    // and the process's CPU clock differ by what a hypervisor takes: ±2% here).
    let total = total_ms(&top);
    assert!(
        total >= 0.98 * cpu - 5.0 && total <= 1.05 * cpu + 20.0,
        "{total} ms against {cpu} ms:\n{top}"
    );
    let rows = tree_rows(&file);
    let leaf = chain_ms(&rows, &["leaf_work"]);
    let under_main = chain_ms(&rows, &["main", "level1", "level2", "leaf_work"]);
    let helper = chain_ms(&rows, &["helper_work", "leaf_work"]);
    assert!(under_main + helper >= 0.95 * leaf, "{rows:?}");
    // The helper thread did a third of the work: its share, within five standard errors
    // of ~600 samples (and its start before it was found, at most one 10 ms poll).
    assert!(
        helper > 0.2 * leaf && helper < 0.47 * leaf,
        "{helper} of {leaf} ms: {rows:?}"
    );

    // Ctrl-C (SIGINT to `record`) ends the sampling, not the process sampled; the profile is
    // written and `record` succeeds. And --duration ends it alone.
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    for (how, extra) in [("interrupted", None), ("the duration passed", Some("0.3"))] {
        let mut args = vec!["record", "-o", "c.pb.gz", "--pid"];
        let pid = sleeper.id().to_string();
        args.push(&pid);
        if let Some(d) = extra {
            args.extend(["--duration", d]);
        }
        let mut record = Command::new(bin())
            .current_dir(&dir)
            .args(&args)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(record.stderr.take().unwrap()).lines();
        let first = lines.next().and_then(Result::ok).unwrap_or_default();
        assert!(first.contains("attached to process"), "{first}");
        if extra.is_none() {
            // SAFETY: kill has no memory arguments; `record` is this test's child.
            unsafe { libc::kill(record.id() as libc::pid_t, libc::SIGINT) };
        }
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let status = record.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{rest:?}");
        assert!(rest.iter().any(|l| l.ends_with(how)), "{how}: {rest:?}");
        assert!(dir.join("c.pb.gz").exists());
        assert!(
            sleeper.try_wait().unwrap().is_none(),
            "the process sampled was harmed"
        );
    }
    let _ = sleeper.kill();
    let _ = sleeper.wait();

    let out = Command::new(bin())
        .current_dir(&dir)
        .args(["record", "-o", "b.pb.gz", "--pid", "999999999"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no such process"), "{stderr}");
    assert!(!dir.join("b.pb.gz").exists());
}
