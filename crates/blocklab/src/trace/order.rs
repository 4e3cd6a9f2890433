//! Requests in time order: what a reader does when a trace's times go back.
//!
//! A replay in time issues each request at its trace time; one that arrives
//! "in the past" would be issued late and measured from an unknown origin.
//! Real traces do this (merged per-CPU blktrace output, per-volume files
//! merged by hand), so the executors where time matters read with
//! [`TimeOrder::Strict`] (the first request earlier than one before it is an
//! error naming its line) or, when asked, [`TimeOrder::Sort`]: requests are
//! reordered in a bounded window (memory grows with the requests inside it,
//! not with the trace), the reader reports how many moved and how far, and a
//! request further behind than the window is an error naming its line.
//! Analyses without time (`cache`, `mrc`, `trace stats`) read with
//! [`TimeOrder::Any`]: their results do not depend on the times.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::Request;
use crate::error::{Error, Location, Result};

/// What a reader does with times that go back.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TimeOrder {
    /// Times are not looked at.
    #[default]
    Any,
    /// A request earlier than the latest before it is an error.
    Strict,
    /// Requests are put in time order within a window of this many seconds.
    Sort { window_s: f64 },
}

/// What a [`TimeOrder::Sort`] reader did.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Reordered {
    /// Requests read behind a later one (each moved back in the stream).
    pub moved: u64,
    /// How far the farthest of them lay behind the latest time read before it (ms).
    pub max_behind_ms: f64,
    /// The window (ms).
    pub window_ms: f64,
}

impl Reordered {
    /// Several traces' reorders as one: moved summed, the farthest kept.
    pub fn sum(all: &[Reordered]) -> Option<Reordered> {
        let first = all.first()?;
        Some(Reordered {
            moved: all.iter().map(|r| r.moved).sum(),
            max_behind_ms: all.iter().map(|r| r.max_behind_ms).fold(0.0, f64::max),
            window_ms: first.window_ms,
        })
    }
}

/// A request waiting in the window: ordered by time, then by arrival.
struct Pending {
    time: f64,
    seq: u64,
    req: Request,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    // Reversed: the max-heap pops the earliest request, FIFO among equal times.
    fn cmp(&self, o: &Self) -> Ordering {
        o.time.total_cmp(&self.time).then(o.seq.cmp(&self.seq))
    }
}

/// The ordering state of one reader.
pub(crate) struct Orderer {
    order: TimeOrder,
    /// The latest time read so far and where it was read.
    latest: Option<(f64, Location)>,
    heap: BinaryHeap<Pending>,
    seq: u64,
    report: Reordered,
}

impl Orderer {
    pub fn new(order: TimeOrder) -> Result<Orderer> {
        let mut report = Reordered::default();
        if let TimeOrder::Sort { window_s } = order {
            if !(window_s.is_finite() && window_s >= 0.0) {
                return Err(Error::config(format!(
                    "sort window must be a number of seconds >= 0, got {window_s}"
                )));
            }
            report.window_ms = window_s * 1e3;
        }
        Ok(Orderer {
            order,
            latest: None,
            heap: BinaryHeap::new(),
            seq: 0,
            report,
        })
    }

    pub fn order(&self) -> TimeOrder {
        self.order
    }

    pub fn report(&self) -> Option<Reordered> {
        matches!(self.order, TimeOrder::Sort { .. }).then_some(self.report)
    }

    /// Take in a request read at `loc` of `file`: checked (`Strict`), queued
    /// (`Sort`; [`Orderer::pop`] gives it back in order).
    pub fn admit(&mut self, req: Request, loc: Location, file: &std::path::Path) -> Result<Option<Request>> {
        let t = req.time;
        if let Some((latest, at)) = self.latest {
            if t < latest {
                let behind = latest - t;
                match self.order {
                    TimeOrder::Any => {}
                    TimeOrder::Strict => {
                        return Err(Error::parse(
                            file.display().to_string(),
                            loc,
                            "time",
                            format!(
                                "time goes back: {t} s after {latest} s at {at}; replaying in time needs \
                                 requests in time order: sort the trace, or reorder it within a window \
                                 with --sort ([replay] sort = true)"
                            ),
                        ));
                    }
                    TimeOrder::Sort { window_s } => {
                        if behind > window_s {
                            return Err(Error::parse(
                                file.display().to_string(),
                                loc,
                                "time",
                                format!(
                                    "{t} s is {behind:.6} s behind {latest} s at {at}, more than the sort \
                                     window of {window_s} s (--sort-window, replay.sort_window)"
                                ),
                            ));
                        }
                        self.report.moved += 1;
                        self.report.max_behind_ms = self.report.max_behind_ms.max(behind * 1e3);
                    }
                }
            }
        }
        if self.latest.is_none_or(|(latest, _)| t >= latest) {
            self.latest = Some((t, loc));
        }
        if !matches!(self.order, TimeOrder::Sort { .. }) {
            return Ok(Some(req));
        }
        self.heap.push(Pending {
            time: t,
            seq: self.seq,
            req,
        });
        self.seq += 1;
        Ok(None)
    }

    /// `Sort`: the earliest queued request once no request still to come can
    /// be earlier (it lies a whole window behind the latest read), or any
    /// queued request once the input has ended (`drain`).
    pub fn pop(&mut self, drain: bool) -> Option<Request> {
        let TimeOrder::Sort { window_s } = self.order else {
            return None;
        };
        let top = self.heap.peek()?;
        let latest = self.latest.map_or(f64::NEG_INFINITY, |(l, _)| l);
        if drain || top.time < latest - window_s {
            return self.heap.pop().map(|p| p.req);
        }
        None
    }
}
