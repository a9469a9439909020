//! Reading a profile: from a file (streamed where it is protobuf) or from memory, the reader
//! picked by content, gzip unwrapped within [`Limits`].

use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

use crate::error::{Error, ErrorKind};
use crate::limits::Limits;
use crate::model::{Format, Profile};
use crate::{folded, legacy, pprof};

/// How many bytes the readers look at to decide whether data can be a profile at all,
/// before anything is read whole.
const SNIFF: usize = 4096;

/// Reads the profile at `path`, picking the reader by content.
///
/// A regular file is streamed: protobuf is decoded straight from the (decompressing) file,
/// read twice, so neither the compressed nor the decompressed bytes are held. Only when it is
/// not protobuf are the bytes read whole for the other readers.
pub fn load(path: impl AsRef<Path>) -> Result<Profile, Error> {
    load_with(path, Limits::default())
}

/// [`load`] with other [`Limits`].
pub fn load_with(path: impl AsRef<Path>, limits: Limits) -> Result<Profile, Error> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let open_file = || std::fs::File::open(path);
    let file = open_file().map_err(|e| Error::io(&name, ErrorKind::Open, e))?;
    let meta = file.metadata().ok();
    let regular = meta.as_ref().is_some_and(|m| m.is_file());
    let size = meta.map_or(0, |m| m.len());
    let mut head = [0u8; SNIFF];
    let got = read_head(&file, &mut head).map_err(|e| Error::io(&name, ErrorKind::Io, e))?;
    if got == 0 {
        return Err(Error::new(&name, ErrorKind::Empty));
    }
    let gz = head[..got].starts_with(&[0x1f, 0x8b]);
    // Decided from the first bytes: data no reader could take is refused before anything
    // is read whole (`top /dev/zero` read 4 GiB into memory to say "not a profile").
    if !gz && !could_be_profile(&head[..got]) {
        return Err(Error::new(
            &name,
            ErrorKind::Unrecognized {
                head: head.iter().take(8).copied().collect(),
            },
        ));
    }
    if regular {
        let (limit, ratio_of) = match gz {
            true => limits.for_gzip(size),
            false => (limits.absolute(), None),
        };
        let errors = FileErrors::default();
        let open = || -> std::io::Result<Box<dyn Read + '_>> {
            let file = open_file().map_err(|e| errors.record(e))?;
            let f = std::io::BufReader::with_capacity(
                1 << 16,
                Recorded {
                    inner: file,
                    errors: &errors,
                },
            );
            Ok(if gz {
                Box::new(flate2::bufread::MultiGzDecoder::new(f))
            } else {
                Box::new(f)
            })
        };
        let whole = || {
            let mut data = Vec::new();
            open_file()?
                .take(limits.absolute() + 1)
                .read_to_end(&mut data)?;
            Ok(Cow::Owned(data))
        };
        return parse_stream(&open, gz, &name, (limit, ratio_of), &whole, &|| {
            errors.0.borrow_mut().take()
        });
    }
    // A pipe or device is read once, whole.
    let mut data = head[..got].to_vec();
    file.take(limits.absolute() + 1)
        .read_to_end(&mut data)
        .map_err(|e| Error::io(&name, ErrorKind::Io, e))?;
    if data.len() as u64 > limits.absolute() {
        return Err(Error::new(
            &name,
            ErrorKind::TooLarge {
                limit: limits.absolute(),
            },
        ));
    }
    parse_with(&data, &name, limits)
}

/// Returns true if and only if `head`, the first bytes of (decompressed) data, could begin
/// a profile that one of the readers takes: protobuf, a gperftools or legacy text header,
/// folded stacks.
fn could_be_profile(head: &[u8]) -> bool {
    if pprof::looks_like_proto(head) {
        return true;
    }
    // Text formats are judged on whole lines.
    let lines = match head.iter().rposition(|&b| b == b'\n') {
        Some(i) if head.len() == SNIFF => &head[..=i],
        _ => head,
    };
    legacy::parse(head).is_some()
        || legacy::parse(lines).is_some()
        || folded::parse(lines).is_some()
        // A first line longer than what is sniffed (folded stacks with a frame of 10,000
        // characters): text that could begin one is read on, and the parser decides.
        || (head.len() == SNIFF && !head.contains(&b'\n') && text_line(head))
}

/// Whether `head` could be the start of a line of text: UTF-8 (a character cut at its end
/// allowed), no control character but tabs. Zeros, a device's or a binary's bytes are not.
fn text_line(head: &[u8]) -> bool {
    let valid = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    valid && !head.iter().any(|&b| b < 0x20 && b != b'\t' || b == 0x7f)
}

/// The first error reading or opening the file itself, as opposed to the decompressor's:
/// a failing disk is reported as such, with its cause, not as damaged gzip data.
#[derive(Default)]
struct FileErrors(std::cell::RefCell<Option<std::io::Error>>);

impl FileErrors {
    /// Keeps (a copy of) the first error and passes it on.
    fn record(&self, e: std::io::Error) -> std::io::Error {
        self.0
            .borrow_mut()
            .get_or_insert_with(|| std::io::Error::new(e.kind(), e.to_string()));
        e
    }
}

/// A reader whose errors are recorded in `errors`.
struct Recorded<'a, R> {
    inner: R,
    errors: &'a FileErrors,
}

impl<R: Read> Read for Recorded<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf).map_err(|e| self.errors.record(e))
    }
}

/// Reads up to `head.len()` bytes from the start of `file` (fewer only at its end).
/// (Reading a device such as /dev/zero, a full buffer.)
fn read_head(mut file: &std::fs::File, head: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < head.len() {
        match file.read(&mut head[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// Parses a profile held in memory; `name` is used in errors.
pub fn parse(data: &[u8], name: &str) -> Result<Profile, Error> {
    parse_with(data, name, Limits::default())
}

/// [`parse`] with a lower decompression cap (fuzzing uses a small one).
pub fn parse_with_limit(data: &[u8], name: &str, limit: u64) -> Result<Profile, Error> {
    parse_with(
        data,
        name,
        Limits {
            max_decompressed: Some(limit),
        },
    )
}

/// [`parse`] with other [`Limits`].
pub fn parse_with(data: &[u8], name: &str, limits: Limits) -> Result<Profile, Error> {
    if data.is_empty() {
        return Err(Error::new(name, ErrorKind::Empty));
    }
    let gz = data.starts_with(&[0x1f, 0x8b]);
    let limit = match gz {
        true => limits.for_gzip(data.len() as u64),
        false => (limits.absolute(), None),
    };
    let open = || -> std::io::Result<Box<dyn Read + '_>> {
        Ok(if gz {
            Box::new(flate2::bufread::MultiGzDecoder::new(data))
        } else {
            Box::new(data)
        })
    };
    parse_stream(&open, gz, name, limit, &|| Ok(Cow::Borrowed(data)), &|| {
        None
    })
}

/// Picks the reader: the tickscope capture magic is refused with a pointer to the command
/// that reads it; protobuf is tried on the stream; when it does not parse, `whole` reads
/// the (possibly compressed) bytes for the legacy readers, then folded stacks.
/// `file_error` gives the file's own I/O error, if reading it failed. `limit`: the most the
/// data may decompress to, and the compressed size when a ratio to it set that limit.
fn parse_stream<'d>(
    open: &pprof::Open<'_>,
    gz: bool,
    name: &str,
    (limit, ratio_of): (u64, Option<u64>),
    whole: &dyn Fn() -> std::io::Result<Cow<'d, [u8]>>,
    file_error: &dyn Fn() -> Option<std::io::Error>,
) -> Result<Profile, Error> {
    // Which limit was met, said as such.
    let kind = |k: ErrorKind| match (k, ratio_of) {
        (ErrorKind::TooLarge { limit }, Some(compressed)) => {
            ErrorKind::TooCompressed { compressed, limit }
        }
        (k, _) => k,
    };
    let read_failed = |k: ErrorKind| match file_error() {
        Some(e) => Error::io(name, ErrorKind::Io, e),
        None => Error::new(name, kind(k)),
    };
    let mut head = Vec::new();
    open()
        .and_then(|r| r.take(8).read_to_end(&mut head))
        .map_err(|e| read_failed(pprof::read_error(&e, gz)))?;
    if head.is_empty() {
        return Err(Error::new(name, ErrorKind::Empty));
    }
    let proto_err = match pprof::decode_stream(open, gz, limit) {
        Ok(p) => return finish(p, name),
        Err(k @ (ErrorKind::Decompress { .. } | ErrorKind::TooLarge { .. } | ErrorKind::Io)) => {
            return Err(read_failed(k))
        }
        Err(e) => e,
    };
    // Not protobuf. Before the other readers take the data whole, its first bytes must look
    // like something they read: a gzip bomb of zeros is refused here, not after 4 GiB.
    let mut head = Vec::new();
    open()
        .and_then(|r| r.take(SNIFF as u64).read_to_end(&mut head))
        .map_err(|e| read_failed(pprof::read_error(&e, gz)))?;
    if !could_be_profile(&head) {
        return Err(Error::new(
            name,
            ErrorKind::Unrecognized {
                head: head.iter().take(8).copied().collect(),
            },
        ));
    }
    let mut data = whole().map_err(|e| Error::io(name, ErrorKind::Io, e))?;
    if data.len() as u64 > limit && !gz {
        return Err(Error::new(name, ErrorKind::TooLarge { limit }));
    }
    if gz {
        data = Cow::Owned(gunzip(&data, limit).map_err(|k| Error::new(name, kind(k)))?);
    }
    if let Some(result) = legacy::parse(&data) {
        return result
            .map_err(|k| Error::new(name, k))
            .and_then(|p| finish(p, name));
    }
    if let Some(result) = folded::parse(&data) {
        return result
            .map_err(|k| Error::new(name, k))
            .and_then(|p| finish(p, name));
    }
    // Neither: if the bytes started like a protobuf profile, its error says more than
    // "unrecognised".
    if pprof::looks_like_proto(&data) {
        return Err(Error::new(name, proto_err));
    }
    Err(Error::new(
        name,
        ErrorKind::Unrecognized {
            head: data.iter().take(8).copied().collect(),
        },
    ))
}

/// Checks a freshly read profile and lets go of its spare capacity.
fn finish(mut p: Profile, name: &str) -> Result<Profile, Error> {
    p.check().map_err(|k| Error::new(name, k))?;
    p.seal();
    Ok(p)
}

/// Parses raw (not gzip) bytes with one reader only, no detection: what each fuzz target
/// drives. `None` when that reader does not recognise the data.
pub fn parse_format(data: &[u8], format: Format) -> Option<Result<Profile, ErrorKind>> {
    let result = match format {
        Format::Pprof => Some(pprof::decode(data)),
        Format::GperftoolsCpu | Format::LegacyText => legacy::parse(data),
        Format::Folded => folded::parse(data),
    }?;
    Some(result.and_then(|p| p.check().map(|()| p)))
}

fn gunzip(data: &[u8], limit: u64) -> Result<Vec<u8>, ErrorKind> {
    let mut out = Vec::new();
    // MultiGzDecoder: concatenated gzip members are one stream, as Go's gzip reader reads them.
    let mut decoder = flate2::read::MultiGzDecoder::new(data).take(limit + 1);
    decoder
        .read_to_end(&mut out)
        .map_err(|e| ErrorKind::Decompress {
            detail: e.to_string(),
        })?;
    if out.len() as u64 > limit {
        return Err(ErrorKind::TooLarge { limit });
    }
    Ok(out)
}
