//! Live captures received over TCP (`tcp://ADDR` among the viewer's inputs).
//!
//! The port takes a stream in the capture format, with no token (the sending side is a
//! program's `TICKSCOPE_CAPTURE=tcp://ADDR`, whose protocol is the core crate's): what keeps
//! other local users out is who the peer is. On Linux a connection is accepted only from a
//! socket owned by the viewer's own user (or root), found in `/proc/net/tcp` and
//! `/proc/net/tcp6` by its address pair, as identd and `ss -e` find it ([`peer_uid`]). With
//! `--allow-remote`, a peer on another host (absent from those tables) is accepted.
//!
//! What a connection may hold is bounded ([`crate::Limits`]): `max_connections` read at
//! once; its header within `live_header_timeout` (then closed); after the header, silence
//! ends it only with `live_idle_timeout` set (by default never: a program that records
//! nothing sends nothing, and the wire protocol has no keep-alive); `live_captures` held at
//! most (a connection is a capture only once its header has arrived); `live_bytes` held by
//! all of them together. Whatever is refused or cut is said on stderr in one line, and in
//! `/api/info`'s `notices`.

use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tickscope_timeline::tscap::Reader;

use crate::Viewer;

/// Accepts live captures on `l`, each read by a thread of its own (at most `max` at once).
pub(crate) fn accept(viewer: Arc<Viewer>, l: TcpListener, max: usize, allow_remote: bool) {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in l.incoming() {
        let Ok(stream) = stream else { continue };
        let peer = stream
            .peer_addr()
            .map_or_else(|_| "tcp".to_owned(), |a| format!("tcp://{a}"));
        if open.load(Relaxed) >= max {
            viewer.notice(format!(
                "refused the live connection from {peer}: {max} are being read already"
            ));
            continue;
        }
        open.fetch_add(1, Relaxed);
        let (viewer, held) = (viewer.clone(), open.clone());
        let spawned = std::thread::Builder::new()
            .name("tickscope-live".into())
            .spawn(move || {
                receive(&viewer, stream, &peer, allow_remote);
                held.fetch_sub(1, Relaxed);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Relaxed);
        }
    }
}

/// Reads one connection, if its peer may send and the limits leave room.
fn receive(viewer: &Viewer, stream: TcpStream, peer: &str, allow_remote: bool) {
    if let Err(why) = check_peer(&stream, allow_remote) {
        viewer.notice(format!("refused the live connection from {peer}: {why}"));
        return;
    }
    let limits = &viewer.limits;
    let held = viewer.live_captures();
    if held >= limits.live_captures {
        viewer.notice(format!(
            "refused the live connection from {peer}: {held} live captures are held already (the most)"
        ));
        return;
    }
    let budget = &viewer.live_budget;
    if budget.spent() || budget.used() >= budget.limit {
        viewer.notice(format!(
            "refused the live connection from {peer}: the live captures' memory ({} in all) is spent",
            budget.limit_text()
        ));
        return;
    }
    let Ok(control) = stream.try_clone() else {
        return;
    };
    // However this ends, the connection is shut down: the pump's blocked read returns.
    let _shut = Shut(&control);
    let header = limits.live_header_timeout;
    let input = Silence {
        stream,
        after: Some(header),
    };
    if control.set_read_timeout(Some(header)).is_err() {
        return;
    }
    // The socket is drained by a thread of its own into a bounded queue, the capture indexed
    // from the queue: read and indexed by one thread, a sender faster than the index (a
    // busy program on a machine of few cores) found the socket full and lost what its own
    // queue could not hold, twice what `capture listen` writing a file lost.
    let input = pump(input);
    // Only a connection that sends a capture's header becomes a capture.
    let reader = match Reader::new(io::BufReader::new(input), peer.to_owned()) {
        Ok(r) => r,
        Err(e) => {
            // The reader's error names the connection.
            viewer.notice(format!("closed the live connection: {e}"));
            return;
        }
    };
    let idle = limits.live_idle_timeout;
    if control.set_read_timeout(idle).is_err() {
        return;
    }
    let capture = viewer.add_live(peer);
    // The Silence inside the reader still says the header's timeout; the socket's is set.
    if let Some(why) = capture.ingest_from(reader) {
        viewer.notice(why);
    }
    if let Some(w) = capture
        .status()
        .warnings
        .iter()
        .find(|w| w.contains(SILENT))
    {
        viewer.notice(format!("closed the live connection: {w}"));
    }
}

/// Shuts a connection down when dropped.
struct Shut<'a>(&'a TcpStream);

impl Drop for Shut<'_> {
    fn drop(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// What a read that timed out says.
const SILENT: &str = "sent nothing for";

/// Blocks read from a connection ahead of the index: at most this many (of at most
/// [`BLOCK`] bytes each, 64 MiB in all) wait to be indexed; past that the pump waits, and
/// the socket, then the sender's own queue, fill up.
const BLOCKS: usize = 256;
const BLOCK: usize = 256 << 10;

/// `input` read on a thread of its own into a queue of [`BLOCKS`] blocks; what is returned
/// reads the queue (a read error, a timeout among them, comes through in its turn).
fn pump(mut input: impl Read + Send + 'static) -> Pumped {
    let (tx, rx) = std::sync::mpsc::sync_channel::<io::Result<Vec<u8>>>(BLOCKS);
    let spawned = std::thread::Builder::new()
        .name("tickscope-live-read".into())
        .spawn(move || loop {
            let mut block = vec![0u8; BLOCK];
            match input.read(&mut block) {
                Ok(0) => return,
                Ok(n) => {
                    block.truncate(n);
                    if tx.send(Ok(block)).is_err() {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        });
    Pumped {
        rx: spawned.ok().map(|_| rx),
        buf: Vec::new(),
        at: 0,
    }
}

/// The reading end of [`pump`]'s queue (`None`: the thread could not start, read nothing).
struct Pumped {
    rx: Option<std::sync::mpsc::Receiver<io::Result<Vec<u8>>>>,
    buf: Vec<u8>,
    at: usize,
}

impl Read for Pumped {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.at == self.buf.len() {
            let Some(rx) = &self.rx else { return Ok(0) };
            match rx.recv() {
                Ok(Ok(b)) => {
                    self.buf = b;
                    self.at = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A connection whose reads time out (the socket's read timeout) with an error saying so.
struct Silence {
    stream: TcpStream,
    after: Option<Duration>,
}

impl Read for Silence {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.stream.read(buf).map_err(|e| {
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) {
                let after = self
                    .stream
                    .read_timeout()
                    .ok()
                    .flatten()
                    .or(self.after)
                    .unwrap_or_default();
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{SILENT} {} s", after.as_secs_f64()),
                )
            } else {
                e
            }
        })
    }
}

/// Ok when the peer of `stream` may send a capture: a socket of this user's or root's on
/// this host, or (with `allow_remote`) one on another host.
fn check_peer(stream: &TcpStream, allow_remote: bool) -> Result<(), String> {
    if !cfg!(target_os = "linux") {
        return Ok(()); // no /proc/net/tcp: the loopback-only rule is all there is
    }
    let (peer, local) = match (stream.peer_addr(), stream.local_addr()) {
        (Ok(p), Ok(l)) => (canonical(p), canonical(l)),
        _ => return Err("its address is unknown".into()),
    };
    let own = own_uid().map_err(|e| format!("cannot tell this process's user: {e}"))?;
    // The peer's entry is there once it has connected; a moment's retry covers a table
    // read mid-update.
    let deadline = Instant::now() + Duration::from_millis(200);
    loop {
        match peer_uid(peer, local) {
            Ok(Some(uid)) if uid == own || uid == 0 => return Ok(()),
            Ok(Some(uid)) => return Err(format!("it belongs to user {uid}, not this one")),
            Ok(None) if Instant::now() >= deadline => {
                return if allow_remote && !is_local(peer.ip()) {
                    Ok(())
                } else {
                    Err("cannot tell whose it is (no socket of that address in /proc/net/tcp; did it close already?)".into())
                };
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("cannot read /proc/net/tcp: {e}")),
        }
    }
}

/// Returns true if and only if `ip` is loopback, where every peer is on this host.
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback()
}

/// This process's user (the owner of `/proc/self`).
fn own_uid() -> io::Result<u32> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata("/proc/self")?.uid())
}

/// An IPv4-mapped IPv6 address as IPv4 (a dual-stack socket's peer is listed either way).
fn canonical(a: SocketAddr) -> SocketAddr {
    match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    }
}

/// The user owning the socket whose own address is `peer` and whose remote address is
/// `local` (the other end of our connection), from `/proc/net/tcp` and `/proc/net/tcp6`;
/// `None` when no entry says (none found, or a TIME_WAIT entry, whose uid column is always
/// 0).
pub fn peer_uid(peer: SocketAddr, local: SocketAddr) -> io::Result<Option<u32>> {
    let mut any = false;
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match std::fs::read_to_string(table) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        any = true;
        if let Some(uid) = text.lines().skip(1).find_map(|l| entry_uid(l, peer, local)) {
            return Ok(uid);
        }
    }
    if !any {
        return Err(io::ErrorKind::NotFound.into());
    }
    Ok(None)
}

/// One line of `/proc/net/tcp{,6}`: `sl local rem st queues tr retrnsmt uid timeout inode`.
/// `Some(uid)` when its addresses are (`peer`, `local`): `Some(None)` when its uid is not
/// a user's (inode 0 and uid 0: a TIME_WAIT entry; a closed socket not yet gone keeps its
/// uid and shows inode 0).
fn entry_uid(line: &str, peer: SocketAddr, local: SocketAddr) -> Option<Option<u32>> {
    let f: Vec<&str> = line.split_whitespace().collect();
    let (own, rem, uid, inode) = (f.get(1)?, f.get(2)?, f.get(7)?, f.get(9)?);
    if parse_addr(own)? != peer || parse_addr(rem)? != local {
        return None;
    }
    let uid: u32 = uid.parse().ok()?;
    Some((uid != 0 || *inode != "0").then_some(uid))
}

/// An address as the kernel prints it: the IP as 32-bit words in host order, in hex, a
/// colon, the port in hex.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| {
        ip.get(i * 8..i * 8 + 8)
            .and_then(|w| u32::from_str_radix(w, 16).ok())
            .map(u32::to_ne_bytes)
    };
    let ip = match ip.len() {
        8 => IpAddr::from(word(0)?),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::from(b)
        }
        _ => return None,
    };
    Some(canonical(SocketAddr::new(ip, port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_the_kernel_prints_them() {
        // Little-endian hosts print 127.0.0.1 as 0100007F.
        let want: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let word = u32::from_ne_bytes([127, 0, 0, 1]);
        assert_eq!(parse_addr(&format!("{word:08X}:1F90")), Some(want));
        let mapped = format!(
            "{:08X}{:08X}{:08X}{word:08X}:1F90",
            0,
            0,
            u32::from_ne_bytes([0, 0, 0xff, 0xff])
        );
        assert_eq!(parse_addr(&mapped), Some(want), "v4-mapped as v4");
        let one = format!(
            "{:08X}{:08X}{:08X}{:08X}:0016",
            0,
            0,
            0,
            u32::from_ne_bytes([0, 0, 0, 1])
        );
        assert_eq!(parse_addr(&one), Some("[::1]:22".parse().unwrap()));
        assert_eq!(parse_addr("zz:1"), None);
    }

    #[test]
    fn the_peer_of_a_loopback_connection_is_this_user() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert_eq!(
            peer_uid(s.peer_addr().unwrap(), s.local_addr().unwrap()).unwrap(),
            Some(own_uid().unwrap())
        );
        assert!(check_peer(&s, false).is_ok());
        drop(c);
    }
}
