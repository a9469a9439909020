//! `tickscope view FILE...`: the local web viewer (the `tickscope-view` crate). Checks every
//! file first (one line and exit 2 for a bad one), prints the page's URL with its token as
//! the first line of stdout, opens the browser unless `--no-open`, and serves until Ctrl-C.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;

/// Options of `tickscope view`.
#[derive(clap::Args)]
pub struct Args {
    /// Captures (`.tscap`) and profiles (pprof, gperftools, folded), found by content; or
    /// `tcp://ADDR` to receive live captures there (`TICKSCOPE_CAPTURE=tcp://ADDR ./prog`).
    #[arg(value_name = "FILE")]
    inputs: Vec<String>,
    /// Compare two profiles: a differential flame graph and the table `tickscope diff`
    /// prints.
    #[arg(long, num_args = 2, value_names = ["BASE", "NEW"])]
    diff: Option<Vec<PathBuf>>,
    /// Where to serve the page (default: a free port on 127.0.0.1).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    addr: String,
    /// Accept a non-loopback `--addr` or `tcp://` address: anyone who can reach it can read
    /// these files (with the token) or send captures.
    #[arg(long)]
    allow_remote: bool,
    /// Print the URL without opening a browser.
    #[arg(long)]
    no_open: bool,
    /// Directories to look for sources in (`:`-separated), for the source view.
    #[arg(long, value_name = "DIRS", default_value = "")]
    source_path: String,
}

pub fn run(args: Args) -> Result<()> {
    let config = tickscope_view::Config {
        inputs: args.inputs,
        diff: args.diff.map(|d| (d[0].clone(), d[1].clone())),
        addr: args.addr,
        allow_remote: args.allow_remote,
        source_path: args.source_path,
        max_connections: 64,
        fed: false,
    };
    let started = tickscope_view::start(&config)?;
    for a in &started.live {
        say!("tickscope view: receiving live captures on {a} (TICKSCOPE_CAPTURE=tcp://{a})");
    }
    announce(&started.url, !args.no_open)?;
    started.serve()?;
    Ok(())
}

/// Prints the URL as the first line of stdout, and opens it when asked.
pub fn announce(url: &str, open: bool) -> Result<()> {
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{url}")?;
        out.flush()?;
    }
    say!("tickscope view: serving {url} until Ctrl-C");
    if open {
        open_browser(url);
    }
    Ok(())
}

/// Opens `url` with the desktop's opener, if there is one; says so when there is none.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Reaped when it ends (the opener returns at once; the browser is not its child).
        Ok(mut child) => {
            std::thread::spawn(move || child.wait());
        }
        Err(_) => {
            say!("tickscope view: no `{opener}` here to open a browser: open the URL above")
        }
    }
}
