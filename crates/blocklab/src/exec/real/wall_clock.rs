//! The wall clock under the replay disciplines (`exec::discipline`) for
//! `real replay`: the same open, closed and feedback code the timed
//! executor runs in simulated time, here with time read from `Instant` and
//! requests served on real bytes.
//!
//! Requests are served either by a pool of worker threads, each with a
//! [`Port`] of its own (an array, locally or over NBD: several in flight),
//! or inline by the issuer itself (a stack, which serves one request at a
//! time; an array replayed with one worker). Times are ns since the pass
//! began. A wake is handed out when its time has come, with the time it was
//! asked for; a request issued then is *due* at that time, and its response
//! time runs from it, so time spent late (waiting for a free worker, or for
//! the issuer) counts, as queueing does in the timed executor. A request
//! issued on a completion (closed loop, no think time) waits for nothing:
//! its response time runs from when it is served (its worker takes it), so
//! the hand-off is not counted. A completion carries the time its worker saw
//! it end.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::exec::discipline::{Clock, Ended, Event, Pass};
use crate::timed::engine::Ns;
use crate::trace::Request;

/// What serves a replay's requests on real bytes.
pub(super) trait Port {
    /// Serve `req` (its op, offset and length placed on the target) with
    /// `buf` as its buffer; whether it succeeded.
    fn serve(&mut self, req: &Request, buf: &mut Vec<u8>) -> bool;
}

/// A served request, as the replay's figures take it.
pub(super) struct Served {
    pub req: Request,
    pub due: Instant,
    /// From `due` to its completion.
    pub response_ns: u64,
    pub ok: bool,
}

/// Requests handed to the pool and not yet taken by a worker: bounded, so
/// that a slow target delays issuing (which shows in the response times)
/// instead of queueing the whole trace in memory.
const QUEUE: usize = 4096;

struct Job {
    tag: u64,
    req: Request,
    /// `None`: due when served.
    due: Option<Instant>,
}

struct Completion {
    tag: u64,
    req: Request,
    due: Instant,
    end: Instant,
    ok: bool,
}

enum Servers<'p> {
    Inline(&'p mut dyn Port),
    Pool {
        jobs: SyncSender<Job>,
        done: Receiver<Completion>,
    },
}

/// The wall clock: wakes in a heap, completions as workers report them.
pub(super) struct WallClock<'p> {
    servers: Servers<'p>,
    /// Where the measured pass's requests go as they complete.
    record: &'p mut dyn FnMut(&Served),
    measuring: bool,
    t0: Instant,
    /// The time of the event being handled (what an issue is due at).
    now: Ns,
    /// That event is a wake (else a completion, or the pass's start).
    on_wake: bool,
    seq: u64,
    /// (time, order asked, token).
    wakes: BinaryHeap<Reverse<(Ns, u64, u64)>>,
    /// Completions received, not yet handed out: (time, order, tag).
    done: BinaryHeap<Reverse<(Ns, u64, u64)>>,
    in_flight: usize,
}

impl<'p> WallClock<'p> {
    fn new(servers: Servers<'p>, record: &'p mut dyn FnMut(&Served)) -> Self {
        WallClock {
            servers,
            record,
            measuring: false,
            t0: Instant::now(),
            now: 0,
            on_wake: false,
            seq: 0,
            wakes: BinaryHeap::new(),
            done: BinaryHeap::new(),
            in_flight: 0,
        }
    }

    /// A clock whose issuer serves every request itself on `port`.
    pub(super) fn inline(port: &'p mut dyn Port, record: &'p mut dyn FnMut(&Served)) -> Self {
        Self::new(Servers::Inline(port), record)
    }

    fn since_t0(&self, at: Instant) -> Ns {
        at.saturating_duration_since(self.t0).as_nanos() as Ns
    }

    fn completed(&mut self, c: Completion) {
        let response_ns = c.end.saturating_duration_since(c.due).as_nanos() as u64;
        if self.measuring {
            (self.record)(&Served {
                req: c.req,
                due: c.due,
                response_ns,
                ok: c.ok,
            });
        }
        self.seq += 1;
        let at = self.since_t0(c.end);
        self.done.push(Reverse((at, self.seq, c.tag)));
    }

    /// Take what the workers completed; with `until`, wait for one until then
    /// (`None`: for as long as it takes).
    fn collect(&mut self, wait: Option<Option<Instant>>) -> Result<()> {
        let Servers::Pool { done, .. } = &self.servers else {
            return Ok(());
        };
        let mut got = Vec::new();
        match wait {
            None => {}
            Some(None) => got.push(
                done.recv()
                    .map_err(|_| Error::config("internal: the replay's workers ended"))?,
            ),
            Some(Some(until)) => match done.recv_timeout(until.saturating_duration_since(Instant::now())) {
                Ok(c) => got.push(c),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::config("internal: the replay's workers ended"))
                }
            },
        }
        got.extend(done.try_iter());
        for c in got {
            self.in_flight -= 1;
            self.completed(c);
        }
        Ok(())
    }
}

/// Run `body` with a clock whose requests are served by one worker thread
/// per port; the workers end when it returns.
pub(super) fn with_pool<R>(
    ports: Vec<Box<dyn Port + Send + '_>>,
    record: &mut dyn FnMut(&Served),
    body: impl FnOnce(&mut WallClock) -> R,
) -> R {
    std::thread::scope(|s| {
        let (jobs_tx, jobs_rx) = mpsc::sync_channel::<Job>(QUEUE);
        let (done_tx, done_rx) = mpsc::channel::<Completion>();
        let jobs_rx = Arc::new(Mutex::new(jobs_rx));
        for mut port in ports {
            let (jobs_rx, done_tx) = (jobs_rx.clone(), done_tx.clone());
            s.spawn(move || {
                let mut buf = Vec::new();
                loop {
                    let job = jobs_rx.lock().unwrap().recv();
                    let Ok(Job { tag, req, due }) = job else { break };
                    let due = due.unwrap_or_else(Instant::now);
                    let ok = port.serve(&req, &mut buf);
                    let end = Instant::now();
                    if done_tx.send(Completion { tag, req, due, end, ok }).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done_tx);
        let mut clock = WallClock::new(
            Servers::Pool {
                jobs: jobs_tx,
                done: done_rx,
            },
            record,
        );
        // Dropping the clock closes the queue: the workers finish and leave.
        body(&mut clock)
    })
}

impl Clock for WallClock<'_> {
    fn begin(&mut self, pass: Pass) -> Result<()> {
        debug_assert!(self.in_flight == 0 && self.wakes.is_empty() && self.done.is_empty());
        self.measuring = pass == Pass::Measured;
        self.t0 = Instant::now();
        self.now = 0;
        self.on_wake = false;
        Ok(())
    }

    fn wake_at(&mut self, time: Ns, token: u64) {
        self.seq += 1;
        self.wakes.push(Reverse((time, self.seq, token)));
    }

    fn issue(&mut self, req: &Request, _base: f64, tag: u64) -> Result<()> {
        let due = self.on_wake.then(|| self.t0 + Duration::from_nanos(self.now));
        match &mut self.servers {
            Servers::Inline(port) => {
                let due = due.unwrap_or_else(Instant::now);
                let mut buf = Vec::new();
                let ok = port.serve(req, &mut buf);
                let end = Instant::now();
                self.completed(Completion {
                    tag,
                    req: *req,
                    due,
                    end,
                    ok,
                });
            }
            Servers::Pool { jobs, .. } => {
                jobs.send(Job { tag, req: *req, due })
                    .map_err(|_| Error::config("internal: the replay's workers ended"))?;
                self.in_flight += 1;
            }
        }
        Ok(())
    }

    /// The earlier of the first completion not handed out and the first wake
    /// whose time has come (a completion first on a tie); else wait for
    /// whichever comes first.
    fn next(&mut self) -> Result<Option<Event>> {
        loop {
            self.collect(None)?;
            let wake = self.wakes.peek().map(|Reverse((t, ..))| *t);
            let done = self.done.peek().map(|Reverse((t, ..))| *t);
            let elapsed = self.since_t0(Instant::now());
            match (wake, done) {
                (Some(w), d) if w <= elapsed && d.is_none_or(|d| w < d) => {
                    let Reverse((time, _, token)) = self.wakes.pop().expect("peeked");
                    (self.now, self.on_wake) = (time, true);
                    return Ok(Some(Event::Wake { time, token }));
                }
                (_, Some(_)) => {
                    let Reverse((time, _, tag)) = self.done.pop().expect("peeked");
                    (self.now, self.on_wake) = (time, false);
                    return Ok(Some(Event::Done { time, tag }));
                }
                (None, None) if self.in_flight == 0 => return Ok(None),
                (None, None) => self.collect(Some(None))?,
                (Some(w), None) => {
                    let until = self.t0 + Duration::from_nanos(w);
                    if self.in_flight > 0 {
                        self.collect(Some(Some(until)))?;
                    } else {
                        std::thread::sleep(until.saturating_duration_since(Instant::now()));
                    }
                }
            }
        }
    }

    fn end(&mut self, _ended: Ended) -> Result<()> {
        debug_assert!(self.in_flight == 0);
        Ok(())
    }
}

#[cfg(test)]
#[path = "wall_clock_tests.rs"]
mod tests;
