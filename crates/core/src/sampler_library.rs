//! What the sampler (crate `tickscope-sampler`, below this one) asks of the library it is
//! part of, given to it as the library loads: the calibrated clock (its samples' times on a
//! capture's timeline are the scopes' ticks), the scopes open on the interrupted thread (the
//! samples' `scope` labels), and the running capture (its samples on the timeline).

use tickscope_sampler::library::Library;

static LIBRARY: Library = Library {
    now: crate::clock::now,
    now_in_signal: crate::clock::now_in_signal,
    rate_without_waiting: crate::clock::rate_without_waiting,
    active_scopes: crate::scope::active_scopes,
    capturing: crate::state::capturing,
    #[cfg(feature = "capture")]
    define_stack: crate::capture::define_stack,
    #[cfg(not(feature = "capture"))]
    define_stack: |_, _| {},
    #[cfg(feature = "capture")]
    sample: crate::capture::sample,
    #[cfg(not(feature = "capture"))]
    sample: |_, _, _| {},
    scope_name: crate::scope::scope_name,
    #[cfg(feature = "capture")]
    heap_in_use: crate::capture::heap_in_use,
    #[cfg(not(feature = "capture"))]
    heap_in_use: |_| {},
};

/// Gives the sampler this library's side (the first call does; later ones do nothing). Runs
/// before `main` and as `libtickscope.so` loads (below), at first use, and where the C API
/// starts a sampler: a C program linking `libtickscope.a` statically takes from the archive
/// only the objects it names, which need not hold the `.init_array` entry. Not a stable API.
pub fn install() {
    tickscope_sampler::library::install(&LIBRARY);
}

extern "C" fn give_the_sampler_its_library() {
    install();
}

tickscope_sys::at_load!(GIVE = give_the_sampler_its_library);
