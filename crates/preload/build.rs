//! libtickscope.so without libgcc_s.so.1: Rust's unwinder (for panics, which every export
//! catches) is linked in from the compiler's static `libgcc_eh.a` instead.
//!
//! Why: under `tickscope record`, every process a script runs loads the library, and loading
//! libgcc_s.so.1 cost ~80 µs of each one's start on an EPYC VM, ~10 % of a profiled
//! `/bin/true`: one more file to map and relocate, and its constructor
//! (`__cpu_indicator_init`), which runs a dozen `cpuid`s, each a trap to the hypervisor.
//! The library's own code never asks for the CPU's features that way.
//!
//! How: a directory first in the link search path holds a `libgcc_s.so` that is a linker
//! script naming the static archive, so both `-lgcc_s`s of the link (the `unwind` crate's and
//! the C driver's own for `-shared`) take the archive. Where the compiler has no
//! `libgcc_eh.a` (or this is not a GNU/Linux target), nothing changes and the library needs
//! libgcc_s.so.1 as before.
//!
//! The archive's unwinder stays private to the library: a cdylib exports only its
//! `#[no_mangle]` functions, so a C++ program's own unwinder (libgcc_s) is untouched.
//!
//! Also: the code a program that ends before its first sample runs (the constructor, the
//! small thread that waits, the line at exit) is placed together, by the linker script
//! `start_path.ld` (see there and `bench/start_path.py`): one window of page faults in each
//! such process instead of 13. `TICKSCOPE_NO_START_PATH=1` links without it (the script
//! that writes the list traces a library linked so).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=TICKSCOPE_NO_START_PATH");
    println!("cargo:rerun-if-env-changed=TICKSCOPE_LINK_MAP");
    // The linker's map of the cdylib, for bench/start_path.py.
    if let Some(map) = std::env::var_os("TICKSCOPE_LINK_MAP").filter(|m| !m.is_empty()) {
        linker_args(&["-Map", &PathBuf::from(map).display().to_string()]);
    }
    let target = std::env::var("TARGET").unwrap_or_default();
    if target.ends_with("-linux-gnu") {
        start_path();
    }
    // The host's compiler knows the host's archive only: a cross build links as before.
    if !target.ends_with("-linux-gnu") || std::env::var("HOST").ok().as_deref() != Some(&target) {
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let Ok(out) = Command::new(&cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
    else {
        return;
    };
    let archive = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    // Without the file, the driver prints the bare name back.
    if !out.status.success() || !archive.is_absolute() || !archive.is_file() {
        return;
    }
    // A compiler upgrade that moves the archive runs this again.
    println!("cargo:rerun-if-changed={}", archive.display());
    let dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("gcc_s");
    std::fs::create_dir_all(&dir).expect("creating the link directory in OUT_DIR");
    std::fs::write(
        dir.join("libgcc_s.so"),
        format!("INPUT({})\n", archive.display()),
    )
    .expect("writing the linker script in OUT_DIR");
    println!("cargo:rustc-link-search=native={}", dir.display());
}

/// Passes `start_path.ld` to the linker for the cdylib. Its `INSERT BEFORE .text` keeps the
/// linker's own layout for everything else; lld (Rust's default linker here) and GNU ld read
/// it. gold and mold do not, so a build that asks for either links without it.
fn start_path() {
    let script = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it"))
        .join("start_path.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    let off =
        std::env::var_os("TICKSCOPE_NO_START_PATH").is_some_and(|v| !v.is_empty() && v != "0");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let other_linker = ["gold", "mold"].iter().any(|l| flags.contains(l));
    if off || other_linker || !script.is_file() {
        return;
    }
    linker_args(&["-T", &script.display().to_string()]);
}

/// Passes `args` to the linker for the cdylib, each whole (`-Xlinker`: a path with a comma
/// or a space in it stays one argument, where `-Wl,` would split it).
fn linker_args(args: &[&str]) {
    for arg in args {
        println!("cargo:rustc-cdylib-link-arg=-Xlinker");
        println!("cargo:rustc-cdylib-link-arg={arg}");
    }
}
