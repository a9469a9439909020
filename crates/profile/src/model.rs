//! The model: profile.proto's `Profile` with strings resolved and ids turned into indices,
//! in profile.proto's shape so that the views compute exactly what pprof computes. Samples
//! point at locations (leaf first), locations hold lines (innermost inline frame first), lines
//! point at functions; names are interned in [`Strings`], stacks and the samples' values and
//! labels live in shared pools.

use crate::error::ErrorKind;
use crate::store::{push_span, Span, Stack, Stacks, StrId, Strings};

/// The deepest stack a sample may have. Real profilers cap far below (Go 64 frames, perf
/// 127, gperftools 255); a deeper one is damage or an attack, refused with an error.
pub const MAX_STACK_DEPTH: usize = 1 << 16;

/// A profile: profile.proto's `Profile` with strings resolved and ids turned into indices.
///
/// Names are interned ([`StrId`], read with [`Profile::str`]); each sample's stack, values and
/// labels and each location's lines live in shared pools, read with [`Profile::stack`],
/// [`Profile::values`], [`Profile::labels`] and [`Profile::lines`], and added with the
/// `push_*` methods. This keeps a large profile in less than twice its decompressed size.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    /// What each sample value measures (`samples`/`count`, `cpu`/`nanoseconds`, ...).
    pub sample_types: Vec<ValueType>,
    /// The sample type views use when none is asked for (empty: the last one).
    pub default_sample_type: String,
    /// The samples.
    pub samples: Vec<Sample>,
    /// Mapped binaries.
    pub mappings: Vec<Mapping>,
    /// Program locations.
    pub locations: Vec<Location>,
    /// Functions.
    pub functions: Vec<Function>,
    /// Free-form comments.
    pub comments: Vec<String>,
    /// Regex of frames to drop (with everything above them), as pprof's `drop_frames`.
    pub drop_frames: String,
    /// Regex of frames to keep despite `drop_frames`.
    pub keep_frames: String,
    /// When the profile was taken, ns since the Unix epoch (0: unknown).
    pub time_nanos: i64,
    /// How long it covers, ns (0: unknown).
    pub duration_nanos: i64,
    /// What one period measures (empty type and unit when absent).
    pub period_type: ValueType,
    /// The sampling period, in `period_type`'s unit.
    pub period: i64,
    /// Which reader produced it.
    pub format: Format,
    pub(crate) strings: Strings,
    pub(crate) stacks: Stacks,
    pub(crate) values: Vec<i64>,
    pub(crate) labels: Vec<Label>,
    pub(crate) lines: Vec<Line>,
}

/// A value's kind and unit, as `cpu`/`nanoseconds`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueType {
    /// The kind: `cpu`, `samples`, `alloc_space`, `contentions`, ...
    pub ty: String,
    /// The unit: `nanoseconds`, `count`, `bytes`, ...
    pub unit: String,
}

impl ValueType {
    /// A value type.
    pub fn new(ty: &str, unit: &str) -> ValueType {
        ValueType {
            ty: ty.to_string(),
            unit: unit.to_string(),
        }
    }
}

/// One sample: a stack and one value per sample type, held in the profile's pools
/// ([`Profile::stack`], [`Profile::values`], [`Profile::labels`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sample {
    /// Indices into [`Profile::locations`], leaf first.
    pub(crate) stack: Span,
    /// One value per [`Profile::sample_types`].
    pub(crate) values: Span,
    /// Labels, in file order.
    pub(crate) labels: Span,
}

/// A sample label: a string or a number with an optional unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Label {
    /// `key = value`.
    Str {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// `key = value unit`.
    Num {
        /// The key.
        key: String,
        /// The value.
        value: i64,
        /// The unit (empty: none given).
        unit: String,
    },
}

/// A mapped binary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Mapping {
    /// The id in the file (non-zero).
    pub id: u64,
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub limit: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// The binary's path.
    pub file: String,
    /// Its build id.
    pub build_id: String,
    /// Locations in it have function names.
    pub has_functions: bool,
    /// ... file names.
    pub has_filenames: bool,
    /// ... line numbers.
    pub has_line_numbers: bool,
    /// ... inline frames.
    pub has_inline_frames: bool,
}

/// A program location: an address and the (possibly inlined) lines it stands for
/// ([`Profile::lines`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Location {
    /// The id in the file (non-zero).
    pub id: u64,
    /// Index into [`Profile::mappings`], if known.
    pub mapping: Option<u32>,
    /// The instruction address (0: unknown).
    pub address: u64,
    /// Lines, innermost (inlined callee) first; empty when not symbolised.
    pub(crate) lines: Span,
    /// Several frames were folded into this one.
    pub is_folded: bool,
}

/// One line of a location.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Line {
    /// Index into [`Profile::functions`].
    pub function: u32,
    /// The line number (0: unknown).
    pub line: i64,
}

/// A function; its strings are read with [`Profile::str`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Function {
    /// The id in the file (non-zero).
    pub id: u64,
    /// The human name (demangled).
    pub name: StrId,
    /// The system (mangled) name.
    pub system_name: StrId,
    /// The source file.
    pub filename: StrId,
    /// The line where it starts.
    pub start_line: i64,
}

/// The format a profile was read from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// profile.proto (gzip or raw).
    #[default]
    Pprof,
    /// gperftools' binary CPU profile.
    GperftoolsCpu,
    /// A legacy text format: gperftools heap/growth/contention, Go's thread or goroutine
    /// counts, Java's cpu/heap/contention.
    LegacyText,
    /// Folded stacks, `a;b;c 42` per line.
    Folded,
}

impl Profile {
    /// The text of an interned string.
    pub fn str(&self, id: StrId) -> &str {
        self.strings.get(id)
    }

    /// Interns a string.
    pub fn intern(&mut self, s: &str) -> StrId {
        self.strings.intern(s)
    }

    /// A sample's stack: location indices, leaf first.
    pub fn stack(&self, s: &Sample) -> Stack<'_> {
        self.stacks.get(s.stack)
    }

    /// A sample's values, one per sample type.
    pub fn values(&self, s: &Sample) -> &[i64] {
        &self.values[s.values.range()]
    }

    /// A sample's value of sample type `index` (0 if it has none: [`Profile::check`] makes
    /// that impossible in a loaded profile).
    pub fn value(&self, s: &Sample, index: usize) -> i64 {
        self.values(s).get(index).copied().unwrap_or(0)
    }

    /// A sample's values, to change in place.
    pub fn values_mut(&mut self, s: &Sample) -> &mut [i64] {
        &mut self.values[s.values.range()]
    }

    /// A sample's labels.
    pub fn labels(&self, s: &Sample) -> &[Label] {
        &self.labels[s.labels.range()]
    }

    /// A location's lines, innermost first.
    pub fn lines(&self, loc: &Location) -> &[Line] {
        &self.lines[loc.lines.range()]
    }

    /// Gives every sample the labels `extra` besides its own (the process a sample came
    /// from, when the profiles of several processes are merged).
    pub fn label_all(&mut self, extra: &[Label]) {
        let old = std::mem::take(&mut self.labels);
        for s in &mut self.samples {
            let start = self.labels.len();
            self.labels.extend_from_slice(&old[s.labels.range()]);
            self.labels.extend_from_slice(extra);
            s.labels = Span::new(start, self.labels.len() - start);
        }
    }

    /// Adds a sample (stack leaf first).
    pub fn push_sample(
        &mut self,
        stack: impl IntoIterator<Item = u32> + Clone,
        values: &[i64],
        labels: &[Label],
    ) {
        let sample = Sample {
            stack: self.stacks.push(stack),
            values: push_span(&mut self.values, values),
            labels: push_span(&mut self.labels, labels),
        };
        self.samples.push(sample);
    }

    /// Adds a location with its lines (innermost first); returns its index.
    pub fn push_location(
        &mut self,
        id: u64,
        mapping: Option<u32>,
        address: u64,
        lines: &[Line],
        is_folded: bool,
    ) -> u32 {
        let lines = push_span(&mut self.lines, lines);
        self.locations.push(Location {
            id,
            mapping,
            address,
            lines,
            is_folded,
        });
        self.locations.len() as u32 - 1
    }

    /// Adds a function; returns its index.
    pub fn push_function(
        &mut self,
        id: u64,
        name: &str,
        system_name: &str,
        filename: &str,
        start_line: i64,
    ) -> u32 {
        let f = Function {
            id,
            name: self.intern(name),
            system_name: self.intern(system_name),
            filename: self.intern(filename),
            start_line,
        };
        self.functions.push(f);
        self.functions.len() as u32 - 1
    }

    /// Replaces the lines of location `i`.
    pub fn set_lines(&mut self, i: usize, lines: &[Line]) {
        self.locations[i].lines = push_span(&mut self.lines, lines);
    }

    /// Lets go of the string lookup table and of spare capacity: readers call it last.
    pub(crate) fn seal(&mut self) {
        self.strings.seal();
        self.stacks.shrink_to_fit();
        self.values.shrink_to_fit();
        self.labels.shrink_to_fit();
        self.lines.shrink_to_fit();
        self.samples.shrink_to_fit();
        self.locations.shrink_to_fit();
        self.functions.shrink_to_fit();
    }

    /// The index of the sample type views use when none is asked for: `default_sample_type`
    /// if it names one, else the last (as pprof does).
    pub fn default_sample_index(&self) -> usize {
        if !self.default_sample_type.is_empty() {
            if let Some(i) = self
                .sample_types
                .iter()
                .position(|t| t.ty == self.default_sample_type)
            {
                return i;
            }
        }
        self.sample_types.len().saturating_sub(1)
    }

    /// Resolves a `--sample-index` argument: a number, or a sample type's name
    /// (`cpu`, `alloc_space`; a `sample_` prefix is ignored, as pprof does).
    pub fn sample_index(&self, spec: &str) -> Result<usize, String> {
        if self.sample_types.is_empty() {
            return Err("the profile has no sample types".into());
        }
        if let Ok(i) = spec.parse::<usize>() {
            if i < self.sample_types.len() {
                return Ok(i);
            }
            return Err(format!(
                "sample index {i} out of range [0..{}]",
                self.sample_types.len() - 1
            ));
        }
        let name = spec.strip_prefix("sample_").unwrap_or(spec);
        for (i, t) in self.sample_types.iter().enumerate() {
            if t.ty == name || t.ty == spec {
                return Ok(i);
            }
        }
        let names: Vec<&str> = self.sample_types.iter().map(|t| t.ty.as_str()).collect();
        Err(format!(
            "sample index {spec:?} is not one of {}",
            names.join(", ")
        ))
    }

    /// The function of a line.
    pub fn function(&self, line: &Line) -> &Function {
        &self.functions[line.function as usize]
    }

    /// The name of a line's function.
    pub fn function_name(&self, line: &Line) -> &str {
        self.str(self.function(line).name)
    }

    /// The mapping's file of a location ("" if none).
    pub fn objfile(&self, loc: &Location) -> &str {
        loc.mapping
            .map(|m| self.mappings[m as usize].file.as_str())
            .unwrap_or("")
    }

    /// Checks the invariants every view relies on: each sample has one value per sample type
    /// and every index points at something. Readers call it before returning.
    pub fn check(&self) -> Result<(), ErrorKind> {
        let invalid = |what: String| Err(ErrorKind::Invalid { what });
        if self.sample_types.is_empty() && !self.samples.is_empty() {
            return invalid("samples but no sample types".into());
        }
        for (i, s) in self.samples.iter().enumerate() {
            if s.values.len() != self.sample_types.len() {
                return invalid(format!(
                    "sample {i} has {} values but there are {} sample types",
                    s.values.len(),
                    self.sample_types.len()
                ));
            }
            if s.stack.len() > MAX_STACK_DEPTH {
                return invalid(format!(
                    "sample {i} has a stack {} frames deep, more than the {MAX_STACK_DEPTH} \
                     this reader accepts (runaway recursion or damage)",
                    s.stack.len()
                ));
            }
            if let Some(l) = self.stack(s).find(|&l| l as usize >= self.locations.len()) {
                return invalid(format!("sample {i} refers to location index {l}"));
            }
        }
        // Every view adds sample values up (flat, cum, totals, a diff's negated base): the
        // absolute values of each sample type must add up within i64, or a sum would wrap
        // (a fuzzed gperftools profile printed -1519204 hours).
        for (t, ty) in self.sample_types.iter().enumerate() {
            let mut sum = 0u64;
            for s in &self.samples {
                sum = match sum.checked_add(self.value(s, t).unsigned_abs()) {
                    Some(v) if v <= i64::MAX as u64 => v,
                    _ => {
                        return invalid(format!(
                            "the {}/{} values of the samples add up to more than 2^63 - 1 (a damaged or made-up profile)",
                            ty.ty, ty.unit
                        ))
                    }
                };
            }
        }
        for l in &self.locations {
            if let Some(m) = l.mapping {
                if m as usize >= self.mappings.len() {
                    return invalid(format!("location {} refers to mapping index {m}", l.id));
                }
            }
            for line in self.lines(l) {
                if line.function as usize >= self.functions.len() {
                    return invalid(format!(
                        "location {} refers to function index {}",
                        l.id, line.function
                    ));
                }
            }
        }
        Ok(())
    }
}
