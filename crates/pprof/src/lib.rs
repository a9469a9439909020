//! profile.proto (github.com/google/pprof, `proto/profile.proto`) as tickscope writes it: one
//! model and one writer for the sampler's profiles and the ones `tickscope record` merges.
//!
//! # Overview
//! - The crate root: the write model, [`Profile`] and what it holds ([`Sample`], [`Mapping`],
//!   [`Location`], [`Line`], [`Function`], [`Label`], [`ValueType`]), with owned strings and
//!   profile.proto's ids.
//! - [`encode`]: the profile as protobuf bytes, deterministic (the same profile gives the same
//!   bytes).
//! - [`write_gz`]: the same bytes gzipped, as `go tool pprof` and Pyroscope read them; a small
//!   profile in stored blocks, without setting deflate up (decision 25: the cost at a
//!   program's exit).
//! - [`fields`]: profile.proto's field numbers, which `tickscope-profile`'s reader uses too.
//! - [`elf`]: what both symbolisers read from ELF files to name a profile's addresses: build
//!   ids, load segments, the separate debug file, and the function symbols that cover the
//!   addresses wanted, read a piece at a time.
//!
//! The sampler (`tickscope-sampler`) builds this model from its samples; the profile crate
//! (`tickscope-profile`) from the pooled model it reads and computes views in. Reading
//! profiles is the profile crate's: this crate only writes them. Both name addresses through
//! [`elf`]: the sampler adds DWARF (addr2line) to it, the profile crate walks a loaded
//! profile's locations with it.
//!
//! ```
//! use tickscope_pprof::{Function, Line, Location, Profile, Sample, ValueType};
//!
//! let p = Profile {
//!     sample_types: vec![ValueType::new("cpu", "nanoseconds")],
//!     samples: vec![Sample { location_ids: vec![1], values: vec![10_000_000], labels: vec![] }],
//!     locations: vec![Location {
//!         id: 1,
//!         lines: vec![Line { function_id: 1, line: 3 }],
//!         ..Location::default()
//!     }],
//!     functions: vec![Function { id: 1, name: "main".into(), ..Function::default() }],
//!     ..Profile::default()
//! };
//! let mut gz = Vec::new();
//! tickscope_pprof::write_gz(&p, &mut gz)?;
//! assert_eq!(gz[..2], [0x1f, 0x8b]);
//! # Ok::<(), std::io::Error>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod elf;
#[allow(missing_docs)] // each constant is named as its profile.proto field
pub mod fields;
mod write;

pub use write::{encode, write_gz};

/// A sample or period type: `("cpu", "nanoseconds")`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueType {
    /// The kind: `cpu`, `samples`, `alloc_space`, ...
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

/// A label's value: a string, or a number with its unit (`""` for none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelValue {
    /// `key = "value"`.
    Str(String),
    /// `key = value unit`.
    Num(i64, String),
}

/// A sample label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The key.
    pub key: String,
    /// The value.
    pub value: LabelValue,
}

impl Label {
    /// A string label, `key = "value"`.
    pub fn str(key: impl Into<String>, value: impl Into<String>) -> Label {
        Label {
            key: key.into(),
            value: LabelValue::Str(value.into()),
        }
    }

    /// A numeric label, `key = value unit` (`unit` `""` for none).
    pub fn num(key: impl Into<String>, value: i64, unit: impl Into<String>) -> Label {
        Label {
            key: key.into(),
            value: LabelValue::Num(value, unit.into()),
        }
    }
}

/// One sample: a stack and its values.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// [`Location::id`]s, leaf first, as profile.proto orders them.
    pub location_ids: Vec<u64>,
    /// One per sample type.
    pub values: Vec<i64>,
    /// Labels, in the order written.
    pub labels: Vec<Label>,
}

/// A mapped binary.
#[derive(Debug, Clone, Default)]
pub struct Mapping {
    /// Non-zero, unique.
    pub id: u64,
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub limit: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// The binary's path.
    pub file: String,
    /// Its build id, in hex.
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

/// One (possibly inlined) frame of a location.
#[derive(Debug, Clone, Default)]
pub struct Line {
    /// The [`Function::id`] it is in.
    pub function_id: u64,
    /// The line number (0: unknown).
    pub line: i64,
}

/// A program location: an address and the frames it stands for.
#[derive(Debug, Clone, Default)]
pub struct Location {
    /// Non-zero, unique.
    pub id: u64,
    /// The [`Mapping::id`] it is in; 0 when the address is in no known mapping.
    pub mapping_id: u64,
    /// The instruction address (0: unknown).
    pub address: u64,
    /// Innermost (most deeply inlined) first; the last is the function the address is in.
    pub lines: Vec<Line>,
    /// Several frames were folded into this one.
    pub is_folded: bool,
}

/// A function.
#[derive(Debug, Clone, Default)]
pub struct Function {
    /// Non-zero, unique.
    pub id: u64,
    /// The human (demangled) name.
    pub name: String,
    /// The system (mangled) name.
    pub system_name: String,
    /// The source file.
    pub filename: String,
    /// The line where it starts (0: unknown).
    pub start_line: i64,
}

/// A whole profile, ready to encode.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// What each sample value measures.
    pub sample_types: Vec<ValueType>,
    /// The samples.
    pub samples: Vec<Sample>,
    /// Mapped binaries.
    pub mappings: Vec<Mapping>,
    /// Program locations.
    pub locations: Vec<Location>,
    /// Functions.
    pub functions: Vec<Function>,
    /// Regex of frames a reader drops (with everything above them); `""` for none.
    pub drop_frames: String,
    /// Regex of frames a reader keeps despite `drop_frames`; `""` for none.
    pub keep_frames: String,
    /// When the profile was taken, ns since the Unix epoch (0: unknown).
    pub time_nanos: i64,
    /// How long it covers, ns (0: unknown).
    pub duration_nanos: i64,
    /// What one period measures; `None` writes no period type.
    pub period_type: Option<ValueType>,
    /// The sampling period, in `period_type`'s unit.
    pub period: i64,
    /// Free-form comments.
    pub comments: Vec<String>,
    /// The `type` of the sample type views show by default; `""` for the last one.
    pub default_sample_type: String,
}
