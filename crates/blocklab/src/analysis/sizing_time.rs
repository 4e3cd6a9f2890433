//! How long the sizing analysis takes, per tenant and window: what
//! ECI-Cache's App. B (Table 3) reports for its URD calculation per VM
//! (0.38-22.67 s, mean 4.82 s on its host), measured on the code the tier's
//! `centaur` and `eci` partitioners run.
//!
//! In the tier that work is interleaved with the cache: every block access
//! goes through the tenant's reuse stack ([`ReuseTracker`]) as it arrives,
//! and the wishes are read off the profiles when the window closes
//! ([`Sizing`]). Here each tenant's accesses of a window are kept and, when
//! the window closes, run through the same stack (carried over windows as
//! the tier's `history` says), closed and sized for both schemes (one pass
//! gives both distances), under one clock per tenant: the paper's "time we
//! should wait until URD is calculated" for that VM and window. The shared
//! solver is not in it (one call per window for all tenants).
//!
//! The seconds are this machine's wall clock: a measurement, not a
//! deterministic figure (every other field is).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::reuse::{History, ReuseOptions, ReuseTracker};
use super::sizing::{Scheme, Sizing};
use crate::error::{Error, Result};
use crate::trace::{open, Op, Request, TraceOptions};

/// One tenant in one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizingTime {
    pub tenant: u32,
    /// Index k: the window covers [t0 + k·W, t0 + (k+1)·W).
    pub window: u64,
    /// Block accesses of the tenant in the window.
    pub accesses: u64,
    /// Wall-clock seconds of its analysis.
    pub seconds: f64,
    /// What Centaur and ECI want for the next window (as the tier decides).
    pub trd_size: u64,
    pub urd_size: u64,
}

/// Times the analysis of a request stream, window by window.
pub struct SizingTimer {
    block_size: u64,
    window_s: f64,
    history: History,
    /// One stack per tenant, as the tier's tracker keeps them.
    trackers: BTreeMap<u32, ReuseTracker>,
    /// The current window's (block, write) accesses per tenant.
    pending: BTreeMap<u32, Vec<(u64, bool)>>,
    clock: Option<(f64, u64)>,
    centaur: Sizing,
    eci: Sizing,
    out: Vec<SizingTime>,
}

impl SizingTimer {
    /// `opts.window` is required (the analysis runs once per window);
    /// `opts.per_tenant` is implied.
    pub fn new(opts: ReuseOptions) -> Result<Self> {
        opts.validate()?;
        let window_s = opts
            .window
            .ok_or_else(|| Error::config("the sizing time needs a window length (--window)"))?;
        Ok(SizingTimer {
            block_size: opts.block_size,
            window_s,
            history: opts.history,
            trackers: BTreeMap::new(),
            pending: BTreeMap::new(),
            clock: None,
            centaur: Sizing::new(Scheme::Centaur),
            eci: Sizing::new(Scheme::Eci),
            out: Vec::new(),
        })
    }

    /// Account one request (a request past the current window closes it first).
    pub fn add(&mut self, r: &Request) {
        match self.clock {
            None => self.clock = Some((r.time, 0)),
            Some((t0, k)) => {
                let at = ((r.time - t0) / self.window_s).floor();
                if at > k as f64 {
                    self.close(k);
                    self.clock = Some((t0, at as u64));
                }
            }
        }
        let write = r.op == Op::Write;
        let v = self.pending.entry(r.tenant).or_default();
        v.extend(r.blocks(self.block_size).map(|b| (b, write)));
    }

    /// Analyse every tenant of window `k`, one clock each.
    fn close(&mut self, k: u64) {
        let history = self.history;
        for (tenant, accesses) in std::mem::take(&mut self.pending) {
            if accesses.is_empty() {
                continue;
            }
            let tracker = self
                .trackers
                .entry(tenant)
                .or_insert_with(|| ReuseTracker::new(true, history));
            let start = Instant::now();
            for &(b, w) in &accesses {
                // Per-tenant keys never overflow: only a pooled tracker can fail.
                let _ = tracker.access(tenant, b, w);
            }
            let (trd_size, urd_size) = match tracker.end_window().pop() {
                Some((_, p)) => {
                    let c = self.centaur.demand(tenant, &p);
                    let e = self.eci.demand(tenant, &p);
                    (c.want, e.want)
                }
                None => (0, 0),
            };
            let seconds = start.elapsed().as_secs_f64();
            self.out.push(SizingTime {
                tenant,
                window: k,
                accesses: accesses.len() as u64,
                seconds,
                trd_size,
                urd_size,
            });
        }
    }

    /// Close the last window; the rows by window, then tenant.
    pub fn finish(mut self) -> Vec<SizingTime> {
        if let Some((_, k)) = self.clock {
            self.close(k);
        }
        self.out
    }
}

/// The sizing time of every tenant and window of the trace at `path`.
pub fn time_sizing(path: &Path, trace: &TraceOptions, opts: &ReuseOptions) -> Result<Vec<SizingTime>> {
    let mut t = SizingTimer::new(*opts)?;
    let mut reader = open(path, trace)?;
    for r in &mut reader {
        t.add(&r?);
    }
    Ok(t.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rq(time: f64, op: Op, tenant: u32, block: u64) -> Request {
        Request {
            time,
            op,
            offset: block * 4096,
            len: 4096,
            tenant,
            fs: Default::default(),
        }
    }

    #[test]
    fn one_row_per_active_tenant_and_window_with_the_tiers_sizes() {
        // Window 0 (0-9 s): tenant 1 runs the paper's Fig. 5 (R2 R3 R4 R5 W1
        // W2 R1: TRD wants 5 blocks, URD 2); tenant 2 reads block 9 twice
        // (both want 1). Window 1: tenant 2 reads block 9 again; its stack is
        // kept (history "all"): distance 1 again. Tenant 1 is idle: no row.
        let mut reqs = Vec::new();
        for (i, (w, b)) in [
            (false, 2),
            (false, 3),
            (false, 4),
            (false, 5),
            (true, 1),
            (true, 2),
            (false, 1),
        ]
        .into_iter()
        .enumerate()
        {
            reqs.push(rq(i as f64, if w { Op::Write } else { Op::Read }, 1, b));
        }
        reqs.push(rq(7.0, Op::Read, 2, 9));
        reqs.push(rq(8.0, Op::Read, 2, 9));
        reqs.push(rq(12.0, Op::Read, 2, 9));
        let mut t = SizingTimer::new(ReuseOptions {
            block_size: 4096,
            per_tenant: true,
            window: Some(10.0),
            history: History::All,
        })
        .unwrap();
        for r in &reqs {
            t.add(r);
        }
        let rows = t.finish();
        let got: Vec<(u32, u64, u64, u64, u64)> = rows
            .iter()
            .map(|r| (r.tenant, r.window, r.accesses, r.trd_size, r.urd_size))
            .collect();
        assert_eq!(got, vec![(1, 0, 7, 5, 2), (2, 0, 2, 1, 1), (2, 1, 1, 1, 1)]);
        assert!(rows.iter().all(|r| r.seconds >= 0.0 && r.seconds.is_finite()));
    }

    #[test]
    fn a_window_length_is_required() {
        let e = SizingTimer::new(ReuseOptions::default()).err().unwrap().to_string();
        assert!(e.contains("window"), "{e}");
    }
}
