//! Output files, written so that nothing the user has is lost: an output that is one of the
//! command's inputs is refused before anything is opened for writing, and every output is
//! opened by the platform layer's one function (`tickscope_sys::output`): written to
//! a temporary file with an unpredictable name in the target's directory, renamed over the
//! target only when it is complete; never through a symbolic link at the name; a device or
//! FIFO written into, never replaced. A command that fails leaves the old file as it was; one stopped by
//! Ctrl-C, SIGTERM or SIGHUP removes its temporary files before it exits (a thread receives
//! the signals, so the cleanup is ordinary code).

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use tickscope_sys::output::{self, OutputFile};

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

/// Says where a newer, unfinished output of the same name lies beside `path`: the temporary
/// file (`.NAME.tmp-…`) of a writer that never finished, a program killed while it wrote a
/// capture over an older one (which is kept, whole, at the name until the new one is).
pub(crate) fn say_unfinished(path: &Path) {
    let (Some(name), Some(meta)) = (path.file_name(), std::fs::metadata(path).ok()) else {
        return;
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let file = e.file_name().to_string_lossy().into_owned();
        let newer = e
            .metadata()
            .ok()
            .and_then(|m| Some(m.modified().ok()? > meta.modified().ok()?));
        if file.starts_with(&prefix) && newer == Some(true) {
            say!(
                "tickscope: note: {} is newer than {} and unfinished: a writer (a program capturing over this file) stopped before it was whole; `--salvage` reads it",
                dir.join(&file).display(),
                path.display()
            );
        }
    }
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
    // A device or FIFO is written into (a FIFO's open would wait for its reader here).
    if std::fs::symlink_metadata(path).is_ok_and(|m| {
        let t = m.file_type();
        !t.is_file() && !t.is_dir() && !t.is_symlink()
    }) {
        return Ok(());
    }
    Output::create(path).map(drop)
}

/// Temporary files being written now: removed if a signal stops the command.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// What else a signal's cleanup removes (a viewer's redirect file), run before the exit.
type Cleanup = Box<dyn FnOnce() + Send>;
static CLEANUPS: Mutex<Vec<Cleanup>> = Mutex::new(Vec::new());

/// From the first output (or [`at_signal`]) on, SIGINT, SIGTERM and SIGHUP remove the
/// temporary files being written and run what [`at_signal`] registered, then end the process
/// as the signal would have (exit status 128 + N). One thread takes the signals (ordinary
/// code, not a handler), so that no second cleanup races the first to the exit.
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
                    let cleanups =
                        std::mem::take(&mut *CLEANUPS.lock().unwrap_or_else(|p| p.into_inner()));
                    for f in cleanups {
                        f();
                    }
                    std::process::exit(128 + signal);
                }
            });
    });
}

/// Runs `cleanup` if SIGINT, SIGTERM or SIGHUP ends the command (see
/// [`remove_outputs_on_signals`]).
pub(crate) fn at_signal(cleanup: impl FnOnce() + Send + 'static) {
    CLEANUPS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Box::new(cleanup));
    remove_outputs_on_signals();
}

/// An output being written ([`tickscope_sys::output`], the one way tickscope opens
/// an output): a new or regular file is written to a temporary file beside it, renamed over it
/// by [`commit`](Output::commit) (dropped without a commit, it is removed and the target is
/// untouched); a symlink at the name is refused; a device or FIFO is written into.
pub(crate) struct Output {
    /// `None` once committed.
    inner: Option<OutputFile>,
    /// The name given on the command line, for messages.
    shown: PathBuf,
    /// The temporary file, listed for removal on a signal.
    tmp: Option<PathBuf>,
}

impl Output {
    /// Opens the output `path`.
    pub(crate) fn create(path: &Path) -> Result<Output> {
        Output::create_with(path, output::Options::default())
    }

    /// [`create`](Output::create) with options.
    pub(crate) fn create_with(path: &Path, options: output::Options) -> Result<Output> {
        remove_outputs_on_signals();
        // Held while the file is created and listed, so that a signal's cleanup sees it.
        let mut files = live();
        let inner = OutputFile::create_with(path, options)
            .map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
        let tmp = inner.tmp_path().map(Path::to_owned);
        files.extend(tmp.clone());
        Ok(Output {
            inner: Some(inner),
            shown: path.to_owned(),
            tmp,
        })
    }

    /// The file to write to.
    pub(crate) fn file(&mut self) -> &mut File {
        self.inner.as_mut().expect("open until the commit").file()
    }

    /// Whether another process replaced or created the file at the name since it was opened.
    pub(crate) fn changed(&self) -> bool {
        self.inner.as_ref().is_some_and(OutputFile::changed)
    }

    /// Renames the finished file over the target (keeping an old target's permissions).
    pub(crate) fn commit(mut self) -> Result<()> {
        let inner = self.inner.take().expect("committed once");
        // Not while a signal's cleanup runs: it would find the file gone or, renamed after
        // it, leave a complete output behind a command that reported a signal.
        let _files = live();
        inner
            .commit()
            .map_err(|e| anyhow!("{}: cannot write: {e}", self.shown.display()))
    }

    /// Keeps the finished file under `name`, a new name (never replacing a file).
    pub(crate) fn commit_as_new(mut self, name: &Path) -> std::io::Result<()> {
        let inner = self.inner.take().expect("committed once");
        let _files = live();
        inner.commit_as_new(name)
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        // The temporary file (if any) is removed by the inner output's drop.
        drop(self.inner.take());
        if let Some(tmp) = &self.tmp {
            forget(tmp);
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
    fn a_link_of_the_users_own_writes_the_file_it_points_to() {
        let d = scratch("link");
        std::fs::write(d.join("real"), "old").unwrap();
        std::os::unix::fs::symlink("real", d.join("link")).unwrap();
        write_output(&d.join("link"), b"new").unwrap();
        assert!(std::fs::symlink_metadata(d.join("link"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(d.join("real")).unwrap(), "new");
        assert_eq!(names(&d), ["link", "real"]);
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
