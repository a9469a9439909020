//! profile.proto's field numbers (github.com/google/pprof, `proto/profile.proto`), named once:
//! this crate's [`encode`](crate::encode) writes with them and `tickscope-profile`'s reader
//! reads with them. One message per module; each constant is its field's name in capitals.

/// `Profile`.
pub mod profile {
    pub const SAMPLE_TYPE: u64 = 1;
    pub const SAMPLE: u64 = 2;
    pub const MAPPING: u64 = 3;
    pub const LOCATION: u64 = 4;
    pub const FUNCTION: u64 = 5;
    pub const STRING_TABLE: u64 = 6;
    pub const DROP_FRAMES: u64 = 7;
    pub const KEEP_FRAMES: u64 = 8;
    pub const TIME_NANOS: u64 = 9;
    pub const DURATION_NANOS: u64 = 10;
    pub const PERIOD_TYPE: u64 = 11;
    pub const PERIOD: u64 = 12;
    pub const COMMENT: u64 = 13;
    pub const DEFAULT_SAMPLE_TYPE: u64 = 14;
}

/// `ValueType`.
pub mod value_type {
    pub const TYPE: u64 = 1;
    pub const UNIT: u64 = 2;
}

/// `Sample`.
pub mod sample {
    pub const LOCATION_ID: u64 = 1;
    pub const VALUE: u64 = 2;
    pub const LABEL: u64 = 3;
}

/// `Label`.
pub mod label {
    pub const KEY: u64 = 1;
    pub const STR: u64 = 2;
    pub const NUM: u64 = 3;
    pub const NUM_UNIT: u64 = 4;
}

/// `Mapping`.
pub mod mapping {
    pub const ID: u64 = 1;
    pub const MEMORY_START: u64 = 2;
    pub const MEMORY_LIMIT: u64 = 3;
    pub const FILE_OFFSET: u64 = 4;
    pub const FILENAME: u64 = 5;
    pub const BUILD_ID: u64 = 6;
    pub const HAS_FUNCTIONS: u64 = 7;
    pub const HAS_FILENAMES: u64 = 8;
    pub const HAS_LINE_NUMBERS: u64 = 9;
    pub const HAS_INLINE_FRAMES: u64 = 10;
}

/// `Location`.
pub mod location {
    pub const ID: u64 = 1;
    pub const MAPPING_ID: u64 = 2;
    pub const ADDRESS: u64 = 3;
    pub const LINE: u64 = 4;
    pub const IS_FOLDED: u64 = 5;
}

/// `Line`.
pub mod line {
    pub const FUNCTION_ID: u64 = 1;
    pub const LINE: u64 = 2;
}

/// `Function`.
pub mod function {
    pub const ID: u64 = 1;
    pub const NAME: u64 = 2;
    pub const SYSTEM_NAME: u64 = 3;
    pub const FILENAME: u64 = 4;
    pub const START_LINE: u64 = 5;
}
