//! `real replay`: a trace's requests issued against a real array, and their
//! response times in the timed executor's schema (`response`: avg, p50,
//! p95, p99, max in ms, and the same for reads and writes), so that a
//! simulated and a real run of the same stack can be set side by side.
//!
//! The disciplines are the timed executor's (`exec::discipline`), run over
//! the wall clock (`wall_clock.rs`):
//!
//! * **open** — each request is due at its trace time (from the stream's
//!   first request) divided by `speedup`; a pool of `threads` workers serves
//!   them, and a response time runs from the due time, so time spent
//!   waiting for a free worker counts, as queueing does in the timed engine.
//! * **closed** — `outstanding` requests per stream in flight (as many
//!   workers), each completion issuing the stream's next request after
//!   `think_ms` (0: at once).
//! * **feedback** — Hsu–Smith: a first open pass at the trace's own times
//!   on the same array gives each request its parent and think time; the
//!   measured pass issues it a think time after its parent completed
//!   (`speedup` is then the processor speed-up n, `infinitely_fast` its
//!   limit), within an issue window of `window` requests per stream, on
//!   `threads` workers. The trace is read twice; only the second pass is
//!   reported (and logged).
//!
//! Each trace is one independent stream. Writes carry a pattern derived from
//! their offset. Requests the array cannot serve (too many failed members)
//! are counted in `errors` and left out of the response times, as the timed
//! executor leaves out unreadable requests. If the array is being served,
//! the replay goes through the server (one NBD connection per worker);
//! otherwise it opens the array itself, with O_DIRECT when asked and the
//! file system allows it.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::control::server_of;
use super::wall_clock::{with_pool, Port, Served, WallClock};
use super::{OpenConfig, RealArray};
use crate::error::{Error, Result};
use crate::exec::discipline::{self, Discipline, Source, ISSUE_WINDOW, REPLAYS};
use crate::nbd::client::Client;
use crate::timed::latency::Latencies;
use crate::trace::order::Reordered;
use crate::trace::{self, Op, Request, TraceOptions, TraceReader};

/// `real replay` settings.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub traces: Vec<String>,
    pub format: String,
    pub skip_bad: bool,
    /// `open`, `closed` or `feedback`.
    pub replay: String,
    /// Open loop: trace times are divided by it; feedback: the processor
    /// speed-up n.
    pub speedup: f64,
    /// Closed loop: requests in flight per stream.
    pub outstanding: usize,
    /// Closed loop: ms between a completion and the stream's next issue.
    pub think_ms: f64,
    /// Feedback: the issue window per stream.
    pub window: usize,
    /// Feedback: an infinitely fast processor (each think time x becomes
    /// x[1 − f(x)]) instead of `speedup`.
    pub infinitely_fast: bool,
    /// Open loop and feedback: worker threads (requests in flight at most).
    pub threads: usize,
    pub direct: bool,
    /// Fold offsets past the array's end back into it.
    pub wrap: bool,
    /// Stop after this many requests per stream (0: all).
    pub limit: u64,
    /// Leave out each stream's first requests (read, not issued): a replay
    /// that goes on where an earlier one with `limit` stopped, e.g. after a
    /// warm-up. `limit` counts the requests after them.
    pub skip: u64,
    /// Write one CSV line per request here (`RequestLog`), so that a caller
    /// can take the figures of any phase (e.g. while a rebuild ran).
    pub log: Option<String>,
    /// Put times that go back in order within this many seconds (None:
    /// they are an error naming the line); see trace::order.
    pub sort_window: Option<f64>,
    /// Start a dirty degraded array (`--start-dirty-degraded`).
    pub start_dirty_degraded: bool,
}

impl ReplayOptions {
    /// The discipline asked for, checked.
    pub fn discipline(&self) -> Result<Discipline> {
        let d = match self.replay.to_ascii_lowercase().as_str() {
            "open" => Discipline::Open { speedup: self.speedup },
            "closed" => Discipline::Closed {
                outstanding: self.outstanding,
                think_ms: self.think_ms,
            },
            "feedback" => Discipline::Feedback {
                cpu_speedup: (!self.infinitely_fast).then_some(self.speedup),
                window: self.window,
            },
            other => return Err(Error::unknown("replay discipline", other, REPLAYS)),
        };
        d.check()?;
        Ok(d)
    }

    /// Whether a stream's request `i` (counted from its first, skipped ones
    /// included) is past `skip` + `limit`.
    pub fn past_limit(&self, i: u64) -> bool {
        self.limit > 0 && i >= self.skip.saturating_add(self.limit)
    }

    /// How the traces are read.
    pub fn trace_options(&self) -> TraceOptions {
        TraceOptions {
            format: self.format.clone(),
            skip_bad: self.skip_bad,
            order: match self.sort_window {
                Some(window_s) => crate::trace::order::TimeOrder::Sort { window_s },
                None => crate::trace::order::TimeOrder::Strict,
            },
            ..Default::default()
        }
    }

    /// How the array is opened for the replay.
    pub fn open_config(&self) -> OpenConfig {
        OpenConfig {
            direct: self.direct,
            faults: None,
            start_dirty_degraded: self.start_dirty_degraded,
        }
    }
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            traces: vec![],
            format: "auto".into(),
            skip_bad: false,
            replay: "open".into(),
            speedup: 1.0,
            outstanding: 1,
            think_ms: 0.0,
            window: ISSUE_WINDOW,
            infinitely_fast: false,
            threads: 32,
            direct: true,
            wrap: false,
            limit: 0,
            skip: 0,
            log: None,
            sort_window: None,
            start_dirty_degraded: false,
        }
    }
}

/// Response-time summary of one class of requests (ms).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The `response` object: all requests, then reads and writes apart.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Response {
    pub avg_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub reads: Summary,
    pub writes: Summary,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReplayReport {
    pub replay: String,
    pub streams: usize,
    /// `local` (the array opened here) or `nbd` (through its server).
    pub target: String,
    pub direct: bool,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    /// Requests the array refused (unreadable data, I/O errors).
    pub errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub wall_s: f64,
    pub response: Response,
    /// `--sort`: the requests the reorder moved (summed over the traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reordered: Option<crate::trace::order::Reordered>,
}

/// Response times of one class, as the timed executor takes them
/// (`timed::latency`: exact percentiles for small runs, within [min, max]).
fn summary(l: &Latencies) -> Summary {
    let q = l.quantiles_ms(&[0.50, 0.95, 0.99]);
    Summary {
        avg_ms: l.mean_ms(),
        p50_ms: q[0],
        p95_ms: q[1],
        p99_ms: q[2],
        max_ms: l.max_ms(),
    }
}

/// Where requests go.
enum Target {
    Local(Arc<RealArray>),
    Nbd(String, String),
}

/// One worker's connection to the target.
enum Conn {
    Local(Arc<RealArray>),
    Nbd(Client),
}

impl Target {
    fn conn(&self) -> Result<Conn> {
        Ok(match self {
            Target::Local(a) => Conn::Local(a.clone()),
            Target::Nbd(addr, name) => Conn::Nbd(
                Client::connect(addr, name).map_err(|e| Error::config(format!("cannot connect to {addr}: {e}")))?,
            ),
        })
    }
}

impl Conn {
    fn issue(&mut self, op: Op, offset: u64, buf: &mut [u8]) -> bool {
        match (self, op) {
            (Conn::Local(a), Op::Read) => a.read(offset, buf).is_ok(),
            (Conn::Local(a), Op::Write) => a.write(offset, buf, false).is_ok(),
            (Conn::Nbd(c), Op::Read) => c.read(offset, buf).is_ok(),
            (Conn::Nbd(c), Op::Write) => c.write(offset, buf, false).is_ok(),
        }
    }
}

/// A worker's connection serves the requests it is handed.
impl Port for Conn {
    fn serve(&mut self, req: &Request, buf: &mut Vec<u8>) -> bool {
        buf.clear();
        buf.resize(req.len as usize, 0);
        if req.op == Op::Write {
            pattern(buf, req.offset);
        }
        self.issue(req.op, req.offset, buf)
    }
}

/// What the measured pass's requests add up to.
#[derive(Default)]
struct Totals {
    reads: Latencies,
    writes: Latencies,
    requests: u64,
    errors: u64,
    bytes_read: u64,
    bytes_written: u64,
}

impl Totals {
    fn record(&mut self, s: &Served) {
        self.requests += 1;
        if !s.ok {
            self.errors += 1;
            return;
        }
        match s.req.op {
            Op::Read => {
                self.bytes_read += s.req.len;
                self.reads.record(s.response_ns);
            }
            Op::Write => {
                self.bytes_written += s.req.len;
                self.writes.record(s.response_ns);
            }
        }
    }
}

/// A stream cut by `--skip` / `--limit`: request `i` of the trace (counted
/// from its first) is left out below `skip` and ends the stream at
/// `skip + limit`; an error in a skipped request still stops the replay.
pub(super) struct Cut<I> {
    it: I,
    i: u64,
    skip: u64,
    limit: u64,
    ended: bool,
}

impl<I> Cut<I> {
    pub(super) fn new(it: I, opts: &ReplayOptions) -> Self {
        Cut {
            it,
            i: 0,
            skip: opts.skip,
            limit: opts.limit,
            ended: false,
        }
    }
}

impl<T, I: Iterator<Item = Result<T>>> Iterator for Cut<I> {
    type Item = Result<T>;
    fn next(&mut self) -> Option<Result<T>> {
        while !self.ended {
            let Some(r) = self.it.next() else { break };
            let i = self.i;
            self.i += 1;
            if self.limit > 0 && i >= self.skip.saturating_add(self.limit) {
                break;
            }
            match r {
                Ok(_) if i < self.skip => continue,
                r => return Some(r),
            }
        }
        self.ended = true;
        None
    }
}

/// A trace reader that leaves what its reorder moved (`--sort`) in `sink`
/// when it is dropped, however far it was read.
pub(super) struct Reorders {
    reader: TraceReader,
    sink: Arc<Mutex<Option<Reordered>>>,
}

impl Reorders {
    pub(super) fn new(reader: TraceReader, sink: &Arc<Mutex<Option<Reordered>>>) -> Self {
        Reorders {
            reader,
            sink: sink.clone(),
        }
    }
}

impl Iterator for Reorders {
    type Item = Result<Request>;
    fn next(&mut self) -> Option<Result<Request>> {
        self.reader.next()
    }
}

impl Drop for Reorders {
    fn drop(&mut self) {
        *self.sink.lock().unwrap() = self.reader.reordered();
    }
}

/// `--log`: one line per request, `issued_unix_s,op,offset,bytes,response_ms,ok`
/// (when it was due, in seconds since the Unix epoch; read `R` or write `W`;
/// its response time; 1 if it succeeded). Lines are written as requests
/// complete, so memory does not grow with the trace; times are on the same
/// clock as a rebuild report's `started_unix_s` / `finished_unix_s`.
pub(super) struct RequestLog {
    out: Mutex<std::io::BufWriter<std::fs::File>>,
    path: String,
    /// The Unix time of `t0`, and `t0` itself.
    unix0: f64,
    t0: Instant,
}

pub(super) const LOG_HEADER: &str = "issued_unix_s,op,offset,bytes,response_ms,ok";

impl RequestLog {
    pub(super) fn create(path: &str, t0: Instant) -> Result<RequestLog> {
        use std::io::Write;
        let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
        let mut out = std::io::BufWriter::new(f);
        writeln!(out, "{LOG_HEADER}").map_err(|e| Error::io(path, e))?;
        Ok(RequestLog {
            out: Mutex::new(out),
            path: path.into(),
            unix0: super::rebuild::unix_now_s() - t0.elapsed().as_secs_f64(),
            t0,
        })
    }

    pub(super) fn record(&self, op: Op, offset: u64, len: u64, due: Instant, ns: u64, ok: bool) {
        use std::io::Write;
        let at = self.unix0 + due.saturating_duration_since(self.t0).as_secs_f64();
        let op = if op == Op::Read { 'R' } else { 'W' };
        // A failed log write shows at `finish`, which flushes.
        let _ = writeln!(
            self.out.lock().unwrap(),
            "{at:.6},{op},{offset},{len},{:.4},{}",
            ns as f64 / 1e6,
            ok as u8
        );
    }

    pub(super) fn finish(self) -> Result<()> {
        use std::io::Write;
        let path = self.path;
        self.out.into_inner().unwrap().flush().map_err(|e| Error::io(&path, e))
    }
}

/// A request placed on the array: (op, offset, len).
pub(super) fn place(r: &Request, size: u64, wrap: bool, file: &str) -> Result<(Op, u64, u64)> {
    place_in(r, size, wrap, file, || "the array".into())
}

/// [`place`] into `target` (a stack's tenant volume: "tenant 1's volume").
/// `target` names what is addressed, for an error only (not built per request).
pub(super) fn place_in(
    r: &Request,
    size: u64,
    wrap: bool,
    file: &str,
    target: impl Fn() -> String,
) -> Result<(Op, u64, u64)> {
    let len = r.len.max(512);
    if len > size {
        return Err(Error::config(format!(
            "{file}: a request of {len} bytes is larger than {} ({size} bytes)",
            target()
        )));
    }
    let mut off = r.offset;
    if off + len > size {
        if !wrap {
            return Err(Error::config(format!(
                "{file}: a request at byte {off} ({len} bytes) is past the end of {} ({size} bytes); \
                 use --wrap to fold offsets into it",
                target()
            )));
        }
        off %= size - len + 1;
    }
    Ok((r.op, off, len))
}

#[cfg(test)]
pub fn pattern_for_tests(buf: &mut [u8], offset: u64) {
    pattern(buf, offset)
}

/// Fill a write's buffer with a pattern of its offset.
/// The contents a replayed write carries (derived from its offset).
pub(super) fn fill_pattern(buf: &mut [u8], offset: u64) {
    pattern(buf, offset)
}

fn pattern(buf: &mut [u8], offset: u64) {
    let mut x = offset ^ 0x9E37_79B9_7F4A_7C15;
    for c in buf.chunks_mut(8) {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let b = x.to_le_bytes();
        c.copy_from_slice(&b[..c.len()]);
    }
}

/// Replay `opts.traces` against the array in `dir`.
pub fn replay(dir: &Path, opts: &ReplayOptions) -> Result<ReplayReport> {
    if super::dgraid::is_dgraid_dir(dir) {
        return Err(Error::config(format!(
            "{}: a D-GRAID array is not replayed (it places a file system's blocks): serve it and mount it",
            dir.display()
        )));
    }
    if opts.traces.is_empty() {
        return Err(Error::config("no trace given"));
    }
    let discipline = opts.discipline()?;
    if opts.outstanding == 0 || opts.threads == 0 {
        return Err(Error::config("outstanding requests and threads must be at least 1"));
    }
    let topts = opts.trace_options();
    // Open every trace first: a bad path or format fails before any I/O.
    let mut readers = Vec::new();
    for t in &opts.traces {
        readers.push(Some(trace::open(Path::new(t), &topts)?));
    }
    let (target, size, direct, local) = match server_of(dir)? {
        Some(info) => {
            let c = Client::connect(&info.nbd, &info.export)
                .map_err(|e| Error::config(format!("cannot connect to the server at {}: {e}", info.nbd)))?;
            (Target::Nbd(info.nbd.clone(), info.export.clone()), c.size, false, None)
        }
        None => {
            let a = Arc::new(RealArray::open(dir, opts.open_config())?);
            let (size, direct) = (a.size_bytes(), a.status().direct);
            (Target::Local(a.clone()), size, direct, Some(a))
        }
    };
    let target_name = if local.is_some() { "local" } else { "nbd" };
    let t0 = Instant::now();
    let log_owned = match &opts.log {
        Some(p) => Some(RequestLog::create(p, t0)?),
        None => None,
    };
    let log = log_owned.as_ref();
    let streams = readers.len();
    // What each trace's reorder moved (in the last pass).
    let sinks: Vec<Arc<Mutex<Option<Reordered>>>> = (0..streams).map(|_| Arc::default()).collect();
    let mut totals = Totals::default();
    let result: Result<()> = (|| {
        // One worker (and connection) per request in flight at most.
        let workers = match discipline {
            Discipline::Closed { outstanding, .. } => outstanding * streams,
            _ => opts.threads,
        };
        let mut ports = (0..workers)
            .map(|_| target.conn().map(|c| Box::new(c) as Box<dyn Port + Send>))
            .collect::<Result<Vec<_>>>()?;
        let mut sources: Vec<Source> = readers
            .iter_mut()
            .zip(&opts.traces)
            .zip(&sinks)
            .map(|((first, file), sink)| {
                let (file, topts) = (file.clone(), topts.clone());
                Box::new(move || {
                    // The reader opened above first, then the trace again (feedback's second pass).
                    let reader = match first.take() {
                        Some(r) => r,
                        None => trace::open(Path::new(&file), &topts)?,
                    };
                    let (file, wrap) = (file.clone(), opts.wrap);
                    let placed = Cut::new(Reorders::new(reader, sink), opts).map(move |r| {
                        let r = r?;
                        let (op, offset, len) = place(&r, size, wrap, &file)?;
                        Ok(Request { op, offset, len, ..r })
                    });
                    Ok(Box::new(placed) as Box<dyn Iterator<Item = Result<Request>> + Send>)
                }) as Source
            })
            .collect();
        let mut record = |s: &Served| {
            if let Some(log) = log {
                log.record(s.req.op, s.req.offset, s.req.len, s.due, s.response_ns, s.ok);
            }
            totals.record(s);
        };
        if let [port] = ports.as_mut_slice() {
            // One worker: the issuer serves each request itself, without a
            // hand-off to a thread and back (closed with one outstanding).
            let mut clock = WallClock::inline(&mut **port, &mut record);
            return discipline::replay(&mut clock, &mut sources, &discipline);
        }
        with_pool(ports, &mut record, |clock| {
            discipline::replay(clock, &mut sources, &discipline)
        })
    })();
    let wall_s = t0.elapsed().as_secs_f64();
    let reordered = Reordered::sum(
        &sinks
            .iter()
            .filter_map(|s| s.lock().unwrap().take())
            .collect::<Vec<_>>(),
    );
    drop(target);
    if let Some(l) = log_owned {
        l.finish()?;
    }
    if let Some(a) = local {
        let a = Arc::try_unwrap(a).map_err(|_| Error::config("array still in use after the replay"))?;
        a.close()?;
    }
    result?;
    let mut all = Latencies::new();
    all.merge(&totals.reads);
    all.merge(&totals.writes);
    let a = summary(&all);
    Ok(ReplayReport {
        replay: discipline.name().into(),
        streams,
        target: target_name.into(),
        direct,
        requests: totals.requests,
        reads: totals.reads.count(),
        writes: totals.writes.count(),
        errors: totals.errors,
        bytes_read: totals.bytes_read,
        bytes_written: totals.bytes_written,
        reordered,
        wall_s,
        response: Response {
            avg_ms: a.avg_ms,
            p50_ms: a.p50_ms,
            p95_ms: a.p95_ms,
            p99_ms: a.p99_ms,
            max_ms: a.max_ms,
            reads: summary(&totals.reads),
            writes: summary(&totals.writes),
        },
    })
}
