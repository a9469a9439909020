//! The numbers of Perfetto's protos this export writes: fields, `TrackEvent` types,
//! sequence flags and clock ids.
//!
//! Field numbers, from Perfetto's `protos/perfetto/trace/`: `Trace.packet` 1; `TracePacket`:
//! `timestamp` 8, `trusted_packet_sequence_id` 10, `track_event` 11, `interned_data` 12,
//! `sequence_flags` 13, `compressed_packets` 50, `trace_packet_defaults` 59,
//! `track_descriptor` 60; `TracePacketDefaults`: `track_event_defaults` 11;
//! `TrackEventDefaults`: `track_uuid` 11; `InternedData`: `event_names` 2; `EventName`:
//! `iid` 1, `name` 2; `TrackDescriptor`: `uuid` 1, `name` 2, `process` 3, `thread` 4,
//! `parent_uuid` 5, `counter` 8; `ProcessDescriptor`: `pid` 1, `process_name` 6;
//! `ThreadDescriptor`: `pid` 1, `tid` 2, `thread_name` 5; `TrackEvent`: `debug_annotations` 4,
//! `type` 9, `name_iid` 10, `track_uuid` 11, `categories` 22, `name` 23,
//! `double_counter_value` 44; `DebugAnnotation`: `bool_value` 2, `uint_value` 3, `name` 10;
//! `TracePacket.clock_snapshot` 6, `timestamp_clock_id` 58, `perf_sample` 66;
//! `ClockSnapshot.clocks` 1: `clock_id` 1, `timestamp` 2, `is_incremental` 3;
//! `TracePacketDefaults.timestamp_clock_id` 58; `PerfSample`: `cpu` 1, `pid` 2, `tid` 3,
//! `callstack_iid` 4; `InternedData`: `function_names` 5, `frames` 6, `callstacks` 7,
//! `mapping_paths` 17, `mappings` 19; `InternedString`: `iid` 1, `str` 2; `Frame`: `iid` 1,
//! `function_name_id` 2, `mapping_id` 3, `rel_pc` 4; `Callstack`: `iid` 1, `frame_ids` 2;
//! `Mapping`: `iid` 1, `path_string_ids` 7 (checked against Perfetto's compiled protos).

/// Field numbers.
pub(crate) mod field {
    pub const TRACE_PACKET: u32 = 1;

    pub const PACKET_CLOCK_SNAPSHOT: u32 = 6;
    pub const PACKET_TIMESTAMP: u32 = 8;
    pub const PACKET_SEQUENCE_ID: u32 = 10;
    pub const PACKET_TRACK_EVENT: u32 = 11;
    pub const PACKET_INTERNED_DATA: u32 = 12;
    pub const PACKET_SEQUENCE_FLAGS: u32 = 13;
    pub const PACKET_COMPRESSED: u32 = 50;
    pub const PACKET_TIMESTAMP_CLOCK_ID: u32 = 58;
    pub const PACKET_DEFAULTS: u32 = 59;
    pub const PACKET_PERF_SAMPLE: u32 = 66;

    pub const PERF_SAMPLE_CPU: u32 = 1;
    pub const PERF_SAMPLE_PID: u32 = 2;
    pub const PERF_SAMPLE_TID: u32 = 3;
    pub const PERF_SAMPLE_CALLSTACK_IID: u32 = 4;

    pub const INTERNED_FUNCTION_NAMES: u32 = 5;
    pub const INTERNED_FRAMES: u32 = 6;
    pub const INTERNED_CALLSTACKS: u32 = 7;
    pub const INTERNED_MAPPING_PATHS: u32 = 17;
    pub const INTERNED_MAPPINGS: u32 = 19;
    pub const INTERNED_STRING_IID: u32 = 1;
    pub const INTERNED_STRING_STR: u32 = 2;
    pub const FRAME_IID: u32 = 1;
    pub const FRAME_FUNCTION_NAME_ID: u32 = 2;
    pub const FRAME_MAPPING_ID: u32 = 3;
    pub const FRAME_REL_PC: u32 = 4;
    pub const CALLSTACK_IID: u32 = 1;
    pub const CALLSTACK_FRAME_IDS: u32 = 2;
    pub const MAPPING_IID: u32 = 1;
    pub const MAPPING_PATH_STRING_IDS: u32 = 7;
    pub const PACKET_TRACK_DESCRIPTOR: u32 = 60;

    pub const DEFAULTS_TRACK_EVENT: u32 = 11;
    pub const DEFAULTS_TIMESTAMP_CLOCK_ID: u32 = 58;

    pub const SNAPSHOT_CLOCKS: u32 = 1;
    pub const CLOCK_ID: u32 = 1;
    pub const CLOCK_TIMESTAMP: u32 = 2;
    pub const CLOCK_IS_INCREMENTAL: u32 = 3;
    pub const TRACK_EVENT_DEFAULTS_TRACK_UUID: u32 = 11;

    pub const INTERNED_EVENT_NAMES: u32 = 2;
    pub const EVENT_NAME_IID: u32 = 1;
    pub const EVENT_NAME_NAME: u32 = 2;

    pub const TRACK_UUID: u32 = 1;
    pub const TRACK_NAME: u32 = 2;
    pub const TRACK_PROCESS: u32 = 3;
    pub const TRACK_THREAD: u32 = 4;
    pub const TRACK_PARENT_UUID: u32 = 5;
    pub const TRACK_COUNTER: u32 = 8;

    pub const PROCESS_PID: u32 = 1;
    pub const PROCESS_NAME: u32 = 6;

    pub const THREAD_PID: u32 = 1;
    pub const THREAD_TID: u32 = 2;
    pub const THREAD_NAME: u32 = 5;

    pub const EVENT_DEBUG_ANNOTATIONS: u32 = 4;
    pub const EVENT_TYPE: u32 = 9;
    pub const EVENT_NAME_IID_FIELD: u32 = 10;
    pub const EVENT_TRACK_UUID: u32 = 11;
    pub const EVENT_CATEGORIES: u32 = 22;
    pub const EVENT_NAME: u32 = 23;
    pub const EVENT_DOUBLE_COUNTER_VALUE: u32 = 44;

    pub const ANNOTATION_BOOL: u32 = 2;
    pub const ANNOTATION_UINT: u32 = 3;
    pub const ANNOTATION_NAME: u32 = 10;
}

/// `TrackEvent.Type` values.
pub(crate) mod kind {
    pub const SLICE_BEGIN: u64 = 1;
    pub const SLICE_END: u64 = 2;
    pub const INSTANT: u64 = 3;
    pub const COUNTER: u64 = 4;
}

/// `TracePacket.SequenceFlags`.
pub(super) const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
pub(super) const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
/// `ClockSnapshot.Clock.BuiltinClocks.BOOTTIME`: the trace's default clock.
pub(super) const BOOTTIME: u64 = 6;
/// The sequence-scoped clock each thread's timestamps use: incremental (each packet's
/// timestamp is the ns since the previous one on its sequence), as Perfetto's SDK does.
pub(super) const INCREMENTAL_CLOCK: u64 = 64;
