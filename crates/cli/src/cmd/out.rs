//! Output files, written so that nothing the user has is lost: an output that is one of the
//! command's inputs is refused before anything is opened for writing, and every output is
//! written to a temporary file in the target's directory, renamed over the target only when
//! it is complete. A command that fails leaves the old file as it was; one stopped by
//! Ctrl-C, SIGTERM or SIGHUP removes its temporary files before it exits (a thread receives
//! the signals, so the cleanup is ordinary code).

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

use anyhow::{anyhow, bail, Result};

/// `-`: standard output.
pub(crate) fn is_stdout(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Refuses `output` when it is the same file as one of `inputs` (the same device and inode:
/// another name, a hard link or a symlink to it are the same file).
pub(crate) fn refuse_inputs(output: &Path, inputs: &[&Path]) -> Result<()> {
    if is_stdout(output) {
        return Ok(());
    }
    let Ok(out) = std::fs::metadata(output) else {
        return Ok(());
    };
    for input in inputs {
        if let Ok(m) = std::fs::metadata(input) {
            if m.dev() == out.dev() && m.ino() == out.ino() {
                bail!(
                    "refusing to write {}: it is the same file as the input {}",
                    output.display(),
                    input.display()
                );
            }
        }
    }
    Ok(())
}

/// Writes `bytes` to `path` (through a temporary file), or to standard output for `-`.
pub(crate) fn write_output(path: &Path, bytes: &[u8]) -> Result<()> {
    if is_stdout(path) {
        return super::print(bytes);
    }
    let mut out = Output::create(path)?;
    out.file()
        .write_all(bytes)
        .map_err(|e| anyhow!("{}: cannot write: {e}", path.display()))?;
    out.commit()
}

/// Checks that an output can be created at `path` (its directory exists and takes new
/// files) by creating and removing a temporary file there.
pub(crate) fn check_writable(path: &Path) -> Result<()> {
    Output::create(path).map(drop)
}

/// Temporary files being written now: removed if a signal stops the command.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// From the first output on, SIGINT, SIGTERM and SIGHUP remove the temporary files being
/// written, then end the process as the signal would have (exit status 128 + N).
fn remove_outputs_on_signals() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            return;
        };
        let _ = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                if let Some(signal) = signals.forever().next() {
                    // Held until the exit: no output is created or committed meanwhile.
                    let mut files = live();
                    for tmp in files.drain(..) {
                        let _ = std::fs::remove_file(tmp);
                    }
                    std::process::exit(128 + signal);
                }
            });
    });
}

/// An output being written: a temporary file beside the target, renamed over it by
/// [`commit`](Output::commit); dropped without a commit, it is removed and the target is
/// untouched.
pub(crate) struct Output {
    /// The file the user named (a symlink's target when it is one).
    target: PathBuf,
    /// The name given on the command line, for messages.
    shown: PathBuf,
    /// The temporary file; empty once renamed.
    tmp: PathBuf,
    file: Option<File>,
}

impl Output {
    /// Creates the temporary file for `path`: `.NAME.tmp-PID-N` in the same directory.
    pub(crate) fn create(path: &Path) -> Result<Output> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        if path.is_dir() {
            bail!("cannot write {}: it is a directory", path.display());
        }
        // Writing through a symlink replaces the file it points to, not the link.
        let target = match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
            }
            _ => path.to_owned(),
        };
        let Some(name) = target.file_name() else {
            bail!("cannot write {}: not a file name", path.display());
        };
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        };
        loop {
            let mut tmp_name = OsString::from(".");
            tmp_name.push(name);
            tmp_name.push(format!(
                ".tmp-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
            let tmp = dir.join(tmp_name);
            remove_outputs_on_signals();
            // Listed before it exists, so that a signal after the open finds it.
            live().push(tmp.clone());
            match OpenOptions::new().write(true).create_new(true).open(&tmp) {
                Ok(file) => {
                    return Ok(Output {
                        target,
                        shown: path.to_owned(),
                        tmp,
                        file: Some(file),
                    })
                }
                Err(e) => {
                    forget(&tmp);
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        continue;
                    }
                    return Err(dir_error(path, &dir, e));
                }
            }
        }
    }

    /// The temporary file, to write to.
    pub(crate) fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("the file is open until commit")
    }

    /// The temporary file's path, for a program that writes the output by name.
    pub(crate) fn tmp_path(&self) -> &Path {
        &self.tmp
    }

    /// Renames the finished file over the target (keeping an old target's permissions).
    pub(crate) fn commit(mut self) -> Result<()> {
        drop(self.file.take());
        if let Ok(old) = std::fs::metadata(&self.target) {
            let _ = std::fs::set_permissions(&self.tmp, old.permissions());
        }
        let renamed = {
            // Not while a signal's cleanup runs: it would find the file gone or, renamed
            // after it, leave a complete output behind a command that reported a signal.
            let _files = live();
            std::fs::rename(&self.tmp, &self.target)
        };
        renamed.map_err(|e| anyhow!("{}: cannot write: {e}", self.shown.display()))?;
        forget(&self.tmp);
        self.tmp = PathBuf::new();
        Ok(())
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            drop(self.file.take());
            let _ = std::fs::remove_file(&self.tmp);
            forget(&self.tmp);
        }
    }
}

/// Takes `tmp` off the list of files to remove on a signal.
fn forget(tmp: &Path) {
    let mut files = live();
    if let Some(i) = files.iter().position(|f| f == tmp) {
        files.swap_remove(i);
    }
}

/// Why no file can be created in `dir`, the directory of `path`: one line with the cause.
fn dir_error(path: &Path, dir: &Path, e: std::io::Error) -> anyhow::Error {
    if e.kind() == std::io::ErrorKind::NotFound && !dir.exists() {
        // The first missing directory on the way, not only the last one.
        let mut missing = dir;
        while let Some(parent) = missing.parent().filter(|p| !p.as_os_str().is_empty()) {
            if parent.exists() {
                break;
            }
            missing = parent;
        }
        return anyhow!(
            "cannot write {}: the directory {} does not exist",
            path.display(),
            missing.display()
        );
    }
    if dir.exists() && !dir.is_dir() {
        return anyhow!(
            "cannot write {}: {} is not a directory",
            path.display(),
            dir.display()
        );
    }
    anyhow!(
        "cannot write {}: cannot create a file in {}: {e}",
        path.display(),
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tickscope-out-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn an_uncommitted_output_leaves_the_old_file_and_no_temporary() {
        let d = scratch("drop");
        let target = d.join("out.json");
        std::fs::write(&target, "old").unwrap();
        let mut o = Output::create(&target).unwrap();
        o.file().write_all(b"half").unwrap();
        drop(o);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        assert_eq!(names(&d), ["out.json"]);
        let mut o = Output::create(&target).unwrap();
        o.file().write_all(b"new").unwrap();
        o.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(names(&d), ["out.json"]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_symlinked_output_replaces_the_file_it_points_to() {
        let d = scratch("link");
        std::fs::write(d.join("real"), "old").unwrap();
        std::os::unix::fs::symlink("real", d.join("link")).unwrap();
        write_output(&d.join("link"), b"new").unwrap();
        assert!(std::fs::symlink_metadata(d.join("link"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(d.join("real")).unwrap(), "new");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_same_file_under_another_name_is_refused() {
        let d = scratch("same");
        let input = d.join("in");
        std::fs::write(&input, "x").unwrap();
        std::fs::hard_link(&input, d.join("hard")).unwrap();
        std::os::unix::fs::symlink(&input, d.join("soft")).unwrap();
        for out in ["in", "hard", "soft"] {
            let e = refuse_inputs(&d.join(out), &[Path::new("-"), &input]).unwrap_err();
            assert!(e.to_string().contains("same file as the input"), "{e}");
        }
        refuse_inputs(&d.join("other"), &[&input]).unwrap();
        refuse_inputs(Path::new("-"), &[&input]).unwrap();
        let e = check_writable(&d.join("no/such/dir/x")).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot write {}: the directory {} does not exist",
                d.join("no/such/dir/x").display(),
                d.join("no").display()
            )
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
