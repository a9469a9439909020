//! Output files, opened as a careful tool opens them: the one way every command of the CLI,
//! the capture, the exit summary and the preload library create a file the user named.
//!
//! - A name that does not exist, or names a regular file, is written through a new temporary
//!   file beside it (`.NAME.tmp-RANDOM`, created `O_CREAT|O_EXCL|O_NOFOLLOW` with an
//!   unpredictable name, so no link planted there is followed), renamed over the name only
//!   when complete ([`OutputFile::commit`]): a failed or interrupted write leaves the old
//!   file as it was. The old file's permissions are kept where it was this user's own.
//! - A symbolic link at the name is refused, unless the link and the regular file it leads to
//!   are both this user's own (then that file is written, as above): replacing the file a
//!   link points to is how another user of a shared directory gets root's run to overwrite a
//!   file of their choosing (the kernel's `fs.protected_symlinks` stops a shell's `>` there,
//!   not a rename), and a link another user planted is theirs. Naming the file itself always
//!   writes it.
//! - A device, FIFO or terminal is written into directly, never replaced: `-o /dev/stdout`,
//!   `-o /dev/null` and `-o fifo` work as a shell's `>` does. A socket cannot be opened.
//! - [`Options::in_place_if_new`]: a name that does not exist yet is created itself
//!   (`O_EXCL|O_NOFOLLOW`) and written in place, so that a program killed while writing a
//!   long capture leaves what it wrote readable; a name that exists is still replaced only
//!   once the new file is whole.
//! - [`Options::refuse_if_changed`]: the commit fails, leaving the name alone, when another
//!   process created or replaced the file since it was opened (two runs naming one output).

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// How an output is opened; the default is a plain replace-when-complete output.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// A name that does not exist is created and written in place (see the module docs).
    pub in_place_if_new: bool,
    /// The commit fails with [`io::ErrorKind::AlreadyExists`] if the file at the name is no
    /// longer the one that was there (or not there) at the open.
    pub refuse_if_changed: bool,
}

/// The file at a name, as far as telling it changed goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
}

impl Identity {
    fn of(m: &std::fs::Metadata) -> Identity {
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
        }
    }
}

/// How the bytes reach the name.
#[derive(Debug)]
enum Way {
    /// Through this temporary file, renamed over the name at the commit.
    Replace {
        tmp: PathBuf,
        /// The mode of the old file to give the new one (an old file of this user's).
        mode: Option<u32>,
    },
    /// Into the name itself: a device, FIFO or terminal, or a new file written in place.
    Direct,
}

/// An output being written. Dropped without [`commit`](OutputFile::commit), a temporary file
/// is removed and the name is untouched.
#[derive(Debug)]
pub struct OutputFile {
    file: Option<File>,
    target: PathBuf,
    way: Way,
    /// The file at the name at the open (`None`: there was none).
    before: Option<Identity>,
    options: Options,
}

/// One line's worth of why an output cannot be written, for `cannot write PATH: …`.
fn refused(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

impl OutputFile {
    /// Opens an output at `path` as the module docs say.
    pub fn create(path: &Path) -> io::Result<OutputFile> {
        OutputFile::create_with(path, Options::default())
    }

    /// [`create`](OutputFile::create) with options.
    pub fn create_with(path: &Path, options: Options) -> io::Result<OutputFile> {
        if path.as_os_str().is_empty() {
            return Err(refused("the name is empty".into()));
        }
        // A name that appears between the look and the open is looked at again.
        for _ in 0..8 {
            let meta = match std::fs::symlink_metadata(path) {
                Ok(m) => Some(m),
                Err(e) if e.kind() == io::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            };
            let Some(meta) = meta else {
                if options.in_place_if_new {
                    match new_file(path, 0o666) {
                        Ok(file) => {
                            return Ok(OutputFile {
                                file: Some(file),
                                target: path.to_owned(),
                                way: Way::Direct,
                                before: None,
                                options,
                            })
                        }
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(e),
                    }
                }
                return OutputFile::replacing(path, None, options);
            };
            let kind = meta.file_type();
            if kind.is_symlink() {
                if let Some(file) = own_link_to_own_file(path, &meta) {
                    return OutputFile::create_with(&file, options);
                }
                let to = std::fs::read_link(path)
                    .map(|t| format!(" (to {})", t.display()))
                    .unwrap_or_default();
                return Err(refused(format!(
                    "it is a symbolic link{to}, not both it and the file it leads to of this user's: another user may have planted it; tickscope does not write through it (name the file itself)"
                )));
            }
            if kind.is_dir() {
                return Err(refused("it is a directory".into()));
            }
            if kind.is_socket() {
                return Err(refused("it is a socket".into()));
            }
            if kind.is_file() {
                return OutputFile::replacing(path, Some(&meta), options);
            }
            // A device or FIFO: written into, as a shell's `>` does (a FIFO's open waits for
            // its reader); never replaced by a regular file.
            match open_special(path) {
                Ok(Some(file)) => {
                    return Ok(OutputFile {
                        file: Some(file),
                        target: path.to_owned(),
                        way: Way::Direct,
                        before: Some(Identity::of(&meta)),
                        options,
                    })
                }
                // It became something else meanwhile: look again.
                Ok(None) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(refused(
            "it keeps changing while it is opened (another process is creating and removing it)"
                .into(),
        ))
    }

    /// A temporary file beside `path`, to replace the file there (`old`, if any) at the commit.
    fn replacing(
        path: &Path,
        old: Option<&std::fs::Metadata>,
        options: Options,
    ) -> io::Result<OutputFile> {
        let Some(name) = path.file_name() else {
            return Err(refused("it is not a file name".into()));
        };
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        // Only this user's own file's permissions pass to the new one (not, say, the 0666
        // of a file another user planted at the name for root's output), set-id bits never.
        let euid = crate::env::euid();
        let mode = old.filter(|m| m.uid() == euid).map(|m| m.mode() & 0o777);
        let mut last = None;
        for _ in 0..16 {
            let mut tmp_name = OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(format!(".tmp-{:016x}", random_u64()));
            let tmp = dir.join(tmp_name);
            match new_file(&tmp, 0o666) {
                Ok(file) => {
                    return Ok(OutputFile {
                        file: Some(file),
                        target: path.to_owned(),
                        way: Way::Replace { tmp, mode },
                        before: old.map(Identity::of),
                        options,
                    })
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(in_dir(dir, e)),
            }
        }
        Err(in_dir(dir, last.expect("the loop ran")))
    }

    /// The open file, to write to.
    pub fn file(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("the file is open until the commit")
    }

    /// The name the output goes to.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The temporary file, where the output is written through one (a program writing the
    /// output by name writes there); `None` where it is written in place.
    pub fn tmp_path(&self) -> Option<&Path> {
        match &self.way {
            Way::Replace { tmp, .. } => Some(tmp),
            Way::Direct => None,
        }
    }

    /// Whether the file at the name is no longer the one there at the open (another process
    /// wrote it meanwhile). Always false for an output written in place.
    pub fn changed(&self) -> bool {
        if matches!(self.way, Way::Direct) {
            return false;
        }
        match std::fs::symlink_metadata(&self.target) {
            Ok(m) => self.before != Some(Identity::of(&m)),
            Err(_) => self.before.is_some(),
        }
    }

    /// Finishes the output: a temporary file is renamed over the name (unless the name is no
    /// longer a regular file or absent: then it is refused and removed, the name untouched).
    pub fn commit(mut self) -> io::Result<()> {
        let file = self.file.take().expect("committed once");
        let Way::Replace { tmp, mode } = &self.way else {
            return Ok(());
        };
        if let Some(mode) = mode {
            use std::os::unix::fs::PermissionsExt;
            let _ = file.set_permissions(std::fs::Permissions::from_mode(*mode));
        }
        drop(file);
        match std::fs::symlink_metadata(&self.target) {
            Ok(m) if !m.file_type().is_file() => {
                return Err(refused(format!(
                    "it became a {} while the output was written: left as it is",
                    kind_name(&m)
                )))
            }
            _ => {}
        }
        if self.options.refuse_if_changed && self.changed() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "another process wrote it while this output was made",
            ));
        }
        let renamed = match (self.options.refuse_if_changed, self.before) {
            // No file was there: one that appeared since is never replaced.
            (true, None) => rename_noreplace(tmp, &self.target),
            _ => std::fs::rename(tmp, &self.target),
        };
        renamed?;
        self.way = Way::Direct;
        Ok(())
    }

    /// Keeps the finished output under `name` (a new name: an existing file is never
    /// replaced, [`io::ErrorKind::AlreadyExists`]) instead of the one it was opened for.
    pub fn commit_as_new(mut self, name: &Path) -> io::Result<()> {
        drop(self.file.take());
        let Way::Replace { tmp, .. } = &self.way else {
            return Err(refused("it is written in place".into()));
        };
        rename_noreplace(tmp, name)?;
        self.way = Way::Direct;
        Ok(())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        if let Way::Replace { tmp, .. } = &self.way {
            drop(self.file.take());
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// The regular file the link `path` (`link`: its own metadata) leads to, where the link and
/// that file are both this user's: a link another user planted is never followed.
fn own_link_to_own_file(path: &Path, link: &std::fs::Metadata) -> Option<PathBuf> {
    let euid = crate::env::euid();
    if link.uid() != euid {
        return None;
    }
    let file = std::fs::canonicalize(path).ok()?;
    let m = std::fs::symlink_metadata(&file).ok()?;
    (m.file_type().is_file() && m.uid() == euid).then_some(file)
}

/// What a file that is not a regular one is, in words.
fn kind_name(m: &std::fs::Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_symlink() {
        "symbolic link"
    } else if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else {
        "device"
    }
}

/// Creates `path`, which must not exist (no link at it is followed), close-on-exec, above
/// descriptor 2.
fn new_file(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .and_then(crate::fd::file_above_stdio)
}

/// Opens a device or FIFO at `path` for writing; `None` if what it opened is a regular file
/// or directory (the name was replaced between the look and the open).
fn open_special(path: &Path) -> io::Result<Option<File>> {
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .and_then(crate::fd::file_above_stdio)?;
    let t = file.metadata()?.file_type();
    Ok((!t.is_file() && !t.is_dir()).then_some(file))
}

/// Renames `from` to `to` unless `to` exists (`renameat2(RENAME_NOREPLACE)`; where the file
/// system lacks it, a hard link then an unlink, which fail alike on an existing name).
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| refused("the name holds a NUL byte".into()))
    };
    let (f, t) = (c(from)?, c(to)?);
    // SAFETY: both paths are NUL-terminated strings that live across the call.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            f.as_ptr(),
            libc::AT_FDCWD,
            t.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if r == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOSYS) => {
            std::fs::hard_link(from, to)?;
            std::fs::remove_file(from)
        }
        _ => Err(e),
    }
}

/// Why no file could be created in `dir`, with the directory named.
fn in_dir(dir: &Path, e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::NotFound && !dir.exists() {
        // The first missing directory on the way, not only the last one.
        let mut missing = dir;
        while let Some(parent) = missing.parent().filter(|p| !p.as_os_str().is_empty()) {
            if parent.exists() {
                break;
            }
            missing = parent;
        }
        return io::Error::new(
            io::ErrorKind::NotFound,
            format!("the directory {} does not exist", missing.display()),
        );
    }
    if dir.exists() && !dir.is_dir() {
        return io::Error::new(e.kind(), format!("{} is not a directory", dir.display()));
    }
    io::Error::new(
        e.kind(),
        format!("cannot create a file in {}: {e}", dir.display()),
    )
}

/// 64 unpredictable bits (`getrandom`); where the kernel has none to give, the clock and
/// counters, which an attacker cannot read from outside either (the name is also created
/// with `O_EXCL`, so a guess only makes this try another).
pub fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: writes at most 8 bytes into `buf`, which lives across the call.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), libc::GRND_NONBLOCK) };
    if n == 8 {
        return u64::from_ne_bytes(buf);
    }
    use std::hash::{BuildHasher, Hasher};
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// Creates a new directory only this user can enter (mode 0700) in `parent`, named
/// `PREFIX` and an unpredictable suffix; never one that exists (a link planted at the name
/// included: `mkdir` does not follow it). Its mode is 0700 whatever the umask took away.
pub fn private_dir(parent: &Path, prefix: &str) -> io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let mut last = None;
    for _ in 0..16 {
        let dir = parent.join(format!("{prefix}{:016x}", random_u64()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {
                // The umask can only have taken bits away (a umask of 0277 leaves a
                // directory its owner cannot write into): put them back.
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                    .map_err(|e| in_dir(parent, e))?;
                return Ok(dir);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(in_dir(parent, e)),
        }
    }
    Err(in_dir(parent, last.expect("the loop ran")))
}

#[cfg(test)]
mod tests;
