//! File descriptors tickscope opens for itself: kept off the program's 0, 1 and 2,
//! close-on-exec, and opened without waiting on a FIFO.

/// Descriptors 0, 1 and 2 are the program's: a descriptor of tickscope's that would land
/// there (the program closed them) is moved to the lowest free number from 3, close-on-exec.
/// On failure `fd` is closed and the error returned.
pub fn above_stdio(fd: libc::c_int) -> std::io::Result<libc::c_int> {
    if !(0..3).contains(&fd) {
        return Ok(fd);
    }
    // SAFETY: duplicates a descriptor this process just opened and owns; no memory involved.
    let high = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    let e = std::io::Error::last_os_error();
    // SAFETY: closes the low duplicate, which this process opened and nothing else holds.
    unsafe { libc::close(fd) };
    if high < 0 {
        return Err(e);
    }
    Ok(high)
}

/// [`above_stdio`] for a file or socket std opened.
pub fn file_above_stdio<F>(f: F) -> std::io::Result<F>
where
    F: std::os::fd::IntoRawFd + std::os::fd::FromRawFd,
{
    let fd = above_stdio(f.into_raw_fd())?;
    // SAFETY: `fd` is open, of the same kind, and owned by nothing else (the original was
    // consumed above).
    Ok(unsafe { F::from_raw_fd(fd) })
}

/// Opens `path` for reading, close-on-exec, never as descriptor 0, 1 or 2.
pub fn open_read(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    file_above_stdio(std::fs::File::open(path)?)
}
