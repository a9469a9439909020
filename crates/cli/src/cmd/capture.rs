//! `tickscope capture listen [ADDR] -o FILE`: receives timeline captures that programs stream
//! over TCP (`TICKSCOPE_CAPTURE=tcp://127.0.0.1:7878`) and writes each to a file, checking
//! every chunk as it arrives and printing a live line per second per connection.
//!
//! Each connection is written to the first free name of FILE, then FILE with `.2`, `.3`…
//! before the extension: an existing file is never replaced, and a connection that delivers
//! no capture removes only the file it created. Connections each get a thread (at most
//! `--max-connections` at a time; more are refused), and one that sends nothing for 30 s is
//! closed. Chunks are written whole as they pass their checks, so every file is a valid
//! capture up to its last complete chunk at any moment, Ctrl-C included. Only loopback
//! addresses are accepted unless `--allow-remote`: captures are not authenticated.

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tickscope_timeline::live::{record, Live};
use tickscope_timeline::Error;

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
    /// The file for the first connection's capture (later ones, or when FILE exists: FILE.2,
    /// FILE.3, … before the extension; existing files are never replaced).
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
    /// Connections served at once. At the cap, a new connection closes the one silent the
    /// longest if it has been silent for the idle timeout (its capture kept as far as it
    /// came); otherwise it is refused (and logged).
    #[arg(long, value_name = "N", default_value_t = 64,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: u32,
    /// Seconds a connection may stay silent before its capture's header has arrived; it is
    /// closed then. Once the header is in, a program quiet for a while (no events) keeps its
    /// connection, unless the connections are at their cap and a new one comes. (For tests.)
    #[arg(long, value_name = "SECONDS", default_value_t = 30, hide = true,
          value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout: u64,
    /// Also show each capture as it arrives in the web viewer (`tickscope view`): its URL is
    /// the first line of stdout.
    #[arg(long)]
    view: bool,
    /// With `--view`: print the URL without opening a browser.
    #[arg(long, requires = "view")]
    no_open: bool,
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
    // A directory that takes no files fails here, not at the first connection.
    super::out::check_writable(&args.output)?;
    let listener =
        TcpListener::bind(&addrs[..]).with_context(|| format!("cannot listen on {}", args.addr))?;
    say!(
        "tickscope: listening on {} for captures, writing {}{}",
        listener.local_addr()?,
        args.output.display(),
        match args.connections {
            Some(n) => format!(" (until {n} connections have ended)"),
            None => " (Ctrl-C to stop)".to_owned(),
        }
    );
    let viewer = if args.view {
        let started = tickscope_view::start(&tickscope_view::Config {
            fed: true,
            ..tickscope_view::Config::default()
        })?;
        super::view::announce(&started.url, !args.no_open, &started.viewer)?;
        let viewer = started.viewer.clone();
        std::thread::Builder::new()
            .name("tickscope-view".into())
            .spawn(move || started.serve())?;
        Some(viewer)
    } else {
        None
    };
    let idle = Duration::from_secs(args.idle_timeout);
    let started = Instant::now();
    let mut handles: Vec<Slot> = Vec::new();
    let (mut n, mut failed, mut next_name) = (0u64, 0u64, 1u64);
    while args.connections.is_none_or(|max| n < max) {
        let (stream, peer) = listener.accept().context("accept failed")?;
        // Join the connections that ended: a finished thread keeps its stack until joined.
        let mut i = 0;
        while i < handles.len() {
            if handles[i].handle.is_finished() {
                if !handles.swap_remove(i).handle.join().unwrap_or(false) {
                    failed += 1;
                }
            } else {
                i += 1;
            }
        }
        if handles.len() >= args.max_connections as usize
            && !close_the_idlest(&handles, started, idle)
        {
            say!(
                "tickscope: refused a connection from {peer}: {} connections are open already, none silent for {} s (--max-connections)",
                handles.len(),
                idle.as_secs()
            );
            continue;
        }
        n += 1;
        let (file, path) = match create_free(&args.output, &mut next_name) {
            Ok(f) => f,
            Err(e) => {
                say!("tickscope: error: connection {n} from {peer}: {e:#}");
                failed += 1;
                continue;
            }
        };
        say!(
            "tickscope: connection {n} from {peer}: writing {}",
            path.display()
        );
        if let Err(e) = stream.set_read_timeout(Some(idle)) {
            say!("tickscope: warning: connection {n}: cannot set its idle timeout: {e}");
        }
        let quiet = args.quiet;
        let last = Arc::new(AtomicU64::new(ms_since(started)));
        let closer = match stream.try_clone() {
            Ok(c) => Arc::new(Mutex::new(Some(c))),
            Err(e) => {
                say!("tickscope: error: connection {n} from {peer}: {e}");
                failed += 1;
                continue;
            }
        };
        let heard = Heard {
            last: last.clone(),
            started,
            closer: closer.clone(),
        };
        // The viewer reads the same checked chunks the file gets.
        let feed = match &viewer {
            Some(v) => match v.add_live(&path.display().to_string()).feed() {
                Ok(f) => Some(f),
                Err(e) => {
                    say!("tickscope: warning: connection {n}: not shown in the viewer: {e}");
                    None
                }
            },
            None => None,
        };
        let spawned = std::thread::Builder::new()
            .name(format!("connection-{n}"))
            .spawn(move || serve(stream, Tee(file, feed), path, quiet, idle, heard));
        match spawned {
            Ok(handle) => handles.push(Slot {
                handle,
                stream: closer,
                last,
                n,
            }),
            Err(e) => {
                say!("tickscope: error: connection {n} from {peer}: cannot start its thread: {e}");
                failed += 1;
            }
        }
    }
    for h in handles {
        if !h.handle.join().unwrap_or(false) {
            failed += 1;
        }
    }
    if failed > 0 {
        bail!("{failed} of {n} connections did not deliver a capture");
    }
    if viewer.is_some() {
        // The captures stay on the page.
        say!("tickscope: the connections ended; the viewer serves them until Ctrl-C");
        loop {
            std::thread::park();
        }
    }
    Ok(())
}

/// A connection being served: its thread, a handle on its socket to close it, when it last
/// sent anything (ms since the listener started), its number.
struct Slot {
    handle: std::thread::JoinHandle<bool>,
    stream: Closer,
    last: Arc<AtomicU64>,
    n: u64,
}

/// A second handle on a connection's socket, to close it from the accepting thread; taken
/// (so that the socket closes with the connection's own) when the connection ends.
type Closer = Arc<Mutex<Option<TcpStream>>>;

/// When a connection last sent anything, updated by its reader; its [`Closer`], let go of
/// when the reader is dropped.
struct Heard {
    last: Arc<AtomicU64>,
    started: Instant,
    closer: Closer,
}

impl Drop for Heard {
    fn drop(&mut self) {
        drop(self.closer.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

fn ms_since(t: Instant) -> u64 {
    t.elapsed().as_millis() as u64
}

/// At the cap: closes the connection silent the longest, if silent for `idle` at least (its
/// capture ends there, kept as far as it came); false if none has been. Connections that
/// send a header and then hold their slot in silence cannot keep every later capture out.
fn close_the_idlest(slots: &[Slot], started: Instant, idle: Duration) -> bool {
    let now = ms_since(started);
    let Some(s) = slots.iter().min_by_key(|s| s.last.load(Ordering::Relaxed)) else {
        return false;
    };
    let silent = now.saturating_sub(s.last.load(Ordering::Relaxed));
    if silent < idle.as_millis() as u64 {
        return false;
    }
    say!(
        "tickscope: closed connection {} (silent for {:.0} s) to take a new one: --max-connections are open",
        s.n,
        silent as f64 / 1e3
    );
    if let Some(stream) = &*s.stream.lock().unwrap_or_else(|p| p.into_inner()) {
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
    // Not counted again: its thread ends now, and is joined at the next connection.
    s.last.store(u64::MAX, Ordering::Relaxed);
    true
}

/// Creates the first free file of `numbered(path, k)` for k from `next` on, never replacing
/// one that exists; `next` moves past the name taken.
fn create_free(path: &Path, next: &mut u64) -> Result<(File, PathBuf)> {
    loop {
        let candidate = numbered(path, *next);
        *next += 1;
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
        {
            Ok(f) => return Ok((f, candidate)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => bail!("{}: cannot create: {e}", candidate.display()),
        }
    }
}

/// A connection's stream whose read timeout reads as one clear message. The timeout holds
/// until the capture's header has arrived: a peer that never sends one cannot keep a
/// connection slot, while a recording program may go quiet for as long as it likes.
struct Idle {
    stream: TcpStream,
    after: Duration,
    received: u64,
    heard: Heard,
}

impl Read for Idle {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.stream.read(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no capture header received in {} s: connection closed",
                    self.after.as_secs()
                ),
            ),
            _ => e,
        })?;
        let before = self.received;
        self.received += n as u64;
        if n > 0 {
            let _ = self
                .heard
                .last
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |l| {
                    (l != u64::MAX).then(|| ms_since(self.heard.started))
                });
        }
        let header = tickscope_timeline::tscap::HEADER_LEN as u64;
        if before < header && self.received >= header {
            // The header is in: from now on the program's silence is not the peer's fault.
            let _ = self.stream.set_read_timeout(None);
        }
        Ok(n)
    }
}

/// The file, and the viewer's copy (whose failure never stops the file).
struct Tee(File, Option<tickscope_view::capture::Feed>);

impl std::io::Write for Tee {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(buf)?;
        if let Some(f) = &mut self.1 {
            if f.write_all(buf).is_err() {
                self.1 = None;
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Records one connection into `path`; returns true if it delivered a capture (complete or
/// not).
fn serve(
    stream: TcpStream,
    file: Tee,
    path: PathBuf,
    quiet: bool,
    idle: Duration,
    heard: Heard,
) -> bool {
    let name = path.display().to_string();
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
                    say!("tickscope: {line}");
                }
            }
        })
    });
    // Borrowed by `record`, so that the connection stays open until its outcome is settled
    // below (a file that received nothing is removed before the peer sees the end).
    let mut input = BufReader::with_capacity(
        1 << 16,
        Idle {
            stream,
            after: idle,
            received: 0,
            heard,
        },
    );
    let result = record(&mut input, &name, file, &live);
    done.store(true, Ordering::Relaxed);
    if let Some(p) = printer {
        let _ = p.join();
    }
    let delivered = match result {
        Ok(rec) => {
            for w in &rec.warnings {
                say!("tickscope: warning: {w}");
            }
            if rec.stopped.is_some() {
                say!(
                    "tickscope: {name}: valid up to byte {}, its last complete chunk ({} events kept)",
                    rec.bytes, rec.events
                );
            } else {
                say!(
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
            say!("tickscope: error: {e}");
            // Nothing was written: a stream that is not a capture leaves no file. The file
            // is the one this connection created (create_new), never an older one.
            let _ = std::fs::remove_file(&path);
            false
        }
        Err(e) => {
            say!("tickscope: error: {name}: {e}");
            false
        }
    };
    drop(input);
    delivered
}
