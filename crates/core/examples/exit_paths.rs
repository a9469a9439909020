//! A small program that leaves in the way its first argument says, for the exit-summary
//! tests (`tests/exit.rs`) and as a runnable example:
//!
//! ```text
//! cargo run -p tickscope --example exit_paths -- return   # main returns
//! cargo run -p tickscope --example exit_paths -- exit     # std::process::exit(3)
//! cargo run -p tickscope --example exit_paths -- panic    # panic in main
//! cargo run -p tickscope --example exit_paths -- open     # exit inside an open scope
//! cargo run -p tickscope --example exit_paths -- fork     # a forked child exits first
//! cargo run -p tickscope --example exit_paths -- race 200 # 200 threads' first scopes at once
//! ```
//!
//! No init call anywhere: the summary appears by itself.

#[tickscope::profile]
fn fib(n: u32) -> u64 {
    if n < 2 {
        n as u64
    } else {
        fib(n - 1) + fib(n - 2)
    }
}

struct Pool;

impl Pool {
    #[tickscope::profile(group = "pool api")]
    fn get(&self) -> u32 {
        self.put() + 1
    }

    #[tickscope::profile(group = "pool api")]
    fn put(&self) -> u32 {
        1
    }

    #[tickscope::profile]
    fn method(&self) -> u32 {
        7
    }
}

fn work() {
    tickscope::scope!("exit-path-work");
    let mut acc = 0u64;
    for i in 0..1000 {
        tickscope::scope!();
        acc = acc.wrapping_add(std::hint::black_box(i));
    }
    std::hint::black_box(acc);
}

/// `race N`: N threads enter their first scope at once, the process's first scopes (with
/// `TICKSCOPE_CAPTURE`, they race the capture's start); prints the capture's figures.
fn race(n: usize) {
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(n));
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                tickscope::scope!("first scope");
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    #[cfg(feature = "capture")]
    if let Some(s) = tickscope::capture::stop() {
        println!(
            "capture events={} dropped={} in_flight_at_start={} lost_after_exit={}",
            s.events, s.dropped, s.in_flight_at_start, s.lost_after_exit
        );
    }
}

fn main() {
    let how = std::env::args().nth(1).unwrap_or_else(|| "return".into());
    if how == "race" {
        let n = std::env::args()
            .nth(2)
            .and_then(|n| n.parse().ok())
            .unwrap_or(200);
        return race(n);
    }
    println!("compiled in: {}", tickscope::COMPILED_IN);
    work();
    std::hint::black_box(fib(15));
    let pool = Pool;
    for _ in 0..10 {
        std::hint::black_box(pool.get());
    }
    std::hint::black_box(pool.method());
    // A thread that lives about a millisecond still counts.
    std::thread::spawn(|| {
        tickscope::scope!("short-lived thread");
        std::thread::sleep(std::time::Duration::from_millis(1));
    })
    .join()
    .unwrap();
    if let Some(ms) = std::env::var("EXIT_PATHS_SLEEP_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        let end = std::time::Instant::now() + std::time::Duration::from_millis(ms);
        while std::time::Instant::now() < end {
            work();
        }
    }
    match how.as_str() {
        "exit" => std::process::exit(3),
        "panic" => panic!("deliberate panic in main"),
        "open" => {
            tickscope::scope!("open at exit");
            std::process::exit(0);
        }
        "report" => tickscope::report(),
        "fork" => {
            // SAFETY: the process is single-threaded here (the helper thread was joined), so
            // the child may run arbitrary code; it leaves through exit(), running atexit.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // Scopes in the child too: with a capture running in the parent, they must
                // not be recorded (the child has no collector).
                work();
                // SAFETY: exit() is the point of the test: it runs the inherited handlers.
                unsafe { libc::exit(0) };
            }
            let mut status = 0;
            // SAFETY: waits for the child just forked; `status` is a valid out pointer.
            unsafe { libc::waitpid(pid, &mut status, 0) };
        }
        _ => {}
    }
}
