//! The profile of one window of a running sampler: a later snapshot less an earlier one, so
//! that consecutive windows add up to the whole profile exactly (what a profile pushed every
//! interval must do: issue 42).

use std::collections::HashMap;

use super::*;

impl Profile {
    /// The profile of what the sampler recorded between `before` (an earlier
    /// [`snapshot`](crate::Sampler::snapshot) of the same sampler, or `None` for its start)
    /// and this snapshot or final profile, as uncompressed pprof: each stack's figures less
    /// `before`'s, its time the window's. Windows taken one after another add up to the
    /// final profile exactly, stack by stack. Where the final profile rescaled a thread's
    /// weights (the perf source scales each thread to its CPU time at the stop) or moved
    /// time between the `[not sampled: …]` frames, the last window holds that correction,
    /// negative where it took time away (as a diff's values are). Not a stable API.
    ///
    /// At most `max_samples` samples: past that, the heaviest are kept and the rest folded
    /// into one `[cut: …]` sample holding their figures, so the window's totals stay whole
    /// (Pyroscope refuses a profile of more than 16,000 samples).
    #[doc(hidden)]
    pub fn pprof_since(&self, before: Option<&Profile>, max_samples: usize) -> Vec<u8> {
        let mut window = self.clone();
        let Some(before) = before else {
            window.cut_to(max_samples);
            return window.to_pprof_bytes();
        };
        let earlier: HashMap<(u32, &[Loc], &[u32]), Counts> = before
            .samples
            .iter()
            .map(|s| ((s.tid, &s.locs[..], &s.scopes[..]), s.counts))
            .collect();
        let mut seen = std::collections::HashSet::new();
        window.samples.retain_mut(|s| {
            let key = (s.tid, &s.locs[..], &s.scopes[..]);
            if let Some(c) = earlier.get(&key) {
                seen.insert((s.tid, s.locs.clone(), s.scopes.clone()));
                // Differences, held as two's complement: the pprof writer's `as i64` reads
                // them back as the signed values they are.
                s.counts.count = s.counts.count.wrapping_sub(c.count);
                s.counts.weight = s.counts.weight.wrapping_sub(c.weight);
            }
            s.counts != Counts::default()
        });
        // Stacks the earlier snapshot had and this one has not (time moved away from a
        // synthetic frame): their figures go, negative.
        for s in &before.samples {
            if !seen.contains(&(s.tid, s.locs.clone(), s.scopes.clone()))
                && s.counts != Counts::default()
            {
                let mut gone = s.clone();
                gone.counts.count = 0u64.wrapping_sub(s.counts.count);
                gone.counts.weight = 0u64.wrapping_sub(s.counts.weight);
                window.samples.push(gone);
            }
        }
        window.start_time = before.start_time + before.duration;
        window.duration = self.duration.saturating_sub(before.duration);
        window.taken = self.taken.saturating_sub(before.taken);
        window.comments = vec![format!(
            "a window of {:.3} s of a running sampler: its figures less an earlier snapshot's",
            window.duration.as_secs_f64()
        )];
        window.warnings.clear();
        // Names the earlier snapshot had for addresses, threads or scopes that this one's
        // tables lack are not needed: the samples kept are this one's own or the earlier's,
        // whose names are merged in.
        for (k, v) in &before.symbols {
            window.symbols.entry(*k).or_insert_with(|| v.clone());
        }
        for (k, v) in &before.names {
            window.names.entry(*k).or_insert_with(|| v.clone());
        }
        for (k, v) in &before.scope_names {
            window.scope_names.entry(*k).or_insert_with(|| v.clone());
        }
        window.cut_to(max_samples);
        window.to_pprof_bytes()
    }

    /// Keeps the `max` heaviest samples, those past `max - 1` folded into one.
    fn cut_to(&mut self, max: usize) {
        let max = max.max(1);
        if self.samples.len() <= max {
            return;
        }
        // Heaviest first by the size of their time (a window's may be negative).
        self.samples
            .sort_by_key(|s| std::cmp::Reverse((s.counts.weight as i64).unsigned_abs()));
        let rest = self.samples.split_off(max - 1);
        let n = rest.len();
        let mut folded = Counts::default();
        for s in rest {
            folded.count = folded.count.wrapping_add(s.counts.count);
            folded.weight = folded.weight.wrapping_add(s.counts.weight);
        }
        self.samples.push(Sample {
            tid: 0,
            locs: vec![Loc::Synthetic(CUT)],
            scopes: Vec::new(),
            counts: folded,
        });
        self.comments.push(format!(
            "{n} lighter stacks folded into {CUT:?} (a sample limit)"
        ));
    }
}

/// The frame of the samples [`Profile::cut_to`] folded.
const CUT: &str = "[cut: lighter stacks past the sample limit]";
