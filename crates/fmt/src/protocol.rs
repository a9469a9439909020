//! The protocol between `tickscope record` and the library in the programs it runs, in one
//! place: the environment `record` sets ([`env`](mod@env)), which the library reads, and the marks of
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
    /// For tests: the library's deferred start waits this long (ms).
    pub const START_DELAY_MS: &str = "TICKSCOPE_CPUPROFILE_START_DELAY_MS";
    /// Where the heap profile goes (a program exec'd under the preload library writes
    /// `<this>.<pid>`).
    pub const HEAP_PROFILE: &str = "TICKSCOPE_HEAPPROFILE";
    /// The heap profile's mean sampling interval, bytes.
    pub const HEAP_RATE: &str = "TICKSCOPE_HEAP_RATE";
    /// Where `record` finds libtickscope.so (else beside its own binary).
    pub const LIB: &str = "TICKSCOPE_LIB";
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

    /// A profiled process that could not write its profile (a full disk; the message saying
    /// why is shown apart): `pid=P cpu-ns=N name=COMM`. `record` then gives that cause, not
    /// the ones of a program that wrote nothing.
    pub const WRITE_FAILED: &str = "tickscope-record-stat write-failed ";
}

/// A line about a process, after its mark: `pid=P cpu-ns=N [children-ns=C] name=COMM` (the
/// name last: it may hold spaces).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    /// The process.
    pub pid: u32,
    /// Its CPU time (ns) at the line.
    pub cpu_ns: u64,
    /// The CPU time (ns) of the children it reaped, where said.
    pub children_ns: Option<u64>,
    /// Its name (`PR_GET_NAME`).
    pub name: String,
}

impl Process {
    /// Reads the line's fields after its mark; `None` if it does not read so.
    pub fn parse(rest: &str) -> Option<Process> {
        let (fields, name) = rest.split_once(" name=")?;
        Some(Process {
            pid: field(fields, "pid=")?,
            cpu_ns: field(fields, "cpu-ns=")?,
            children_ns: field(fields, "children-ns="),
            name: name.to_string(),
        })
    }
}

/// A parent's line for a child it reaped, after its mark ([`marks::REAPED`]): `pid=P
/// cpu-ns=N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reaped {
    /// The child.
    pub pid: u32,
    /// Its CPU time (ns) as its parent reaped it.
    pub cpu_ns: u64,
}

impl Reaped {
    /// Reads the line's fields after its mark.
    pub fn parse(rest: &str) -> Option<Reaped> {
        Some(Reaped {
            pid: field(rest, "pid=")?,
            cpu_ns: field(rest, "cpu-ns=")?,
        })
    }
}

/// The value of `key` (`pid=`) among the space-separated fields of a line.
pub fn field<T: std::str::FromStr>(fields: &str, key: &str) -> Option<T> {
    fields
        .split(' ')
        .find_map(|f| f.strip_prefix(key))?
        .parse()
        .ok()
}

/// A line built on the stack, the writer's side (no allocation: the library writes lines
/// from signal handlers and `_exit`); what does not fit is cut.
pub struct Line {
    buf: [u8; 160],
    len: usize,
}

impl Line {
    /// `mark` then a [`Process`] line, ended by a newline.
    pub fn process(
        mark: &[u8],
        pid: u32,
        cpu_ns: u64,
        children_ns: Option<u64>,
        name: &[u8],
    ) -> Line {
        let mut line = Line::empty();
        line.push(mark);
        line.push(b"pid=");
        line.number(pid as u64);
        line.push(b" cpu-ns=");
        line.number(cpu_ns);
        if let Some(c) = children_ns {
            line.push(b" children-ns=");
            line.number(c);
        }
        line.push(b" name=");
        line.push(name);
        line.push(b"\n");
        line
    }

    /// A [`Reaped`] line, its mark first, ended by a newline.
    pub fn reaped(r: Reaped) -> Line {
        let mut line = Line::empty();
        line.push(marks::REAPED.as_bytes());
        line.push(b"pid=");
        line.number(r.pid as u64);
        line.push(b" cpu-ns=");
        line.number(r.cpu_ns);
        line.push(b"\n");
        line
    }

    fn empty() -> Line {
        Line {
            buf: [0; 160],
            len: 0,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
    }

    fn number(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..]);
    }

    /// The line's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_written_read_back_as_written() {
        for children_ns in [None, Some(0), Some(u64::MAX)] {
            for mark in [
                marks::UNSAMPLED,
                marks::FORK_CHILD,
                marks::WRITE_FAILED,
                "tickscope-record-stat exit-cpu-ns=77 ",
            ] {
                let line = Line::process(mark.as_bytes(), u32::MAX, 12_345, children_ns, b"a b=c");
                let text = std::str::from_utf8(line.bytes()).unwrap();
                let rest = text.strip_prefix(mark).unwrap().strip_suffix('\n').unwrap();
                let p = Process::parse(rest).unwrap();
                assert_eq!(
                    p,
                    Process {
                        pid: u32::MAX,
                        cpu_ns: 12_345,
                        children_ns,
                        name: "a b=c".into()
                    }
                );
            }
        }
        let r = Reaped { pid: 7, cpu_ns: 0 };
        let line = Line::reaped(r);
        let text = std::str::from_utf8(line.bytes()).unwrap();
        let rest = text.strip_prefix(marks::REAPED).unwrap().trim_end();
        assert_eq!(Reaped::parse(rest), Some(r));
        assert_eq!(field::<u64>("exit-cpu-ns=5 pid=3", "pid="), Some(3));
        assert_eq!(Process::parse("pid=x cpu-ns=1 name=n"), None);
    }

    #[test]
    fn a_line_holds_the_largest_numbers_and_cuts_what_does_not_fit() {
        let line = Line::process(b"", 0, u64::MAX, None, &[b'x'; 200]);
        assert_eq!(line.bytes().len(), 160);
        assert!(line
            .bytes()
            .starts_with(b"pid=0 cpu-ns=18446744073709551615 name=xx"));
    }
}
