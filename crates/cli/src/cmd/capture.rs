//! `tickscope capture listen [ADDR] -o FILE`: receives timeline captures that programs stream
//! over TCP (`TICKSCOPE_CAPTURE=tcp://127.0.0.1:7878`) and writes each to a file, checking
//! every chunk as it arrives and printing a live line per second per connection.
//!
//! The first connection is written to FILE, later ones to FILE with `.2`, `.3`… before the
//! extension; concurrent connections each get a thread. Chunks are written whole as they
//! pass their checks, so every file is a valid capture up to its last complete chunk at any
//! moment, Ctrl-C included. Only loopback addresses are accepted unless `--allow-remote`:
//! captures are not authenticated.

use std::fs::File;
use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tickscope_analyze::timeline::live::{record, Live};
use tickscope_analyze::timeline::Error;

/// `tickscope capture`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Receive captures streamed over TCP and write them to files.
    Listen(ListenArgs),
}

/// Options of `tickscope capture listen`.
#[derive(clap::Args)]
struct ListenArgs {
    /// The address to listen on.
    #[arg(value_name = "ADDR", default_value = "127.0.0.1:7878")]
    addr: String,
    /// The file for the first connection's capture (later ones: FILE.2, FILE.3, … before
    /// the extension).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Accept a non-loopback address: anyone who can reach it can write files here.
    #[arg(long)]
    allow_remote: bool,
    /// Exit after this many connections have ended (default: run until Ctrl-C).
    #[arg(long, value_name = "N")]
    connections: Option<u64>,
    /// No live lines, only the start and end of each connection.
    #[arg(long)]
    quiet: bool,
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Listen(a) => listen(a),
    }
}

/// `out.tscap` for the first connection, `out.2.tscap` for the second, …
fn numbered(path: &Path, n: u64) -> PathBuf {
    if n == 1 {
        return path.to_owned();
    }
    let stem = path
        .file_stem()
        .map_or_else(Default::default, |s| s.to_owned());
    let mut name = stem;
    name.push(format!(".{n}"));
    if let Some(ext) = path.extension() {
        name.push(".");
        name.push(ext);
    }
    path.with_file_name(name)
}

fn listen(args: ListenArgs) -> Result<()> {
    let addrs: Vec<SocketAddr> = args
        .addr
        .to_socket_addrs()
        .with_context(|| format!("{}: not an address to listen on", args.addr))?
        .collect();
    if !args.allow_remote {
        if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            bail!(
                "refusing to listen on {a}: not a loopback address, and captures are not authenticated (pass --allow-remote to accept connections from other machines)"
            );
        }
    }
    let listener =
        TcpListener::bind(&addrs[..]).with_context(|| format!("cannot listen on {}", args.addr))?;
    eprintln!(
        "tickscope: listening on {} for captures, writing {}{}",
        listener.local_addr()?,
        args.output.display(),
        match args.connections {
            Some(n) => format!(" (until {n} connections have ended)"),
            None => " (Ctrl-C to stop)".to_owned(),
        }
    );
    let mut handles = Vec::new();
    let mut n = 0u64;
    while args.connections.map_or(true, |max| n < max) {
        let (stream, peer) = listener.accept().context("accept failed")?;
        n += 1;
        let path = numbered(&args.output, n);
        eprintln!(
            "tickscope: connection {n} from {peer}: writing {}",
            path.display()
        );
        let quiet = args.quiet;
        handles.push(std::thread::spawn(move || serve(stream, path, quiet)));
    }
    let mut failed = 0;
    for h in handles {
        if !h.join().unwrap_or(false) {
            failed += 1;
        }
    }
    if failed > 0 {
        bail!("{failed} of {n} connections did not deliver a capture");
    }
    Ok(())
}

/// Records one connection into `path`; returns true if it delivered a capture (complete or
/// not).
fn serve(stream: TcpStream, path: PathBuf, quiet: bool) -> bool {
    let name = path.display().to_string();
    let file = match File::create(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("tickscope: error: {name}: cannot create: {e}");
            return false;
        }
    };
    let live = Arc::new(Mutex::new(Live::new(name.clone())));
    let done = Arc::new(AtomicBool::new(false));
    let printer = (!quiet).then(|| {
        let (live, done) = (live.clone(), done.clone());
        std::thread::spawn(move || {
            let mut last = Instant::now();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
                let elapsed = last.elapsed();
                if elapsed >= Duration::from_secs(1) {
                    last = Instant::now();
                    let line = live
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .tick(elapsed.as_secs_f64());
                    eprintln!("tickscope: {line}");
                }
            }
        })
    });
    let result = record(
        BufReader::with_capacity(1 << 16, stream),
        &name,
        file,
        &live,
    );
    done.store(true, Ordering::Relaxed);
    if let Some(p) = printer {
        let _ = p.join();
    }
    match result {
        Ok(rec) => {
            for w in &rec.warnings {
                eprintln!("tickscope: warning: {w}");
            }
            if rec.stopped.is_some() {
                eprintln!(
                    "tickscope: {name}: valid up to byte {}, its last complete chunk ({} events kept)",
                    rec.bytes, rec.events
                );
            } else {
                eprintln!(
                    "tickscope: {name}: {} events in {} chunks, {} bytes; {}",
                    rec.events,
                    rec.chunks,
                    rec.bytes,
                    if rec.complete {
                        "capture complete"
                    } else {
                        "no end record"
                    }
                );
            }
            true
        }
        Err(Error::Read(e)) => {
            eprintln!("tickscope: error: {e}");
            // Nothing was written: a stream that is not a capture leaves no file.
            let _ = std::fs::remove_file(&path);
            false
        }
        Err(e) => {
            eprintln!("tickscope: error: {name}: {e}");
            false
        }
    }
}
