//! The histogram of durations `tickscope report` takes percentiles from: the in-process
//! summary's, from [`tickscope_fmt::hist`], so both report the same p50/p99 (good to 2%;
//! reports clamp every percentile to the exact min and max).

pub(crate) use tickscope_fmt::hist::Counts as Hist;
