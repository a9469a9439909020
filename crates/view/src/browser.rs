//! Opening the page in the user's browser without putting the token in a command line.
//!
//! Every local user can read any process's arguments (`/proc/PID/cmdline`), so `xdg-open
//! URL` would give the token to all of them, through the opener and through the browser it
//! starts. As Jupyter does, the opener is given instead the path of a small HTML file that
//! sends the browser on to the URL ([`Redirect`]): the file is created, mode 0600, in a new
//! directory of an unpredictable name, mode 0700 (under `$XDG_RUNTIME_DIR` when it is a
//! private directory of the user's, else the temporary directory), so that only the user
//! can read it; it is removed once the page has been served with the token, or when the
//! caller drops it (the command ends, Ctrl-C included), or after [`REDIRECT_LIFETIME`].

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long the redirect file is kept at most when the page is never asked for: time for a
/// browser to start cold on a loaded machine and read it.
pub const REDIRECT_LIFETIME: Duration = Duration::from_secs(120);

/// A file, readable by the user alone, that redirects a browser to the viewer's URL.
/// Dropping it removes the file and its directory.
#[derive(Debug)]
pub struct Redirect {
    dir: PathBuf,
    file: PathBuf,
    removed: Mutex<bool>,
}

impl Redirect {
    /// Writes a redirect to `url` into a new private directory under `base` (see the
    /// [module docs](self) for the default).
    pub fn create_in(base: &Path, url: &str) -> io::Result<Redirect> {
        let dir = tickscope_sys::output::private_dir(base, "tickscope-view-")?;
        let file = dir.join("open.html");
        let written = (|| {
            // O_CREAT|O_EXCL: never an existing file, and never through a symlink (open(2):
            // "If O_CREAT and O_EXCL are set ... symbolic link ... open fails").
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&file)?;
            f.write_all(page(url).as_bytes())?;
            f.sync_all()
        })();
        let r = Redirect {
            dir,
            file,
            removed: Mutex::new(false),
        };
        written.map(|()| r)
    }

    /// Writes a redirect to `url` where the [module docs](self) say.
    pub fn create(url: &str) -> io::Result<Redirect> {
        Redirect::create_in(&base_dir(), url)
    }

    /// The file to give the opener.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The private directory that holds it.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes the file and its directory (once; later calls do nothing).
    pub fn remove(&self) {
        let mut removed = self.removed.lock().unwrap_or_else(|p| p.into_inner());
        if !*removed {
            let _ = std::fs::remove_file(&self.file);
            let _ = std::fs::remove_dir(&self.dir);
            *removed = true;
        }
    }
}

impl Drop for Redirect {
    fn drop(&mut self) {
        self.remove();
    }
}

/// `$XDG_RUNTIME_DIR` when it is a directory of this user's that no one else can enter,
/// else the temporary directory.
fn base_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        let d = PathBuf::from(d);
        let own_uid = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
        if let Ok(m) = std::fs::symlink_metadata(&d) {
            if m.is_dir() && Some(m.uid()) == own_uid && m.mode() & 0o077 == 0 {
                return d;
            }
        }
    }
    std::env::temp_dir()
}

/// The redirect page: a meta refresh, and `location.replace` (which keeps the file out of
/// the tab's history).
fn page(url: &str) -> String {
    let attr = url
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    // A JSON string is a JavaScript string; `<` escaped so that it cannot end the script.
    let js = serde_json::to_string(url)
        .unwrap_or_default()
        .replace('<', "\\u003c");
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"0;url={attr}\">\
         <title>tickscope view</title>\
         <script>location.replace({js});</script></head>\
         <body><p><a href=\"{attr}\">Open tickscope view</a></p></body></html>\n"
    )
}

/// Opens the page at `url` with `opener` (`xdg-open`, `open`) through a [`Redirect`]: the
/// opener's arguments hold the file's path, never the token. The opener is reaped when it
/// ends. The redirect is removed after [`REDIRECT_LIFETIME`] if no one removed it before.
pub fn open(url: &str, opener: &str) -> io::Result<Arc<Redirect>> {
    let redirect = Arc::new(Redirect::create(url)?);
    let mut child = std::process::Command::new(opener)
        .arg(redirect.file())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    // The opener returns at once; the browser is not its child.
    std::thread::spawn(move || child.wait());
    let r = redirect.clone();
    let _ = std::thread::Builder::new()
        .name("tickscope-redirect".into())
        .spawn(move || {
            std::thread::sleep(REDIRECT_LIFETIME);
            r.remove();
        });
    Ok(redirect)
}
