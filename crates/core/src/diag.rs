//! tickscope's own messages: one line each, to the standard error the process started with.
//! A leaf: every module may warn, and this imports only the platform glue that writes.

/// Prints one warning line to stderr.
pub(crate) fn warn(msg: &str) {
    say(&format!("tickscope: warning: {msg}"));
}

/// Prints one line of tickscope's own (a warning, a "profile written") to the process's
/// standard error: the one it had when the preload library was loaded, if that kept it (see
/// [`crate::sys::write_stderr`]).
pub(crate) fn say(line: &str) {
    let mut text = String::with_capacity(line.len() + 1);
    text.push_str(line);
    text.push('\n');
    crate::sys::write_stderr(&text);
}

/// Warns that `var` holds `value`, which is not one of `expected`.
pub(crate) fn warn_malformed(var: &str, value: &str, expected: &str) {
    warn(&format!(
        "{var}={value:?} is not valid (expected {expected}); using the default"
    ));
}
