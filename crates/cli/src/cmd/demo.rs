//! `tickscope demo`: a small multi-threaded program instrumented with tickscope, to show what
//! the reports look like. Worker threads parse generated records, use a small pool allocator
//! whose public functions form the group `alloc` (`realloc` calls `alloc` and `free`, so the
//! group is re-entered), compute a recursive checksum, and hand work to a short-lived thread.
//! Interval lines print while it runs; the exit summary prints itself when the process exits.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use super::out::Output;

/// Options of `tickscope demo`.
#[derive(clap::Args)]
pub struct Args {
    /// How long the workload runs, in seconds.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Worker threads.
    #[arg(long, default_value_t = 3)]
    threads: usize,
    /// Interval between per-thread report lines (e.g. 500ms, 1s; "off" for none).
    #[arg(long, default_value = "1s")]
    interval: String,
    /// Add a per-thread breakdown to the summary.
    #[arg(long)]
    per_thread: bool,
    /// Sample the demo's CPU time and write a pprof profile (gzip) to FILE
    /// (`go tool pprof -top FILE`).
    #[arg(long, value_name = "FILE")]
    cpuprofile: Option<std::path::PathBuf>,
    /// With --cpuprofile, also write an interactive flame graph (SVG) to FILE.
    #[arg(long, value_name = "FILE", requires = "cpuprofile")]
    flamegraph: Option<std::path::PathBuf>,
    /// Samples per second of CPU time per thread, with --cpuprofile.
    #[arg(long, default_value_t = 1000)]
    hz: u32,
    /// Record the timeline (every scope begin and end, frame marks, counters, messages) to
    /// FILE (`tickscope report FILE`, `tickscope convert FILE --to chrome -o trace.json`).
    #[arg(long, value_name = "FILE")]
    capture: Option<std::path::PathBuf>,
    /// Run an async service instead: clients, requests and a database task on a tokio
    /// multi-thread runtime of --threads workers, with `tracing` spans and `#[profile]
    /// async fn` (busy beside wall time in the summary's "spans and futures" table).
    #[arg(long = "async")]
    async_service: bool,
}

pub fn run(args: Args) -> Result<()> {
    ensure!(
        args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 3600.0,
        "--seconds must be between 0 and 3600, got {}",
        args.seconds
    );
    ensure!(
        (1..=256).contains(&args.threads),
        "--threads must be 1 to 256, got {}",
        args.threads
    );
    let interval = tickscope::parse_interval(&args.interval).ok_or_else(|| {
        anyhow::anyhow!(
            "--interval {:?}: expected a duration such as 500ms or 1s, or off",
            args.interval
        )
    })?;
    // The outputs' directories are checked before the run; each file is written beside its
    // target and renamed over it when complete.
    let profile_out = args.cpuprofile.as_deref().map(Output::create).transpose()?;
    let svg_out = args.flamegraph.as_deref().map(Output::create).transpose()?;
    tickscope::Config::new()
        .interval(interval)
        .per_thread(args.per_thread)
        .install();
    say!(
        "tickscope demo: {} {} for {:.1} s; {}; the summary prints itself at exit.",
        args.threads,
        if args.async_service {
            "tokio worker threads serving requests"
        } else {
            "worker threads"
        },
        args.seconds,
        match interval {
            Some(i) => format!("a line per thread and scope every {i:?}"),
            None => "interval lines off".to_owned(),
        }
    );
    let sampler = match &args.cpuprofile {
        Some(_) => Some(
            tickscope::sampler::Sampler::builder()
                .frequency(args.hz)
                .start()
                .map_err(|e| anyhow::anyhow!("cannot start the CPU sampler: {e}"))?,
        ),
        None => None,
    };
    let capture = match &args.capture {
        Some(path) => {
            // The defaults: the demo's scopes are fine-grained (tens of millions of events a
            // second across its threads), and where the machine has no core to spare for the
            // collector the threads' buffers grow (within 256 MiB) instead of dropping events.
            let c = tickscope::capture::start(tickscope::capture::Sink::File(path.clone()))
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            tickscope::message!("demo: {} workers for {} s", args.threads, args.seconds);
            Some((path, c))
        }
        None => None,
    };
    let checksum = if args.async_service {
        tickscope::scope!("demo");
        super::demo_async::run(args.seconds, args.threads)?
    } else {
        tickscope::scope!("demo");
        let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
        let workers: Vec<_> = (0..args.threads)
            .map(|i| {
                std::thread::Builder::new()
                    .name(format!("worker-{i}"))
                    .spawn(move || worker(i as u64, deadline))
            })
            .collect::<std::io::Result<_>>()?;
        let mut checksum = 0u64;
        for w in workers {
            checksum ^= w
                .join()
                .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?;
        }
        checksum
    };
    println!("demo checksum: {checksum:016x}");
    if let Some((path, capture)) = capture {
        tickscope::message!("demo: done, checksum {checksum:016x}");
        let stats = capture.stop().expect("the capture started above");
        if stats.write_failed {
            // What was kept (the old file, or the capture up to the failure) is said above.
            bail!(
                "the timeline could not be written whole to {} (see above)",
                path.display()
            );
        }
        say!(
            "tickscope demo: timeline written to {} ({} events, {} dropped, {:.1} MB, {:.2} bytes per event; buffers peaked at {:.1} MiB; collector {:.2} of a core); see it with `tickscope report {}`",
            path.display(),
            stats.events,
            stats.dropped + stats.undelivered,
            stats.bytes as f64 / 1e6,
            stats.bytes as f64 / stats.events.max(1) as f64,
            stats.memory_peak as f64 / (1 << 20) as f64,
            stats.collector_cpu.as_secs_f64() / stats.wall.as_secs_f64().max(1e-9),
            path.display()
        );
    }
    if let (Some(sampler), Some(path)) = (sampler, &args.cpuprofile) {
        let profile = sampler.stop();
        if let Some(mut out) = profile_out {
            profile
                .write_pprof_to(out.file())
                .with_context(|| format!("cannot write {}", path.display()))?;
            out.commit()?;
        }
        if let (Some(svg), Some(mut out)) = (&args.flamegraph, svg_out) {
            profile
                .flamegraph_svg_to(out.file())
                .with_context(|| format!("cannot write {}", svg.display()))?;
            out.commit()?;
            say!("tickscope demo: flame graph written to {}", svg.display());
        }
        say_part!("{}", profile.top(10));
        say!(
            "tickscope demo: CPU profile written to {} ({} samples, {}); view it with `go tool pprof -top {}`",
            path.display(),
            profile.samples(),
            profile.source().map(|s| s.name()).unwrap_or("no source"),
            path.display()
        );
    }
    Ok(())
}

/// One worker: batches of records until the deadline, and at least one, so every worker
/// shows in the profile and the timeline even when a busy machine starts it after a short
/// deadline has passed.
fn worker(seed: u64, deadline: Instant) -> u64 {
    let mut pool = Pool::new();
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut acc = 0u64;
    let mut batch = 0u64;
    while batch == 0 || Instant::now() < deadline {
        batch += 1;
        let text = generate(&mut rng, 64);
        acc ^= process_batch(&text, &mut pool);
        acc = acc.wrapping_add(fib(8 + (rng % 4) as u32));
        tickscope::plot!("pool free blocks", pool.free_blocks());
        tickscope::frame!("batch");
        if batch % 5000 == 0 {
            // Hand a checksum to a thread that lives for about a millisecond.
            tickscope::message!("batch {batch}: handing a checksum to a short-lived thread");
            let data = text.clone();
            let h = std::thread::Builder::new()
                .name("flusher".into())
                .spawn(move || flush(&data))
                .expect("spawn flusher");
            acc ^= h.join().unwrap_or(0);
        }
    }
    acc
}

#[tickscope::profile]
fn generate(rng: &mut u64, records: usize) -> String {
    let mut s = String::with_capacity(records * 32);
    for _ in 0..records {
        for f in 0..4 {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            if f > 0 {
                s.push(',');
            }
            s.push_str(&(*rng % 100_000).to_string());
        }
        s.push('\n');
    }
    s
}

#[tickscope::profile]
fn process_batch(text: &str, pool: &mut Pool) -> u64 {
    let mut acc = 0u64;
    for line in text.lines() {
        acc = acc.wrapping_add(parse_record(line, pool));
    }
    acc
}

#[tickscope::profile(name = "parse_record")]
fn parse_record(line: &str, pool: &mut Pool) -> u64 {
    let fields = tokenize(line);
    let block = pool.alloc(fields.len() * 8);
    let block = pool.realloc(block, fields.len() * 16);
    let sum = fields
        .iter()
        .fold(0u64, |a, f| a.wrapping_mul(31).wrapping_add(*f));
    pool.free(block);
    sum
}

fn tokenize(line: &str) -> Vec<u64> {
    tickscope::scope!();
    line.split(',')
        .map(|f| f.parse::<u64>().unwrap_or(0))
        .collect()
}

/// Recursive: tickscope counts every call, and its time once.
#[tickscope::profile]
fn fib(n: u32) -> u64 {
    if n < 2 {
        return n as u64;
    }
    black_box(fib(n - 1) + fib(n - 2))
}

fn flush(data: &str) -> u64 {
    tickscope::scope!("flush (short-lived thread)");
    let start = Instant::now();
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    while start.elapsed() < Duration::from_millis(1) {
        for b in data.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

/// A toy allocator API; each public function is in the group `alloc`.
struct Pool {
    free_lists: Vec<Vec<Vec<u8>>>,
}

impl Pool {
    fn new() -> Pool {
        Pool {
            free_lists: (0..16).map(|_| Vec::new()).collect(),
        }
    }

    fn free_blocks(&self) -> usize {
        self.free_lists.iter().map(Vec::len).sum()
    }

    fn class(size: usize) -> usize {
        (usize::BITS - size.max(1).leading_zeros()) as usize % 16
    }

    #[tickscope::profile(group = "alloc")]
    fn alloc(&mut self, size: usize) -> Vec<u8> {
        let c = Pool::class(size);
        self.free_lists[c]
            .pop()
            .unwrap_or_else(|| vec![0u8; 1 << c])
    }

    #[tickscope::profile(group = "alloc")]
    fn realloc(&mut self, block: Vec<u8>, size: usize) -> Vec<u8> {
        if block.len() >= size {
            return block;
        }
        // The API calling its own public functions: counted as calls, timed once.
        let mut new = self.alloc(size);
        new[..block.len()].copy_from_slice(&block);
        self.free(block);
        new
    }

    #[tickscope::profile(group = "alloc")]
    fn free(&mut self, block: Vec<u8>) {
        let c = Pool::class(block.len());
        if self.free_lists[c].len() < 64 {
            self.free_lists[c].push(block);
        }
    }
}
