//! The heap profiler (`tickscope::alloc::Profiled`, this binary's global allocator): a
//! workload of known allocations, run in a process of its own at a rate it sets, its profile
//! written at exit (`TICKSCOPE_HEAPPROFILE`) and read by `go tool pprof`.

use std::process::Command;
use std::sync::Mutex;

/// The sampling interval of the workload's process, bytes.
const RATE: f64 = 65536.0;

/// (function, blocks, bytes each, freed): what the workload allocates.
const KEEP: (&str, usize, usize) = ("heap_keep", 1000, 64 << 10);
const CHURN: (&str, usize, usize) = ("heap_churn", 200_000, 64);
const LEAK: (&str, usize, usize) = ("heap_leak", 1000, 10 << 10);

/// Blocks the workload holds to its end.
static HELD: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

#[inline(never)]
fn heap_keep() {
    let mut held = HELD.lock().unwrap();
    for _ in 0..KEEP.1 {
        held.push(std::hint::black_box(vec![1u8; KEEP.2]));
    }
}

#[inline(never)]
fn heap_churn() {
    for i in 0..CHURN.1 {
        let v = std::hint::black_box(vec![i as u8; CHURN.2]);
        drop(v);
    }
}

#[inline(never)]
fn heap_leak() {
    for _ in 0..LEAK.1 {
        std::mem::forget(std::hint::black_box(vec![2u8; LEAK.2]));
    }
}

/// Run by the test below, in a process of its own (it sets the rate, read at the process's
/// first allocation, and writes the profile at exit).
#[test]
#[ignore = "run by a_known_workloads_heap_is_estimated_within_its_sampling_error"]
fn heap_workload_in_a_process_of_its_own() {
    if std::env::var_os("TICKSCOPE_TEST_OWN_PROCESS").is_none() {
        return;
    }
    heap_keep();
    heap_churn();
    heap_leak();
    // On demand, beside the one written at exit: the blocks kept are in use.
    let (_, _, blocks, bytes) = tickscope::alloc::profile().totals();
    assert!(
        blocks > 0 && bytes >= (KEEP.1 * KEEP.2) as i64 / 2,
        "{blocks} {bytes}"
    );
}

/// The standard error of an estimate of `n` blocks of `size` bytes, relative to their total:
/// each is sampled with chance `p = 1 - exp(-size / rate)` and counted `1 / p` times.
fn relative_error(n: usize, size: usize) -> f64 {
    let p = -(-(size as f64) / RATE).exp_m1();
    ((1.0 - p) / (n as f64 * p)).sqrt()
}

#[test]
fn a_known_workloads_heap_is_estimated_within_its_sampling_error() {
    let dir = std::env::temp_dir().join(format!("tickscope-heap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("heap.pb.gz");
    let out = Command::new(std::env::current_exe().unwrap())
        .env("TICKSCOPE_TEST_OWN_PROCESS", "1")
        .env("TICKSCOPE_HEAP_RATE", format!("{RATE}"))
        .env("TICKSCOPE_HEAPPROFILE", &path)
        .args([
            "--exact",
            "heap::heap_workload_in_a_process_of_its_own",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
    assert!(text.contains("heap profile written to"), "{text}");
    // go tool pprof's own reading, by sample type: each function's cumulative bytes.
    let by = |index: &str| {
        let out = Command::new("go")
            .args([
                "tool",
                "pprof",
                "-traces",
                &format!("-sample_index={index}"),
            ])
            .arg(&path)
            .output()
            .expect("go tool pprof (Debian: golang-go)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(text.contains(&format!("Type: {index}")), "{text}");
        traces(&text)
    };
    let inuse = by("inuse_space");
    let alloc = by("alloc_space");
    let check = |what: &str, got: f64, (name, n, size): (&str, usize, usize)| {
        let want = (n * size) as f64;
        let tolerance = 4.0 * relative_error(n, size);
        assert!(
            (got / want - 1.0).abs() <= tolerance,
            "{name} {what}: {got:.0} bytes estimated of {want:.0} (tolerance {:.1}%, 4 standard errors)",
            tolerance * 100.0
        );
    };
    let of = |t: &[(f64, Vec<String>)], f: &str| -> f64 {
        t.iter()
            .filter(|(_, stack)| stack.iter().any(|s| s.ends_with(f)))
            .map(|(v, _)| v)
            .sum()
    };
    check("in use", of(&inuse, KEEP.0), KEEP);
    check("in use", of(&inuse, LEAK.0), LEAK);
    check("allocated", of(&alloc, KEEP.0), KEEP);
    check("allocated", of(&alloc, CHURN.0), CHURN);
    check("allocated", of(&alloc, LEAK.0), LEAK);
    // Every sampled block the churn freed was found freed.
    assert_eq!(of(&inuse, CHURN.0), 0.0, "{inuse:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `go tool pprof -traces`: each trace's value (bytes) and its functions, leaf first.
fn traces(text: &str) -> Vec<(f64, Vec<String>)> {
    let mut out: Vec<(f64, Vec<String>)> = Vec::new();
    // The first block is the header (`File:`, `Type:`, ...).
    let sep = "-----------+-------------------------------------------------------";
    for block in text.split(sep).skip(1) {
        // Past the header, each trace's labels (`bytes:  64kB`), then its value and stack.
        let mut lines = block
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.contains(":  "));
        let Some(first) = lines.next() else { continue };
        let mut words = first.split_whitespace();
        let (Some(value), Some(func)) = (words.next(), words.next()) else {
            continue;
        };
        let mut stack = vec![func.to_string()];
        stack.extend(lines.map(|l| l.trim().to_string()));
        out.push((bytes(value), stack));
    }
    out
}

/// "64MB", "1.50kB", "512B" as bytes (pprof's units are powers of 1024).
fn bytes(v: &str) -> f64 {
    let split = v.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(v.len());
    let (n, unit) = v.split_at(split);
    let n: f64 = n.parse().unwrap_or_else(|_| panic!("{v}"));
    let k = match unit {
        "B" | "" => 1.0,
        "kB" | "KB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => 1024.0 * 1024.0 * 1024.0,
        "TB" => 1024f64.powi(4),
        u => panic!("unit {u} in {v}"),
    };
    n * k
}

/// The row of scope `name` in the summary's JSON: its `allocs` figures and its calls.
fn allocs_of(name: &str) -> (serde_json::Value, u64) {
    let json = tickscope::report_string(tickscope::SummaryFormat::Json);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let row = v["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no row {name} in {json}"))
        .clone();
    let calls = row["calls"].as_u64().unwrap();
    (row["allocs"].clone(), calls)
}

fn figures(a: &serde_json::Value) -> [u64; 4] {
    ["count", "bytes", "self_count", "self_bytes"]
        .map(|k| a[k].as_u64().unwrap_or_else(|| panic!("no {k} in {a}")))
}

#[inline(never)]
fn alloc_recursive(n: u32) {
    tickscope::scope!("alloc_rec");
    std::hint::black_box(vec![0u8; 10]);
    if n > 0 {
        alloc_recursive(n - 1);
    }
}

/// Allocates 64 bytes at each poll; ready at the second.
struct TwoPolls(bool);

impl std::future::Future for TwoPolls {
    type Output = ();
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<()> {
        std::hint::black_box(vec![0u8; 64]);
        if self.0 {
            return std::task::Poll::Ready(());
        }
        self.0 = true;
        std::task::Poll::Pending
    }
}

struct Noop;

impl std::task::Wake for Noop {
    fn wake(self: std::sync::Arc<Self>) {}
}

fn poll_once<F: std::future::Future + ?Sized>(f: std::pin::Pin<&mut F>) -> bool {
    let waker = std::task::Waker::from(std::sync::Arc::new(Noop));
    let mut cx = std::task::Context::from_waker(&waker);
    f.poll(&mut cx).is_ready()
}

/// Known allocations in known scopes, counted exactly: nested scopes (total and self), a
/// recursive one (its total once), and a future polled on two threads (each poll's on the
/// thread that ran it, both in its row).
#[test]
fn allocations_are_counted_by_scope_exactly() {
    {
        tickscope::scope!("alloc_outer");
        for _ in 0..3 {
            std::hint::black_box(vec![0u8; 100]);
        }
        for _ in 0..2 {
            tickscope::scope!("alloc_inner");
            for _ in 0..2 {
                std::hint::black_box(Vec::<u8>::with_capacity(1000));
            }
        }
    }
    alloc_recursive(3);
    use tickscope::future::FutureExt;
    let mut fut = Box::pin(TwoPolls(false).profiled("alloc_future"));
    assert!(!poll_once(fut.as_mut()));
    let ready = std::thread::spawn(move || poll_once(fut.as_mut()))
        .join()
        .unwrap();
    assert!(ready);

    let (outer, calls) = allocs_of("alloc_outer");
    assert_eq!(calls, 1);
    assert_eq!(figures(&outer), [7, 4300, 3, 300], "{outer}");
    let (inner, calls) = allocs_of("alloc_inner");
    assert_eq!(calls, 2);
    assert_eq!(figures(&inner), [4, 4000, 4, 4000], "{inner}");
    let (rec, calls) = allocs_of("alloc_rec");
    assert_eq!(calls, 4);
    assert_eq!(figures(&rec), [4, 40, 4, 40], "{rec}");
    let (fut, calls) = allocs_of("alloc_future");
    assert_eq!(calls, 2);
    assert_eq!(figures(&fut), [2, 128, 2, 128], "{fut}");
    let text = tickscope::report_string(tickscope::SummaryFormat::Text);
    assert!(
        text.contains("allocations by scope")
            && text
                .lines()
                .any(|l| l.starts_with("alloc_outer") && l.contains("4.20kB")),
        "{text}"
    );
}

/// A `tracing` span entered on two threads: each entry's allocations in its row, counted on
/// the thread that entered it.
#[cfg(feature = "tracing")]
#[test]
fn a_spans_allocations_are_counted_on_each_thread_that_enters_it() {
    use tracing_subscriber::layer::SubscriberExt;
    let d = tracing::Dispatch::new(
        tracing_subscriber::registry().with(tickscope::tracing::Layer::default()),
    );
    let span = tracing::dispatcher::with_default(&d, || tracing::info_span!("alloc_span"));
    let enter = |d: &tracing::Dispatch, span: &tracing::Span| {
        tracing::dispatcher::with_default(d, || {
            span.in_scope(|| std::hint::black_box(vec![0u8; 32]));
        })
    };
    enter(&d, &span);
    let (d2, span2) = (d.clone(), span.clone());
    std::thread::spawn(move || enter(&d2, &span2))
        .join()
        .unwrap();
    let (allocs, calls) = allocs_of("alloc_span");
    assert_eq!(calls, 2);
    assert_eq!(figures(&allocs), [2, 64, 2, 64], "{allocs}");
}

/// Run by the test below, in a process of its own sampling an allocation every 4 KiB on
/// average (the table's lock taken often, by several threads): fork children made while
/// other threads allocate, and 5,000 threads that allocate and end, are not harmed.
#[test]
#[ignore = "run by fork_children_and_thousands_of_threads_allocate_unharmed"]
fn heap_safety_in_a_process_of_its_own() {
    if std::env::var_os("TICKSCOPE_TEST_OWN_PROCESS").is_none() {
        return;
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churn: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let v: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 16 + i]).collect();
                    std::hint::black_box(v);
                }
            })
        })
        .collect();
    for _ in 0..10 {
        // SAFETY: the child allocates through the profiler (whose locks another thread may
        // have held at the fork: it must not wait on them) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let ok = std::panic::catch_unwind(|| {
                let v: Vec<Vec<u8>> = (0..1000).map(|i| vec![1u8; i % 512 + 1]).collect();
                drop(std::hint::black_box(v));
            });
            // SAFETY: ends the child without the parent's exit hooks.
            unsafe { libc::_exit(if ok.is_ok() { 0 } else { 1 }) };
        }
        assert!(pid > 0, "fork failed");
        let mut status = 0;
        // SAFETY: waits for the child just forked; `status` is a valid out pointer.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "fork child: status {status:#x}"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in churn {
        t.join().unwrap();
    }
    // 5,000 threads, 100 at a time, each allocating and ending (its thread-locals torn down
    // while allocations still go through the profiler).
    for _ in 0..50 {
        let batch: Vec<_> = (0..100)
            .map(|_| {
                std::thread::spawn(|| {
                    tickscope::scope!("heap_thread");
                    let v: Vec<Box<[u8]>> =
                        (0..20).map(|i| vec![0u8; 8 << (i % 8)].into()).collect();
                    std::hint::black_box(v).len()
                })
            })
            .collect();
        for t in batch {
            assert_eq!(t.join().unwrap(), 20);
        }
    }
    println!("heap safety: done");
}

/// Runs test `name` of this binary in a process of its own with `env` (a hang, the failure
/// such tests look for, polled to a generous deadline, then killed): whether it succeeded,
/// and its standard output and error.
fn own_process(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env("TICKSCOPE_TEST_OWN_PROCESS", "1")
        .envs(env.iter().copied())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{name}: the process hung (killed after 600 s)");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn fork_children_and_thousands_of_threads_allocate_unharmed() {
    let (ok, text) = own_process(
        "heap::heap_safety_in_a_process_of_its_own",
        &[
            ("TICKSCOPE_HEAP_RATE", "4096"),
            ("TICKSCOPE_SUMMARY", "json"),
        ],
    );
    assert!(ok && text.contains("heap safety: done"), "{text}");
    // Every thread's scope was counted with its allocations (its 20 blocks and the vector
    // holding them), none lost.
    let json = text
        .lines()
        .find(|l| l.starts_with("{\"tickscope\""))
        .unwrap_or_else(|| panic!("no JSON summary in {text}"));
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    let row = v["scopes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "heap_thread")
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(row["calls"], 5000, "{row}");
    assert_eq!(row["allocs"]["count"], 5000 * 21, "{row}");
}

/// Signals the handler below has finished.
static HANDLED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// Signals the test sends.
const SIGNALS: u64 = 5000;
/// Bytes the handler allocates each time (a vector and a box).
const IN_HANDLER: u64 = 96 + 64;

/// Allocates and frees from a signal handler, through the profiler; the inner allocator
/// gives the handler's blocks from an arena (see `arena` in tests.rs), so whatever goes
/// wrong is the profiler's doing.
extern "C" fn allocating_handler(_: libc::c_int) {
    crate::arena::IN_HANDLER.with(|h| h.set(true));
    let v = std::hint::black_box(vec![7u8; 96]);
    let b = std::hint::black_box(Box::new([1u64; 8]));
    drop((v, b));
    crate::arena::IN_HANDLER.with(|h| h.set(false));
    HANDLED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Run by the test below, in a process of its own sampling an allocation every KiB on
/// average: a signal handler that allocates and frees interrupts the thread while it
/// allocates (often inside the profiler's own sampling, holding its table).
#[test]
#[ignore = "run by allocations_from_a_signal_handler_are_unharmed"]
fn heap_signals_in_a_process_of_its_own() {
    use std::sync::atomic::Ordering::Relaxed;
    if std::env::var_os("TICKSCOPE_TEST_OWN_PROCESS").is_none() {
        return;
    }
    // SAFETY: all-zero bytes are a valid `sigaction` (an empty mask, no flags).
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = allocating_handler as extern "C" fn(libc::c_int) as usize;
    sa.sa_flags = libc::SA_RESTART;
    // SAFETY: a handler for SIGUSR2, which nothing else in this process uses; its
    // allocations go to the arena, its other work is atomics.
    let set = unsafe { libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()) };
    assert_eq!(set, 0);
    // SAFETY: the calling thread's own handle.
    let me = unsafe { libc::pthread_self() } as usize;
    let sender = std::thread::spawn(move || {
        for _ in 0..SIGNALS {
            let before = HANDLED.load(Relaxed);
            // SAFETY: `me` is the test's thread, alive until this thread is joined.
            unsafe { libc::pthread_kill(me as libc::pthread_t, libc::SIGUSR2) };
            // One signal at a time (a pending one would absorb the next): wait for it.
            while HANDLED.load(Relaxed) == before {
                std::hint::spin_loop();
            }
        }
    });
    let mut bytes = 0u64;
    let mut allocations = 0u64;
    while HANDLED.load(Relaxed) < SIGNALS || allocations < 200_000 {
        let v = std::hint::black_box(vec![3u8; 128]);
        drop(v);
        bytes += 128;
        allocations += 1;
    }
    sender.join().unwrap();
    let (objects, space, _, _) = tickscope::alloc::profile().totals();
    // Go's estimate of 128-byte blocks at a mean of 1 KiB: each block stands for 128/p with
    // chance p = 1 - exp(-128/1024); the sum's standard deviation is
    // 128 * sqrt(n (1-p)/p). The handler's blocks may or may not be sampled (not while the
    // thread is inside the profiler): they widen the upper bound only.
    let p = 1.0 - (-128.0f64 / 1024.0).exp();
    let sd = 128.0 * (allocations as f64 * (1.0 - p) / p).sqrt();
    let (low, high) = (
        bytes as f64 - 5.0 * sd,
        (bytes + SIGNALS * IN_HANDLER) as f64 + 5.0 * sd,
    );
    assert!(
        objects > 0 && (low..=high).contains(&(space as f64)),
        "alloc_space {space} outside [{low:.0}, {high:.0}] ({allocations} blocks of 128 B, {objects} objects)"
    );
    println!("heap signals: done, {} handled", HANDLED.load(Relaxed));
}

#[test]
fn allocations_from_a_signal_handler_are_unharmed() {
    let (ok, text) = own_process(
        "heap::heap_signals_in_a_process_of_its_own",
        &[("TICKSCOPE_HEAP_RATE", "1024")],
    );
    assert!(
        ok && text.contains(&format!("heap signals: done, {SIGNALS} handled")),
        "{text}"
    );
}
