//! `record`'s own files. Every process of the run writes its profile, and tickscope's
//! messages, into a directory the run creates beside the output: new, mode 0700, with an
//! unpredictable name (`.<output>.tickscope-<pid>-<random>`), so that no other user can plant
//! a link there, read what the run writes, or slip a file of theirs among its profiles.
//! Everything in it is the run's: the programs it exec'd (`profile.<pid>`), the program's
//! own (`profile`), the messages. Kept profiles move out beside the output by hard links,
//! under names that never replace a file. The directory is removed at the end; one left by a
//! run that was killed (`SIGKILL`) is removed by the next run naming the same output.

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
// (`create_new` is `O_CREAT|O_EXCL`: a link at the name is never followed.)
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};

/// The run's private directory (see the module docs); removed with what it holds when
/// dropped.
pub(super) struct RunDir {
    dir: PathBuf,
}

/// The prefix of the run directories for `output`'s file name.
fn prefix(name: &std::ffi::OsStr) -> String {
    format!(".{}.tickscope-", name.to_string_lossy())
}

impl RunDir {
    /// Creates the run's directory beside `output` (an absolute path), and the messages file
    /// in it.
    pub(super) fn create(output: &Path) -> Result<RunDir> {
        // Beside the output, so that what is kept is a hard link away; a device or FIFO's
        // directory (`/dev`) takes no directory of ours: the temporary directory then.
        let special = std::fs::symlink_metadata(output).is_ok_and(|m| {
            let t = m.file_type();
            !t.is_file() && !t.is_dir() && !t.is_symlink()
        });
        let tmp = std::env::temp_dir();
        let parent = match special {
            true => tmp.as_path(),
            false => output.parent().unwrap_or(Path::new(".")),
        };
        let name = output
            .file_name()
            .ok_or_else(|| anyhow!("cannot write {}: not a file name", output.display()))?;
        sweep_stale(parent, &prefix(name));
        let dir = tickscope_sys::output::private_dir(
            parent,
            &format!("{}{}-", prefix(name), std::process::id()),
        )
        .map_err(|e| anyhow!("cannot write {}: {e}", output.display()))?;
        let run = RunDir { dir };
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(run.messages())
            .map_err(|e| anyhow!("cannot create {}: {e}", run.messages().display()))?;
        Ok(run)
    }

    /// Where the program's profile goes (`TICKSCOPE_CPUPROFILE`); a program it execs writes
    /// `profile.<pid>`.
    pub(super) fn profile(&self) -> PathBuf {
        self.dir.join("profile")
    }

    /// Where process `pid` of the run profiles: `profile.<pid>`, as the library names it.
    pub(super) fn profile_of(&self, pid: u32) -> PathBuf {
        self.dir.join(format!("profile.{pid}"))
    }

    /// The messages of the run's processes (`TICKSCOPE_MESSAGES`).
    pub(super) fn messages(&self) -> PathBuf {
        self.dir.join("messages")
    }

    /// The profiles of the programs the run exec'd, by pid: `profile.<pid>`, regular files
    /// (no link) of this user's. Nothing else can be in the directory: no other user can
    /// enter it.
    pub(super) fn children(&self) -> Vec<(u32, PathBuf)> {
        let euid = tickscope_sys::env::euid();
        let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(&self.dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let pid = name.strip_prefix("profile.")?;
                        if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
                            return None;
                        }
                        let m = std::fs::symlink_metadata(e.path()).ok()?;
                        (m.file_type().is_file() && m.uid() == euid)
                            .then(|| Some((pid.parse().ok()?, e.path())))?
                    })
                    .collect()
            })
            .unwrap_or_default();
        found.sort();
        found
    }

    /// Writes the profile of the programs that ended before their first sample in the run's
    /// directory, then keeps it as `<output>.<run>.unsampled` (a later name where that one is
    /// taken); returns its name, or `None` after saying why not.
    pub(super) fn keep_unsampled(
        &self,
        profile: &tickscope_profile::Profile,
        output: &Path,
        run: u32,
    ) -> Option<PathBuf> {
        let from = self.dir.join("unsampled");
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&from);
        let written = created.and_then(|mut f| {
            tickscope_profile::write::write_gz(profile, &mut f).and_then(|()| f.sync_all())
        });
        if let Err(e) = written {
            say!(
                "tickscope: warning: cannot write the profile of the programs that ended before their first sample: {}: {e}",
                output.display()
            );
            return None;
        }
        keep_as(&from, output, &format!(".{run}.unsampled"))
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        empty_and_remove(&self.dir);
    }
}

/// Removes the files directly in `dir` (a directory of this user's run), then `dir`.
fn empty_and_remove(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.filter_map(|e| e.ok()) {
            if e.file_type().is_ok_and(|t| !t.is_dir()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// Removes the run directories in `parent` (`<prefix><pid>-<random>`) that a run killed before
/// its end left: this user's, mode 0700, whose run no longer exists.
fn sweep_stale(parent: &Path, prefix: &str) {
    let euid = tickscope_sys::env::euid();
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.filter_map(|e| e.ok()) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some((pid, random)) = name
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once('-'))
        else {
            continue;
        };
        let shaped = pid.parse::<u32>().is_ok()
            && random.len() == 16
            && random.bytes().all(|b| b.is_ascii_hexdigit());
        let Ok(m) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        let ours = m.is_dir() && m.uid() == euid && m.mode() & 0o777 == 0o700;
        if shaped && ours && !alive(pid) {
            empty_and_remove(&e.path());
        }
    }
}

/// Whether process `pid` runs: it exists and is no zombie (a `record` killed with its parent,
/// re-parented to an init that does not reap, stays one).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(Path::new("/proc").join(pid).join("stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X']))
    })
}

/// Keeps the profiles of the programs the run exec'd as `<output>.<run>.<pid>` (`run`: the
/// program's pid), never replacing a file already there (a later name is taken instead);
/// returns the new names.
pub(super) fn keep_children(children: &[(u32, PathBuf)], output: &Path, run: u32) -> Vec<PathBuf> {
    children
        .iter()
        .filter_map(|(pid, from)| keep_as(from, output, &format!(".{run}.{pid}")))
        .collect()
}

/// Keeps `from` as `<output><suffix>` by a hard link, then removes `from`; where that name
/// is taken, `<output><suffix>-1` and so on (a hard link fails where a file exists: nothing
/// of an earlier run is replaced). The name kept, or `None` after saying why not.
pub(super) fn keep_as(from: &Path, output: &Path, suffix: &str) -> Option<PathBuf> {
    let out_name = output.file_name()?;
    for n in 0..100 {
        let mut name = out_name.to_owned();
        name.push(suffix);
        if n > 0 {
            name.push(format!("-{n}"));
        }
        let to = output.with_file_name(name);
        match std::fs::hard_link(from, &to).or_else(|e| copy_across(e, from, &to)) {
            Ok(()) => {
                let _ = std::fs::remove_file(from);
                return Some(to);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                say!(
                    "tickscope: warning: cannot keep a profile of the run as {}: {e}",
                    to.display()
                );
                return None;
            }
        }
    }
    None
}

/// Where a hard link cannot cross file systems (`EXDEV`: the run's directory in the
/// temporary directory), a copy to a new file (`O_EXCL`: never replacing one).
fn copy_across(e: std::io::Error, from: &Path, to: &Path) -> std::io::Result<()> {
    if e.kind() != std::io::ErrorKind::CrossesDevices {
        return Err(e);
    }
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(to)?;
    let copied = std::fs::File::open(from).and_then(|mut f| std::io::copy(&mut f, &mut out));
    if copied.is_err() {
        let _ = std::fs::remove_file(to);
    }
    copied.map(drop)
}

/// What was at the output's name when the run began (`None`: nothing): device, inode, size
/// and modification time.
pub(super) struct Seen(Option<(u64, u64, u64, i64, i64)>);

impl Seen {
    pub(super) fn of(path: &Path) -> Seen {
        Seen(
            std::fs::symlink_metadata(path)
                .ok()
                .map(|m| (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec())),
        )
    }

    /// Whether another process created, replaced or wrote the file at `path` since.
    pub(super) fn changed(&self, path: &Path) -> bool {
        // A device or FIFO is written into, as the user asked, whatever it is now.
        let special = std::fs::symlink_metadata(path).is_ok_and(|m| {
            let t = m.file_type();
            !t.is_file() && !t.is_symlink() && !t.is_dir()
        });
        !special && Seen::of(path).0 != self.0
    }
}

/// A name for a profile of run `run` kept beside `output` because another process wrote
/// `output` while this run went on: `<output>.<run>`, or `<output>.<run>-N`; the output
/// committed there.
pub(super) fn keep_apart(pending: super::Output, output: &Path, run: u32) -> Result<PathBuf> {
    let mut pending = Some(pending);
    for n in 0..100 {
        let mut name = output.file_name().unwrap_or_default().to_owned();
        name.push(format!(".{run}"));
        if n > 0 {
            name.push(format!("-{n}"));
        }
        let to = output.with_file_name(name);
        // Checked before the rename, which would fail on it and lose the file.
        if std::fs::symlink_metadata(&to).is_ok() {
            continue;
        }
        let p = pending.take().expect("one try at a time");
        return match p.commit_as_new(&to) {
            Ok(()) => Ok(to),
            Err(e) => Err(anyhow!(
                "cannot keep this run's profile as {}: {e}",
                to.display()
            )),
        };
    }
    Err(anyhow!(
        "cannot keep this run's profile beside {}: 100 names taken",
        output.display()
    ))
}
