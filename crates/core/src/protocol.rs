//! The protocol between `tickscope record` and the library in the programs it runs, in one
//! place: the environment `record` sets ([`env`]), which the library reads, and the marks of
//! the lines the library writes back to `record`'s messages file ([`marks`]), which `record`
//! parses. Both sides name these constants, never the strings.

/// The variables `record` sets for the programs it runs (and a user may set by hand with
/// `LD_PRELOAD`, see the README).
pub mod env {
    /// Where the CPU profile goes; a program exec'd under it writes `<this>.<pid>`.
    pub const PROFILE: &str = "TICKSCOPE_CPUPROFILE";
    /// Samples per second.
    pub const FREQUENCY: &str = "TICKSCOPE_CPUPROFILE_FREQUENCY";
    /// `cpu` or `wall`.
    pub const MODE: &str = "TICKSCOPE_CPUPROFILE_MODE";
    /// The signal the sampler uses (`PROF`, `RTMIN+N` or a number).
    pub const SIGNAL: &str = "TICKSCOPE_CPUPROFILE_SIGNAL";
    /// `1`: the profile is written on SIGINT/SIGTERM too.
    pub const SIGNALS: &str = "TICKSCOPE_CPUPROFILE_SIGNALS";
    /// `1`: no line saying the profile was written (`record` says it).
    pub const QUIET: &str = "TICKSCOPE_CPUPROFILE_QUIET";
    /// `1`: fork children that do not exec are sampled too.
    pub const FORKS: &str = "TICKSCOPE_CPUPROFILE_FORKS";
    /// The pid of the run's root (set by the library for the programs it execs).
    pub const ROOT_PID: &str = "TICKSCOPE_CPUPROFILE_PID";
    /// `record`'s pid, where it samples the program it starts from outside.
    pub const OUTSIDE: &str = "TICKSCOPE_CPUPROFILE_OUTSIDE";
    /// `fp`: stacks walked by frame pointers.
    pub const UNWIND: &str = "TICKSCOPE_CPUPROFILE_UNWIND";
    /// The file tickscope's messages go to (it must exist: it is never created).
    pub const MESSAGES: &str = "TICKSCOPE_MESSAGES";
}

/// The marks of the lines for `record` alone (not shown), each followed by ` pid=P cpu-ns=N`
/// and more, as every line about a process.
pub mod marks {
    /// The CPU time (ns) tickscope spent after its profile's accounting ended (writing the
    /// profile), so that `record` can tell it from CPU time no profile holds; then ` pid=P
    /// cpu-ns=T children-ns=C name=COMM`, T being its CPU time at this line and C its
    /// children's (from which, with the figure its parent gets as it reaps it, `record` tells
    /// what its end took after the line).
    pub const EXIT_CPU: &str = "tickscope-record-stat exit-cpu-ns=";

    /// A fork child of a profiled process that did not exec, as it ends: `pid=P cpu-ns=N
    /// name=COMM`, its CPU time being in no profile.
    pub const FORK_CHILD: &str = "tickscope-record-stat fork-child ";

    /// A program exec'd under `record` that ended before its first sample, instead of a
    /// profile file (most commands a script runs): `pid=P cpu-ns=N name=COMM`, N being the CPU
    /// time its profile would have held. `record` counts and names these processes, and puts
    /// their time in its table; one file, not one per process.
    pub const UNSAMPLED: &str = "tickscope-record-stat unsampled ";

    /// A profiled process reaping a child (`wait4`, `waitpid`, `wait`, `wait3`): `pid=P
    /// cpu-ns=N`, N being the child's CPU time as the kernel gives it to its parent (its own,
    /// all of it, and that of the children it reaped). A process's own line is written before
    /// it ends, and the kernel's work as it ends (its memory unmapped) comes after: `record`
    /// takes that from here.
    pub const REAPED: &str = "tickscope-record-stat reaped ";
}
