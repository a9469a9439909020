//! The endpoint's token: made, kept in a file only this user reads, checked on each request.

use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// 128 unpredictable bits, as 32 hex digits.
pub(super) fn random_token() -> String {
    let r = crate::sys::output::random_u64;
    format!("{:016x}{:016x}", r(), r())
}

/// A token the user chose: long enough not to be guessed, and sendable in a header.
pub(super) fn check_chosen(token: &str) -> io::Result<()> {
    if token.len() < 16 || !token.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "TICKSCOPE_HTTP_TOKEN: at least 16 visible ASCII characters, no ':'",
        ));
    }
    Ok(())
}

/// Writes `token` to `token` in a new directory only this user can enter, in
/// `$XDG_RUNTIME_DIR` (where it is this user's own) or the temporary directory; created
/// `O_EXCL|O_NOFOLLOW`, mode 0600. Returns the file's path.
pub(super) fn write_token_file(token: &str) -> io::Result<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| {
            std::fs::symlink_metadata(d)
                .is_ok_and(|m| m.is_dir() && m.uid() == crate::sys::env::euid())
        });
    let parent = runtime.unwrap_or_else(std::env::temp_dir);
    let dir = crate::sys::output::private_dir(&parent, "tickscope-http-")?;
    let path = dir.join("token");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    f.write_all(token.as_bytes())?;
    f.write_all(b"\n")?;
    Ok(path)
}

/// Removes the token file and its directory (both the server's own).
pub(super) fn remove_token_file(path: &Path) {
    let _ = std::fs::remove_file(path);
    if let Some(dir) = path.parent() {
        let _ = std::fs::remove_dir(dir);
    }
}

/// Whether an `Authorization` header's value carries `token`: `Bearer TOKEN`, or `Basic`
/// with the token as the password.
pub(super) fn allows(value: &[u8], token: &str) -> bool {
    let value = value.trim_ascii();
    let (scheme, rest) = match value.iter().position(|&b| b == b' ') {
        Some(i) => (&value[..i], value[i + 1..].trim_ascii()),
        None => return false,
    };
    if scheme.eq_ignore_ascii_case(b"bearer") {
        return same(rest, token.as_bytes());
    }
    if scheme.eq_ignore_ascii_case(b"basic") {
        let Some(plain) = base64(rest) else {
            return false;
        };
        return match plain.iter().position(|&b| b == b':') {
            Some(i) => same(&plain[i + 1..], token.as_bytes()),
            None => false,
        };
    }
    false
}

/// `a == b` in a time that does not depend on where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// Standard base64 (padding optional); `None` if it is not.
fn base64(text: &[u8]) -> Option<Vec<u8>> {
    let text = text
        .strip_suffix(b"==")
        .or_else(|| text.strip_suffix(b"="))
        .unwrap_or(text);
    if text.len() > 4096 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in text {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_and_basic_carry_the_token_and_nothing_else_does() {
        let t = "0123456789abcdef0123456789abcdef";
        assert!(allows(format!("Bearer {t}").as_bytes(), t));
        assert!(allows(format!("bearer  {t} ").as_bytes(), t));
        // "tickscope:TOKEN" in base64, as Go's client sends a URL's user and password.
        let basic = "dGlja3Njb3BlOjAxMjM0NTY3ODlhYmNkZWYwMTIzNDU2Nzg5YWJjZGVm";
        assert!(allows(format!("Basic {basic}").as_bytes(), t));
        assert!(!allows(format!("Bearer {t}x").as_bytes(), t));
        assert!(!allows(format!("Bearer {}", &t[1..]).as_bytes(), t));
        assert!(!allows(t.as_bytes(), t));
        assert!(!allows(b"Basic !!!", t));
        // The token as the user name, with another password, is not it.
        assert!(!allows(
            b"Basic MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY6eA==",
            t
        ));
        assert_eq!(base64(b"aGk=").as_deref(), Some(&b"hi"[..]));
        assert!(check_chosen("short").is_err());
        assert!(check_chosen("has:a:colon:in:it").is_err());
        assert!(check_chosen(&random_token()).is_ok());
    }
}
