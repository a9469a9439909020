//! tickscope's own messages: the standard error kept at load (or `record`'s messages file),
//! never the program's descriptor 2 once it closed it.

use crate::fd::file_above_stdio;

/// [`KEPT_STDERR`]: no copy kept; messages go to descriptor 2.
const STDERR_UNKEPT: i32 = -1;
/// [`KEPT_STDERR`]: descriptor 2 was closed when the copy was to be taken; messages are
/// dropped.
const STDERR_CLOSED: i32 = -2;
/// Where tickscope's own messages go: see [`keep_stderr`].
static KEPT_STDERR: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(STDERR_UNKEPT);
/// The kept descriptor's device and inode: a program that closes it and opens a file of its
/// own under the same number gets nothing of ours in that file. Atomics, not a lock: a fork
/// child, and a signal handler, read them whatever another thread was doing.
static KEPT_ID: [std::sync::atomic::AtomicU64; 2] = [
    std::sync::atomic::AtomicU64::new(0),
    std::sync::atomic::AtomicU64::new(0),
];

/// [`KEPT_ID`] as (device, inode).
fn kept_id() -> (u64, u64) {
    use std::sync::atomic::Ordering::SeqCst;
    (KEPT_ID[0].load(SeqCst), KEPT_ID[1].load(SeqCst))
}

/// The device and inode open as `fd`.
fn file_id(fd: libc::c_int) -> Option<(u64, u64)> {
    // SAFETY: stat is plain data; all-zero is a valid value to fill in.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes into `st`, valid for the call; a bad descriptor only fails.
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some((st.st_dev as u64, st.st_ino as u64))
}

/// Keeps the standard error the process has now (a close-on-exec copy above 2) for
/// tickscope's own messages ([`write_stderr`]). If descriptor 2 is closed now, those messages
/// are dropped: a file the program later opens as descriptor 2 is the program's. Called by
/// the preload library when it is loaded.
///
/// With `messages` (the `TICKSCOPE_MESSAGES` path `tickscope record` sets), they go to that
/// file instead, appended, one `write` each; the file must exist (it is never created), so
/// the variable cannot make a file appear. `record` collects them there, so that nothing of
/// tickscope's lands in the stderr of the program it runs. If it cannot be opened, stderr.
pub fn keep_stderr(messages: Option<String>) {
    use std::sync::atomic::Ordering::SeqCst;
    if let Some(path) = messages.filter(|p| !p.is_empty()) {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::IntoRawFd;
        let opened = std::fs::OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(&path)
            .and_then(file_above_stdio);
        if let Ok(f) = opened {
            let fd = f.into_raw_fd();
            if keep(fd) {
                KEPT_IS_MESSAGES.store(true, SeqCst);
                return;
            }
        }
    }
    KEPT_IS_MESSAGES.store(false, SeqCst);
    // SAFETY: duplicates descriptor 2 if it is open; no memory involved.
    let fd = unsafe { libc::fcntl(2, libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF) {
            KEPT_STDERR.store(STDERR_CLOSED, SeqCst);
        }
        return;
    }
    keep(fd);
}

/// Makes `fd` (a descriptor of ours, close-on-exec, above 2) where messages go; closes it and
/// returns false if it cannot be identified.
fn keep(fd: libc::c_int) -> bool {
    use std::sync::atomic::Ordering::SeqCst;
    let Some(id) = file_id(fd) else {
        // SAFETY: closes the descriptor just made, which nothing else holds.
        unsafe { libc::close(fd) };
        return false;
    };
    KEPT_ID[0].store(id.0, SeqCst);
    KEPT_ID[1].store(id.1, SeqCst);
    let old = KEPT_STDERR.swap(fd, SeqCst);
    if old >= 0 {
        // SAFETY: a copy an earlier call made, no longer referenced.
        unsafe { libc::close(old) };
    }
    true
}

/// Writes one message of tickscope's own to the process's standard error: the one kept by
/// [`keep_stderr`] if it was called (nothing if descriptor 2 was closed then, or if the kept
/// copy no longer holds the same file), else descriptor 2. Never fails.
pub fn write_stderr(text: &str) {
    use std::io::Write;
    use std::sync::atomic::Ordering::SeqCst;
    match KEPT_STDERR.load(SeqCst) {
        STDERR_UNKEPT => {
            let _ = std::io::stderr().write_all(text.as_bytes());
        }
        STDERR_CLOSED => {}
        fd => {
            if file_id(fd) != Some(kept_id()) {
                return;
            }
            let mut rest = text.as_bytes();
            while !rest.is_empty() {
                // SAFETY: writes from a live slice to the descriptor kept above.
                let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
                if n > 0 {
                    rest = &rest[n as usize..];
                } else if n < 0
                    && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                {
                    continue;
                } else {
                    return;
                }
            }
        }
    }
}

/// Whether the kept descriptor is `TICKSCOPE_MESSAGES`'s file (`record`'s), not stderr.
static KEPT_IS_MESSAGES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether tickscope's messages go to `TICKSCOPE_MESSAGES`'s file (`record` reads them), not
/// to stderr.
pub fn messages_to_record() -> bool {
    KEPT_IS_MESSAGES.load(std::sync::atomic::Ordering::SeqCst)
}

/// [`write_stderr`] for signal context, to the messages file only.
pub fn write_messages_file_in_signal(line: &[u8]) {
    use std::sync::atomic::Ordering::SeqCst;
    let fd = KEPT_STDERR.load(SeqCst);
    if fd < 0 || !KEPT_IS_MESSAGES.load(SeqCst) {
        return;
    }
    if file_id(fd) != Some(kept_id()) {
        return;
    }
    // One write: the file is opened for appending, and a short line goes in whole.
    // SAFETY: writes from a live slice to the descriptor kept above.
    unsafe { libc::write(fd, line.as_ptr().cast(), line.len()) };
}

/// Prints one warning line to stderr.
pub fn warn(msg: &str) {
    say(&format!("tickscope: warning: {msg}"));
}

/// Prints one line of tickscope's own (a warning, a "profile written") to the process's
/// standard error: the one it had when the preload library was loaded, if that kept it (see
/// [`write_stderr`]).
pub fn say(line: &str) {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    write_stderr(&text);
}

/// Warns that `var` holds `value`, which is not one of `expected`.
pub fn warn_malformed(var: &str, value: &str, expected: &str) {
    warn(&format!(
        "{var}={value:?} is not valid (expected {expected}); using the default"
    ));
}
