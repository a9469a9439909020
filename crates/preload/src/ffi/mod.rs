//! The C ABI of libtickscope (`include/tickscope.h`), the load-time constructor that reads
//! `TICKSCOPE_CPUPROFILE`, and the exit and signal hooks. All of this crate's `unsafe` is in this module: `api.rs` (the
//! exported functions) and `hooks.rs` (load, exit, signals, threads).
//!
//! Every exported function runs its body under `catch_unwind`: a panic becomes
//! `TICKSCOPE_EPANIC` (or a zero value) and a message for `tickscope_last_error`, never an
//! unwind into C.
#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, Ordering::*};
use std::sync::{Mutex, Once, OnceLock};
use std::time::Duration;

use ts::__private::{Callsite, Kind, Name};
use ts::sampler::Mode;
use ts::{Scope, Timer};

use crate::profile::{self, Settings};
use crate::{Code, Failure};

mod api;
mod deferred;
mod hooks;
pub(crate) use deferred::{deferred_path, start_now_if_pending, wait_started, Start};
use hooks::write_at_exit;
pub(crate) use hooks::{answer_unanswered, end_pending_start, record_line, report_fork_child};

/// Room for one message, NUL included; longer ones are cut (at a character boundary).
const ERROR_BYTES: usize = 512;

thread_local! {
    /// The calling thread's last failure, for `tickscope_last_error`: a fixed buffer, so a
    /// pointer the program holds stays valid (its text changes with the next failure).
    static LAST_ERROR: RefCell<[u8; ERROR_BYTES]> = const { RefCell::new([0; ERROR_BYTES]) };
}

/// Records `f` as the calling thread's last error; returns its code.
fn fail(f: Failure) -> c_int {
    let mut text = f.message.replace('\0', " ");
    while text.len() >= ERROR_BYTES {
        text.pop();
    }
    let _ = LAST_ERROR.try_with(|e| {
        let mut e = e.borrow_mut();
        e[..text.len()].copy_from_slice(text.as_bytes());
        e[text.len()] = 0;
    });
    f.code as c_int
}

fn panic_failure(p: Box<dyn std::any::Any + Send>) -> Failure {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    Failure::new(
        Code::Panic,
        format!("internal error in libtickscope: {what}"),
    )
}

/// Runs a fallible export: 0, or the failure's code.
fn call(f: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => crate::ffi::TICKSCOPE_OK,
        Ok(Err(e)) => fail(e),
        Err(p) => fail(panic_failure(p)),
    }
}

/// Runs an export that returns a value: `zero` when it fails.
fn value<T>(zero: T, f: impl FnOnce() -> Result<T, Failure>) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            fail(e);
            zero
        }
        Err(p) => {
            fail(panic_failure(p));
            zero
        }
    }
}

const TICKSCOPE_OK: c_int = 0;

fn null(what: &str) -> Failure {
    Failure::new(Code::Invalid, format!("{what} is a null pointer"))
}

/// The text of a C string, `None` for a null pointer.
///
/// # Safety
/// `s` is null or points to a NUL-terminated string that stays valid while the result is used.
unsafe fn text<'a>(s: *const c_char) -> Option<&'a CStr> {
    // SAFETY: the caller's contract.
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) })
}

/// A C string copied into memory that lives as long as the process (call-site names).
fn leak(s: &CStr) -> &'static str {
    Box::leak(s.to_string_lossy().into_owned().into_boxed_str())
}

/// Why the calling thread's last failing call failed.
#[no_mangle]
pub extern "C" fn tickscope_last_error() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.as_ptr() as *const c_char)
        .unwrap_or(c"".as_ptr())
}

/// The library's version.
#[no_mangle]
pub extern "C" fn tickscope_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
