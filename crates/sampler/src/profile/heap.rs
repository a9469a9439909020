//! The heap profile as pprof: Go's four sample types, its unsampling, the `bytes` label.

use std::collections::{BTreeSet, HashMap};
use std::time::SystemTime;

use super::*;
use tickscope_pprof as pprof;

/// What the sampled allocations of one stack and one size add up to (as sampled: the
/// profile scales them).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct HeapSums {
    pub(crate) alloc: u64,
    pub(crate) inuse: u64,
}

/// The heap profiler's sampled figures, copied out of its table (`crate::heap`).
pub(crate) struct HeapRaw {
    pub(crate) stacks: Vec<Box<[u64]>>,
    pub(crate) sums: Vec<((u32, u64), HeapSums)>,
    pub(crate) rate: u64,
    pub(crate) started: Option<SystemTime>,
    pub(crate) dropped: u64,
    pub(crate) busy_samples: u64,
    pub(crate) busy_frees: u64,
}

/// The allocator's own frames and what they call: a reader drops them (and everything they
/// called) from every stack, so a stack's leaf is the code that asked for memory.
const DROP_FRAMES: &str = "<?tickscope_sampler::heap::.*|(__rustc::)?__(rust|rdl|rg)_(alloc|alloc_zeroed|realloc|dealloc)|tickscope::ffi::hooks::heap::.*|malloc|calloc|realloc|reallocarray|posix_memalign|aligned_alloc|memalign|valloc|pvalloc";

/// The heap profile of `raw`: one sample per stack and block size, its four values the
/// sampled figures divided by the chance a block of that size is sampled at the rate
/// (`1 - exp(-size / rate)`, Go's `scaleHeapSample`), labelled `bytes` (the block size).
pub(crate) fn heap_pprof(raw: HeapRaw) -> pprof::Profile {
    // Return addresses name the instruction after the call: look up the call's (- 1).
    let stacks: Vec<Vec<Loc>> = raw
        .stacks
        .iter()
        .map(|s| s.iter().map(|&a| Loc::Addr(a.saturating_sub(1))).collect())
        .collect();
    let addrs: BTreeSet<u64> = stacks
        .iter()
        .flatten()
        .filter_map(|l| match l {
            Loc::Addr(a) => Some(*a),
            Loc::Synthetic(_) => None,
        })
        .collect();
    let exe = std::fs::read_link("/proc/self/exe").ok();
    let (symbols, modules, module_of) = match addrs.is_empty() {
        true => (
            HashMap::new(),
            crate::symbolize::main_module().into_iter().collect(),
            HashMap::new(),
        ),
        false => build::symbolized(&addrs, crate::symbolize::read_self_maps(), exe.as_deref()),
    };
    let rate = raw.rate.clamp(1, i64::MAX as u64);
    let mut comments = vec![
        format!(
            "tickscope heap profile: allocations sampled every {} bytes on average (TICKSCOPE_HEAP_RATE), each scaled by the chance of its size being sampled (Go's formula)",
            rate
        ),
    ];
    let missed = raw.dropped + raw.busy_samples;
    if missed > 0 {
        comments.push(format!(
            "{missed} sampled allocations were not recorded ({} the table full, {} the table busy)",
            raw.dropped, raw.busy_samples
        ));
    }
    if raw.busy_frees > 0 {
        comments.push(format!(
            "{} frees could not be looked up (the table busy): blocks freed then may still count as in use",
            raw.busy_frees
        ));
    }
    let base = Profile {
        samples: raw
            .sums
            .iter()
            .map(|&((stack, _), _)| Sample {
                tid: 0,
                locs: stacks[stack as usize].clone(),
                scopes: Vec::new(),
                counts: Counts::default(),
            })
            .collect(),
        symbols,
        modules,
        module_of,
        exe,
        start_time: raw.started.unwrap_or_else(SystemTime::now),
        duration: raw
            .started
            .and_then(|s| s.elapsed().ok())
            .unwrap_or_default(),
        comments,
        ..Profile::empty_after_fork()
    };
    let (mut out, location_id) = base.pprof_tables();
    out.sample_types = vec![
        pprof::ValueType::new("alloc_objects", "count"),
        pprof::ValueType::new("alloc_space", "bytes"),
        pprof::ValueType::new("inuse_objects", "count"),
        pprof::ValueType::new("inuse_space", "bytes"),
    ];
    out.period_type = Some(pprof::ValueType::new("space", "bytes"));
    out.period = rate as i64;
    out.default_sample_type = "inuse_space".into();
    out.drop_frames = DROP_FRAMES.into();
    for (s, &((_, size), sums)) in base.samples.iter().zip(&raw.sums) {
        let scale = 1.0 / -(-(size.max(1) as f64) / rate as f64).exp_m1();
        let est = |n: u64| (n as f64 * scale).round() as i64;
        let bytes = |n: u64| (n as f64 * size as f64 * scale).round() as i64;
        out.samples.push(pprof::Sample {
            location_ids: s.locs.iter().map(|l| location_id[l]).collect(),
            values: vec![
                est(sums.alloc),
                bytes(sums.alloc),
                est(sums.inuse),
                bytes(sums.inuse),
            ],
            labels: vec![pprof::Label::num("bytes", size as i64, "bytes")],
        });
    }
    out
}
