//! The exit summary on every exit path, from real child processes (the `exit_paths` example,
//! which `cargo test` builds next to this test binary).

use std::path::PathBuf;
use std::process::{Command, Output};

/// `target/<profile>/examples/exit_paths`, next to `target/<profile>/deps/tests-…`.
fn example() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    dir.join("examples")
        .join(format!("exit_paths{}", std::env::consts::EXE_SUFFIX))
}

fn run(arg: &str, env: &[(&str, &str)]) -> (Output, String) {
    run_args(&[arg], env)
}

fn run_args(args: &[&str], env: &[(&str, &str)]) -> (Output, String) {
    let mut cmd = Command::new(example());
    cmd.args(args);
    for k in [
        "TICKSCOPE_INTERVAL",
        "TICKSCOPE_SUMMARY",
        "TICKSCOPE_PER_THREAD",
        "TICKSCOPE_ENABLED",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect(
        "run the exit_paths example: `cargo test` builds it (a lone `--test tests` does not)",
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

/// The row of `name` in a text summary, split into cells.
fn row<'a>(summary: &'a str, name: &str) -> Vec<&'a str> {
    let line = summary
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with("  "))
        .unwrap_or_else(|| panic!("no row {name:?} in:\n{summary}"));
    line[name.len()..]
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

fn assert_full_summary(stderr: &str) {
    assert!(stderr.contains("tickscope: "), "no summary:\n{stderr}");
    // fib(15) has 1973 calls; the recursion is one outermost call.
    assert_eq!(row(stderr, "fib")[1], "1973", "{stderr}");
    // The group: 10 get() calling put() each: 20 calls in one row, with the method's type.
    assert_eq!(row(stderr, "pool api [group]")[1], "20", "{stderr}");
    assert_eq!(row(stderr, "Pool::method")[1], "1", "{stderr}");
    // scope!() names itself after the enclosing function.
    assert_eq!(row(stderr, "work")[1], "1000", "{stderr}");
    assert_eq!(
        row(stderr, "short-lived thread")[1],
        "1",
        "exited thread kept: {stderr}"
    );
    assert!(stderr.contains("threads: 2 seen"), "{stderr}");
}

#[test]
fn summary_after_main_returns() {
    let (out, stderr) = run("return", &[]);
    assert!(out.status.success());
    assert_full_summary(&stderr);
    assert!(stderr.contains("nothing lost"), "{stderr}");
}

/// With the OS clock, every scope takes the general path (the common one reads the CPU
/// counter): the same summary.
#[test]
fn the_os_clock_gives_the_same_summary() {
    let (out, stderr) = run("return", &[("TICKSCOPE_CLOCK", "monotonic")]);
    assert!(out.status.success());
    assert_full_summary(&stderr);
    assert!(stderr.contains("clock: monotonic"), "{stderr}");
}

#[test]
fn wall_time_starts_at_exec_not_at_fork() {
    // `cargo run` execs the program after building it: the build must not count. Here a shell
    // forks, sleeps a second, then execs the example.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("sleep 1; exec {} return", example().display()))
        .env_remove("TICKSCOPE_SUMMARY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let header = stderr
        .lines()
        .find(|l| l.starts_with("tickscope: "))
        .expect(&stderr);
    let wall = header.split(", ").nth(1).expect(header);
    assert!(
        wall.ends_with(" ms wall time") || wall.ends_with(" µs wall time"),
        "under a second: {header}"
    );
}

#[test]
fn summary_after_process_exit() {
    let (out, stderr) = run("exit", &[]);
    assert_eq!(out.status.code(), Some(3));
    assert_full_summary(&stderr);
}

#[test]
fn summary_after_panic_in_main() {
    let (out, stderr) = run("panic", &[]);
    assert_eq!(out.status.code(), Some(101));
    assert!(stderr.contains("deliberate panic in main"));
    assert_full_summary(&stderr);
    let panic_at = stderr.find("deliberate panic").unwrap();
    assert!(
        stderr.find("tickscope: ").unwrap() > panic_at,
        "summary after the panic message"
    );
}

#[test]
fn scope_open_at_exit_is_reported_not_counted() {
    let (out, stderr) = run("open", &[]);
    assert!(out.status.success());
    assert_full_summary(&stderr);
    assert!(stderr.contains("1 scope"), "{stderr}");
    assert!(
        stderr.contains("not counted"),
        "the open scope is named as not counted:\n{stderr}"
    );
}

#[test]
fn summary_off_json_and_file_targets() {
    let (_, stderr) = run("return", &[("TICKSCOPE_SUMMARY", "off")]);
    assert!(!stderr.contains("tickscope"), "{stderr}");

    let (_, stderr) = run("return", &[("TICKSCOPE_SUMMARY", "json")]);
    let json = stderr
        .lines()
        .find(|l| l.starts_with("{\"tickscope\":1"))
        .expect(&stderr);
    assert!(
        json.contains("\"name\":\"fib\",\"kind\":\"scope\""),
        "{json}"
    );
    assert!(json.contains("\"calls\":1973,\"outer_calls\":1"), "{json}");

    let path = std::env::temp_dir().join(format!("tickscope-exit-{}.json", std::process::id()));
    let (_, stderr) = run(
        "exit",
        &[("TICKSCOPE_SUMMARY", &format!("json:{}", path.display()))],
    );
    assert!(!stderr.contains("tickscope"), "nothing on stderr: {stderr}");
    let file = std::fs::read_to_string(&path).unwrap();
    assert!(
        file.contains("\"name\":\"pool api\",\"kind\":\"group\""),
        "{file}"
    );
    let _ = std::fs::remove_file(path);
}

#[test]
fn report_on_demand_and_per_thread_breakdown() {
    let (_, stderr) = run("report", &[("TICKSCOPE_PER_THREAD", "1")]);
    assert_eq!(
        stderr.matches("tickscope: ").count(),
        2,
        "report() and the exit summary:\n{stderr}"
    );
    assert!(stderr.contains("thread TID 0x"), "{stderr}");
    assert!(
        stderr.contains("(exited)"),
        "the short-lived thread's own table: {stderr}"
    );
}

#[test]
fn interval_lines_have_the_api_profiler_format() {
    let (_, stderr) = run(
        "return",
        &[
            ("TICKSCOPE_INTERVAL", "100ms"),
            ("EXIT_PATHS_SLEEP_MS", "450"),
        ],
    );
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("TID 0x")).collect();
    assert!(lines.len() >= 3, "{stderr}");
    for l in &lines {
        // TID 0x13bc time spent in "alloc": 7/1001 ms 0.7% 6481x
        let rest = l.split_once(" time spent in \"").expect(l).1;
        let (_name, figures) = rest.split_once("\": ").expect(l);
        let parts: Vec<&str> = figures.split(' ').collect();
        assert_eq!(parts.len(), 4, "{l}");
        let (ms, interval) = parts[0].split_once('/').expect(l);
        ms.parse::<u64>().expect(l);
        let interval: u64 = interval.parse().expect(l);
        assert!((90..400).contains(&interval), "{l}");
        assert_eq!(parts[1], "ms");
        assert!(
            parts[2].ends_with('%') && parts[2][..parts[2].len() - 1].parse::<f64>().is_ok(),
            "{l}"
        );
        assert!(
            parts[3].ends_with('x') && parts[3][..parts[3].len() - 1].parse::<u64>().is_ok(),
            "{l}"
        );
    }
    assert!(lines.iter().any(|l| l.contains("\"work\"")), "{stderr}");
}

#[test]
fn an_interval_below_the_floor_is_raised_to_it_with_one_warning() {
    let (out, stderr) = run(
        "return",
        &[
            ("TICKSCOPE_INTERVAL", "1ns"),
            ("EXIT_PATHS_SLEEP_MS", "200"),
        ],
    );
    assert!(out.status.success());
    assert_eq!(
        stderr
            .matches("interval 1ns is shorter than 10ms: using 10ms")
            .count(),
        1,
        "{stderr}"
    );
    // Each line's interval (the reporter's measured sleep) is 10 ms at least.
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("TID 0x")).collect();
    assert!(!lines.is_empty(), "{stderr}");
    for l in &lines {
        let figures = l.split_once("\": ").expect(l).1;
        let interval: u64 = figures
            .split_once('/')
            .and_then(|(_, r)| r.split(' ').next()?.parse().ok())
            .expect(l);
        assert!(interval >= 10, "{l}");
    }
}

#[test]
fn malformed_variables_warn_once_and_keep_defaults() {
    let (out, stderr) = run(
        "return",
        &[
            ("TICKSCOPE_INTERVAL", "often"),
            ("TICKSCOPE_SUMMARY", "xml"),
        ],
    );
    assert!(out.status.success());
    assert_eq!(
        stderr
            .matches("TICKSCOPE_INTERVAL=\"often\" is not valid")
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr
            .matches("TICKSCOPE_SUMMARY=\"xml\" is not valid")
            .count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("TID 0x"), "interval stays off: {stderr}");
    assert_full_summary(&stderr); // the default summary
}

#[test]
fn a_forked_child_does_not_print_the_parents_summary() {
    let (out, stderr) = run("fork", &[]);
    assert!(out.status.success());
    assert_eq!(stderr.matches("tickscope: ").count(), 1, "{stderr}");
    assert_full_summary(&stderr);
}

/// Threads whose first scopes race the start of a `TICKSCOPE_CAPTURE` capture (the process's
/// first scopes: one of them starts it, the others wait for it) are all in it, the scope that
/// started it too: a begin and an end each, nothing lost (it was 0 to 340 of 1000).
#[test]
fn first_scopes_that_race_the_captures_start_are_all_in_it() {
    let dir = std::env::temp_dir().join(format!("tickscope-exit-race-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("race.tscap");
    let n = 200;
    let (out, stderr) = run_args(
        &["race", &n.to_string()],
        &[
            ("TICKSCOPE_CAPTURE", file.to_str().unwrap()),
            ("TICKSCOPE_SUMMARY", "off"),
        ],
    );
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let field = |k: &str| -> u64 {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
            .unwrap_or_else(|| panic!("no {k} in {stdout}"))
    };
    assert_eq!(field("events"), 2 * n, "{stdout}");
    assert_eq!(field("dropped") + field("lost_after_exit"), 0, "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_fork_child_of_a_capturing_process_stops_the_capture_and_says_so() {
    let dir = std::env::temp_dir().join(format!("tickscope-exit-fork-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("run.tscap");
    let (out, stderr) = run(
        "fork",
        &[
            ("TICKSCOPE_CAPTURE", file.to_str().unwrap()),
            ("TICKSCOPE_SUMMARY", "off"),
        ],
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .matches("is a fork child of the capturing process")
            .count(),
        1,
        "{stderr}"
    );
    // The parent's capture is whole and lost nothing; the file is its alone.
    assert!(!stderr.contains("events lost"), "{stderr}");
    let bytes = std::fs::read(&file).unwrap();
    assert!(bytes.len() > 16, "{} bytes", bytes.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn runtime_disabled_records_nothing() {
    let (_, stderr) = run("return", &[("TICKSCOPE_ENABLED", "0")]);
    assert!(stderr.contains("(no scope was entered)"), "{stderr}");
}

/// Builds the example with `default-features = false` (a separate target dir, so the outer
/// build lock is not needed) and checks that scopes left no trace: no summary, and the scope
/// names are not even in the binary.
#[test]
fn compiled_out_scopes_leave_no_trace() {
    let _heavy = crate::CPU_HEAVY.read().unwrap_or_else(|p| p.into_inner());
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = manifest.join("../../target/compiled-out");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--quiet",
            "-p",
            "tickscope",
            "--example",
            "exit_paths",
            "--no-default-features",
        ])
        .arg("--target-dir")
        .arg(&target)
        .current_dir(&manifest)
        .status()
        .unwrap();
    assert!(status.success());
    let exe = target.join("debug/examples/exit_paths");
    let out = Command::new(&exe).arg("return").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success());
    assert!(stdout.contains("compiled in: false"), "{stdout}");
    assert!(
        !stderr.contains("tickscope"),
        "no summary when compiled out: {stderr}"
    );
    let bytes = std::fs::read(&exe).unwrap();
    let has = |s: &str| bytes.windows(s.len()).any(|w| w == s.as_bytes());
    assert!(
        !has("exit-path-work"),
        "the scope's name is not in the compiled-out binary"
    );
    assert!(!has("pool api"), "nor the group's");
}

/// A setuid-root copy of `exe` in a fresh directory that uid 65534 can enter, and beside it a
/// root-only directory (mode 700) holding a root-owned mode-600 `summary.json`. `None`
/// (the test is skipped, and says so) where the test does not run as root.
pub(crate) fn setuid_root_copy(exe: &std::path::Path) -> Option<(PathBuf, PathBuf)> {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: making a setuid-root program needs root, and this test is not");
        return None;
    }
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "tickscope-setuid-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let prog = dir.join("prog");
    std::fs::copy(exe, &prog).unwrap();
    // Owned by root (this process), setuid.
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let secret = dir.join("secret");
    std::fs::create_dir(&secret).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o700)).unwrap();
    let file = secret.join("summary.json");
    std::fs::write(&file, "root's own\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    Some((prog, secret))
}

/// Checks that `secret` (from [`setuid_root_copy`]) holds only its untouched summary.json.
pub(crate) fn assert_untouched(secret: &std::path::Path) {
    let names: Vec<_> = std::fs::read_dir(secret)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(
        names,
        ["summary.json"],
        "a file was created in the root-only directory"
    );
    assert_eq!(
        std::fs::read_to_string(secret.join("summary.json")).unwrap(),
        "root's own\n",
        "the root-owned file was overwritten"
    );
}

#[test]
fn a_setuid_program_ignores_the_variables_with_one_warning() {
    use std::os::unix::process::CommandExt;
    let Some((prog, secret)) = setuid_root_copy(&example()) else {
        return;
    };
    let out = Command::new(&prog)
        .arg("return")
        .uid(65534)
        .gid(65534)
        .env(
            "TICKSCOPE_SUMMARY",
            format!("json:{}", secret.join("summary.json").display()),
        )
        .env("TICKSCOPE_CAPTURE", secret.join("run.tscap"))
        .env("TICKSCOPE_INTERVAL", "1s")
        .env_remove("TICKSCOPE_PER_THREAD")
        .env_remove("TICKSCOPE_ENABLED")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_untouched(&secret);
    // The kernel set AT_SECURE (a nosuid mount would not): the warning says so, once.
    assert_eq!(
        stderr
            .matches("every other TICKSCOPE_* variable ignored: this is a setuid or setgid program")
            .count(),
        1,
        "{stderr}"
    );
    // The defaults apply: the text summary on stderr.
    assert_full_summary(&stderr);
}
