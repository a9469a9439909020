//! What goes over the wire: Pyroscope's `push.v1.PushRequest` as protobuf (field numbers
//! from `api/push/v1/push.proto` and `api/types/v1/types.proto` of grafana/pyroscope), the
//! request gzipped, and one HTTP/1.1 POST on a connection of its own.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Where profiles go: `http://[user:password@]host[:port][/path]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Target {
    /// `host:port`.
    pub host: String,
    /// The base path, without a trailing `/` (`""` at the root).
    pub path: String,
    /// Basic authentication from the URL's user and password.
    pub basic: Option<String>,
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, String> {
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => {
                return Err(format!(
                    "{url}: https is not supported yet; push over http to a local Alloy or \
                     Pyroscope, or through a proxy that adds TLS"
                ))
            }
            _ => return Err(format!("{url}: expected http://HOST[:PORT][/PATH]")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let (userinfo, host) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        if host.is_empty() {
            return Err(format!("{url}: no host"));
        }
        let host = if host.contains(':') && !host.ends_with(']') {
            host.to_string()
        } else {
            format!("{host}:80")
        };
        Ok(Target {
            host,
            path: path.to_string(),
            basic: userinfo.map(|u| base64(u.as_bytes())),
        })
    }
}

/// Appends a varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends field `field` as length-delimited `bytes`.
fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
    varint(out, u64::from(field) << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// `push.v1.PushRequest` of one series: `labels` (`types.v1.LabelPair`s), one `RawSample`
/// holding the uncompressed pprof `profile` with its id.
pub(super) fn push_request(labels: &[(String, String)], profile: &[u8], id: &str) -> Vec<u8> {
    let mut series = Vec::with_capacity(profile.len() + 256);
    for (name, value) in labels {
        let mut pair = Vec::new();
        bytes_field(&mut pair, 1, name.as_bytes());
        bytes_field(&mut pair, 2, value.as_bytes());
        bytes_field(&mut series, 1, &pair);
    }
    let mut sample = Vec::with_capacity(profile.len() + 64);
    bytes_field(&mut sample, 1, profile);
    bytes_field(&mut sample, 2, id.as_bytes());
    bytes_field(&mut series, 2, &sample);
    let mut req = Vec::with_capacity(series.len() + 8);
    bytes_field(&mut req, 1, &series);
    req
}

/// `bytes` gzipped.
pub(super) fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a vector cannot fail.
    let _ = e.write_all(bytes);
    e.finish().unwrap_or_default()
}

/// A random UUID (version 4), as the SDKs name each profile.
pub(super) fn uuid() -> String {
    let (a, b) = (
        crate::sys::output::random_u64(),
        crate::sys::output::random_u64(),
    );
    let a = (a & !0xf000) | 0x4000;
    let b = (b & !(0xc << 60)) | (0x8 << 60);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// What an upload came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// 2xx.
    Sent,
    /// Worth another try (Alloy's rule): no connection, a timeout, 429 or 5xx.
    Again(String),
    /// Refused for good (another 4xx, a malformed answer).
    Refused(String),
}

/// POSTs `body` (gzipped protobuf) to `path` of `t`, with `headers`, each step within
/// `timeout`.
pub(super) fn post(
    t: &Target,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
    timeout: Duration,
) -> Outcome {
    let addrs: Vec<_> = match t.host.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => return Outcome::Again(format!("{}: {e}", t.host)),
    };
    let mut conn = None;
    let mut last = String::from("no address");
    for a in addrs {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(c) => {
                conn = Some(c);
                break;
            }
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    let Some(mut c) = conn else {
        return Outcome::Again(last);
    };
    let _ = c.set_read_timeout(Some(timeout));
    let _ = c.set_write_timeout(Some(timeout));
    let mut head = format!(
        "POST {}{path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: tickscope/{}\r\nContent-Type: application/proto\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n",
        t.path,
        t.host,
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    if let Some(b) = &t.basic {
        head.push_str(&format!("Authorization: Basic {b}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    if let Err(e) = c
        .write_all(head.as_bytes())
        .and_then(|()| c.write_all(body))
    {
        return Outcome::Again(format!("sending: {e}"));
    }
    // The status line is all that is needed; the rest is read (bounded) and let go.
    let mut answer = Vec::new();
    let read = (&mut c).take(64 * 1024).read_to_end(&mut answer);
    let line = String::from_utf8_lossy(answer.split(|&b| b == b'\n').next().unwrap_or(&[]))
        .trim()
        .to_string();
    let code = line.split(' ').nth(1).and_then(|c| c.parse::<u16>().ok());
    match (code, read) {
        (Some(c), _) if (200..300).contains(&c) => Outcome::Sent,
        (Some(c), _) if c == 429 || c >= 500 => Outcome::Again(line),
        (Some(_), _) => Outcome::Refused(line),
        (None, Err(e))
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Outcome::Again(format!("no answer within {} s", timeout.as_secs()))
        }
        (None, Err(e)) => Outcome::Again(format!("reading the answer: {e}")),
        (None, Ok(_)) if answer.is_empty() => Outcome::Again("connection closed, no answer".into()),
        (None, Ok(_)) => Outcome::Refused(format!("not an HTTP answer: {line:?}")),
    }
}

/// Standard base64, padded.
pub(super) fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_the_host_path_and_basic_authentication() {
        assert_eq!(
            Target::parse("http://127.0.0.1:4040").unwrap(),
            Target {
                host: "127.0.0.1:4040".into(),
                path: "".into(),
                basic: None
            }
        );
        let t = Target::parse("http://u:p@example.org/prefix/").unwrap();
        assert_eq!(
            (t.host.as_str(), t.path.as_str(), t.basic.as_deref()),
            ("example.org:80", "/prefix", Some("dTpw"))
        );
        assert!(Target::parse("https://x").unwrap_err().contains("https"));
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("http://").is_err());
    }

    #[test]
    fn base64_and_uuids_are_well_formed() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"tickscope:secret"), "dGlja3Njb3BlOnNlY3JldA==");
        let u = uuid();
        let parts: Vec<_> = u.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12], "{u}");
        assert_eq!(&u[14..15], "4", "{u}");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
        assert_ne!(u, uuid());
    }

    #[test]
    fn the_request_is_the_protos_shape() {
        let req = push_request(&[("__name__".into(), "process_cpu".into())], b"PPROF", "id");
        // series (1) { labels (1) { name (1), value (2) }, samples (2) { raw_profile (1), ID (2) } }
        let mut want = vec![0x0a, 0x26, 0x0a, 0x17, 0x0a, 0x08];
        want.extend_from_slice(b"__name__");
        want.extend_from_slice(&[0x12, 0x0b]);
        want.extend_from_slice(b"process_cpu");
        want.extend_from_slice(&[0x12, 0x0b, 0x0a, 0x05]);
        want.extend_from_slice(b"PPROF");
        want.extend_from_slice(&[0x12, 0x02]);
        want.extend_from_slice(b"id");
        assert_eq!(req, want);
    }
}
