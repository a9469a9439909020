//! A loopback receiver that answers as Pyroscope's Push does (or fails as told) and keeps
//! every request, and the decoding of what it got: shared by the library's push tests and
//! the CLI's (`#[path]`).
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as received, and the status it was answered with.
pub struct Got {
    pub path: String,
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub status: u16,
}

/// A receiver on a loopback port: answers each request with the next status of `script`
/// (200 once it is spent) and keeps them all.
pub fn receiver(script: Vec<u16>) -> (String, Arc<Mutex<Vec<Got>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let got = Arc::new(Mutex::new(Vec::new()));
    let (g, mut script) = (got.clone(), VecDeque::from(script));
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            let head_end = loop {
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                match c.read(&mut chunk) {
                    Ok(0) | Err(_) => break 0,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            };
            if head_end == 0 {
                continue;
            }
            let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
            let mut lines = head.lines();
            let path = lines.next().unwrap().split(' ').nth(1).unwrap().to_string();
            let headers: HashMap<String, String> = lines
                .filter_map(|l| l.split_once(": "))
                .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string()))
                .collect();
            let len: usize = headers["content-length"].parse().unwrap();
            while buf.len() < head_end + len {
                match c.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let status = script.pop_front().unwrap_or(200);
            let _ = write!(
                c,
                "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            g.lock().unwrap().push(Got {
                path,
                headers,
                body: buf[head_end..].to_vec(),
                status,
            });
        }
    });
    (format!("http://{addr}"), got)
}

/// The fields of a protobuf message: (number, varint or bytes).
fn fields(mut b: &[u8]) -> Vec<(u64, Result<u64, Vec<u8>>)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = b[0];
            *b = &b[1..];
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                break;
            }
        }
        v
    }
    let mut out = Vec::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        match key & 7 {
            0 => out.push((key >> 3, Ok(varint(&mut b)))),
            2 => {
                let n = varint(&mut b) as usize;
                out.push((key >> 3, Err(b[..n].to_vec())));
                b = &b[n..];
            }
            w => panic!("wire type {w}"),
        }
    }
    out
}

fn bytes(f: &[(u64, Result<u64, Vec<u8>>)], n: u64) -> Vec<Vec<u8>> {
    f.iter()
        .filter(|(k, _)| *k == n)
        .filter_map(|(_, v)| v.as_ref().err().cloned())
        .collect()
}

/// A Push request's labels, its profile's id and its pprof.
pub fn decode(body: &[u8]) -> (Vec<(String, String)>, String, Vec<u8>) {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(body)
        .read_to_end(&mut plain)
        .unwrap();
    let req = fields(&plain);
    let series = bytes(&req, 1);
    assert_eq!(series.len(), 1);
    let s = fields(&series[0]);
    let labels = bytes(&s, 1)
        .iter()
        .map(|p| {
            let f = fields(p);
            let s = |n| String::from_utf8(bytes(&f, n).remove(0)).unwrap();
            (s(1), s(2))
        })
        .collect();
    let samples = bytes(&s, 2);
    assert_eq!(samples.len(), 1);
    let raw = fields(&samples[0]);
    let id = String::from_utf8(bytes(&raw, 2).remove(0)).unwrap();
    (labels, id, bytes(&raw, 1).remove(0))
}

/// A pprof profile's values summed by sample type (packed int64s, two's complement).
pub fn sums(pprof: &[u8]) -> [i64; 2] {
    let t = sums_of::<2>(pprof);
    [t[0], t[1]]
}

/// [`sums`] of a heap profile's four sample types.
pub fn sums4(pprof: &[u8]) -> [i64; 4] {
    sums_of::<4>(pprof)
}

fn sums_of<const N: usize>(pprof: &[u8]) -> [i64; N] {
    let mut t = [0i64; N];
    for s in bytes(&fields(pprof), 2) {
        let f = fields(&s);
        let mut packed = &bytes(&f, 2)[0][..];
        for slot in &mut t {
            let mut v = 0u64;
            for shift in (0..64).step_by(7) {
                let byte = packed[0];
                packed = &packed[1..];
                v |= u64::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    break;
                }
            }
            *slot += v as i64;
        }
    }
    t
}
