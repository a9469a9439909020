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

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let target = std::env::var("TARGET").unwrap_or_default();
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
