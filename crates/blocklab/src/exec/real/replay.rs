//! `real replay`: a trace's requests issued against a real array, and their
//! response times in the timed executor's schema (`response`: avg, p50,
//! p95, p99, max in ms, and the same for reads and writes), so that a
//! simulated and a real run of the same stack can be set side by side.
//!
//! * **open** — each request is due at its trace time (from the stream's
//!   first request) divided by `speedup`; a pool of `threads` workers issues
//!   them, and a response time runs from the due time, so time spent
//!   waiting for a free worker counts, as queueing does in the timed engine.
//! * **closed** — `outstanding` requests per stream in flight, each
//!   completion issuing the stream's next request at once.
//!
//! Each trace is one independent stream. Writes carry a pattern derived from
//! their offset. Requests the array cannot serve (too many failed members)
//! are counted in `errors` and left out of the response times, as the timed
//! executor leaves out unreadable requests. If the array is being served,
//! the replay goes through the server (one NBD connection per worker);
//! otherwise it opens the array itself, with O_DIRECT when asked and the
//! file system allows it.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::control::server_of;
use super::{OpenConfig, RealArray};
use crate::error::{Error, Result};
use crate::nbd::client::Client;
use crate::timed::latency::Latencies;
use crate::trace::{self, Op, Request, TraceOptions};

/// `real replay` settings.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    pub traces: Vec<String>,
    pub format: String,
    pub skip_bad: bool,
    /// `open` or `closed`.
    pub replay: String,
    pub speedup: f64,
    /// Closed loop: requests in flight per stream.
    pub outstanding: usize,
    /// Open loop: worker threads (requests in flight at most).
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
    /// Whether the replay is open loop (`open`) or closed (`closed`), with a
    /// speed-up that makes sense for it.
    pub fn open_loop(&self) -> Result<bool> {
        let open = match self.replay.to_ascii_lowercase().as_str() {
            "open" => true,
            "closed" => false,
            other => return Err(Error::unknown("replay discipline", other, &["open", "closed"])),
        };
        if open && !(self.speedup.is_finite() && self.speedup > 0.0) {
            return Err(Error::config(format!(
                "speed-up must be a positive number, got {}",
                self.speedup
            )));
        }
        Ok(open)
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
struct Lat(Latencies);

impl Lat {
    fn new() -> Lat {
        Lat(Latencies::new())
    }
    fn record(&mut self, ns: u64) {
        self.0.record(ns);
    }
    fn add(&mut self, o: &Lat) {
        self.0.merge(&o.0);
    }
    fn summary(&self) -> Summary {
        let q = self.0.quantiles_ms(&[0.50, 0.95, 0.99]);
        Summary {
            avg_ms: self.0.mean_ms(),
            p50_ms: q[0],
            p95_ms: q[1],
            p99_ms: q[2],
            max_ms: self.0.max_ms(),
        }
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

/// Totals shared by the workers.
struct Totals {
    all: Mutex<(Lat, Lat)>,
    requests: AtomicU64,
    errors: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
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

#[allow(clippy::too_many_arguments)]
fn run_one(
    conn: &mut Conn,
    op: Op,
    off: u64,
    len: u64,
    due: Instant,
    totals: &Totals,
    lat: &mut (Lat, Lat),
    log: Option<&RequestLog>,
) {
    let mut buf = vec![0u8; len as usize];
    if op == Op::Write {
        pattern(&mut buf, off);
    }
    let ok = conn.issue(op, off, &mut buf);
    let ns = due.elapsed().as_nanos() as u64;
    if let Some(log) = log {
        log.record(op, off, len, due, ns, ok);
    }
    totals.requests.fetch_add(1, Ordering::Relaxed);
    if !ok {
        totals.errors.fetch_add(1, Ordering::Relaxed);
        return;
    }
    match op {
        Op::Read => {
            totals.bytes_read.fetch_add(len, Ordering::Relaxed);
            lat.0.record(ns);
        }
        Op::Write => {
            totals.bytes_written.fetch_add(len, Ordering::Relaxed);
            lat.1.record(ns);
        }
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
    let open = opts.open_loop()?;
    if opts.outstanding == 0 || opts.threads == 0 {
        return Err(Error::config("outstanding requests and threads must be at least 1"));
    }
    let topts = opts.trace_options();
    // Open every trace first: a bad path or format fails before any I/O.
    let mut readers = Vec::new();
    for t in &opts.traces {
        readers.push((t.clone(), trace::open(Path::new(t), &topts)?));
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
    let target = Arc::new(target);
    let totals = Arc::new(Totals {
        all: Mutex::new((Lat::new(), Lat::new())),
        requests: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        bytes_read: AtomicU64::new(0),
        bytes_written: AtomicU64::new(0),
    });
    let t0 = Instant::now();
    let log_owned = match &opts.log {
        Some(p) => Some(RequestLog::create(p, t0)?),
        None => None,
    };
    let log = log_owned.as_ref();
    let streams = readers.len();
    // What each trace's reorder moved, kept as its reader ends.
    let reordered: Mutex<Vec<crate::trace::order::Reordered>> = Mutex::new(Vec::new());
    let reordered = &reordered;
    let result: Result<()> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        if open {
            // One pool for every stream; bounded so that a slow array
            // delays issuing (which shows in the response times) instead
            // of queueing the whole trace in memory.
            let (tx, rx) = mpsc::sync_channel::<(Op, u64, u64, Instant)>(4096);
            let rx = Arc::new(Mutex::new(rx));
            for _ in 0..opts.threads {
                let (rx, target, totals) = (rx.clone(), target.clone(), totals.clone());
                handles.push(s.spawn(move || -> Result<()> {
                    let mut conn = target.conn()?;
                    let mut lat = (Lat::new(), Lat::new());
                    loop {
                        let job = rx.lock().unwrap().recv();
                        let Ok((op, off, len, due)) = job else { break };
                        run_one(&mut conn, op, off, len, due, &totals, &mut lat, log);
                    }
                    let mut all = totals.all.lock().unwrap();
                    all.0.add(&lat.0);
                    all.1.add(&lat.1);
                    Ok(())
                }));
            }
            let mut dispatchers = Vec::new();
            for (file, reader) in readers {
                let tx = tx.clone();
                dispatchers.push(s.spawn(move || -> Result<()> {
                    let mut base: Option<f64> = None;
                    let mut reader = reader;
                    for (i, r) in reader.by_ref().enumerate() {
                        if opts.past_limit(i as u64) {
                            break;
                        }
                        let r = r?;
                        if (i as u64) < opts.skip {
                            continue;
                        }
                        let b = *base.get_or_insert(r.time);
                        let at = ((r.time - b).max(0.0) / opts.speedup).max(0.0);
                        let due = t0 + Duration::from_secs_f64(at);
                        let now = Instant::now();
                        if due > now {
                            std::thread::sleep(due - now);
                        }
                        let (op, off, len) = place(&r, size, opts.wrap, &file)?;
                        if tx.send((op, off, len, due)).is_err() {
                            break;
                        }
                    }
                    reordered.lock().unwrap().extend(reader.reordered());
                    Ok(())
                }));
            }
            drop(tx);
            let mut first_err = None;
            for d in dispatchers {
                if let Err(e) = d.join().expect("a dispatcher does not panic") {
                    first_err.get_or_insert(e);
                }
            }
            for h in handles {
                if let Err(e) = h.join().expect("a worker does not panic") {
                    first_err.get_or_insert(e);
                }
            }
            first_err.map_or(Ok(()), Err)
        } else {
            let mut shared_readers = Vec::new();
            for (file, reader) in readers {
                let shared = Arc::new(Mutex::new((0u64, reader)));
                shared_readers.push(shared.clone());
                for _ in 0..opts.outstanding {
                    let (shared, target, totals, file) = (shared.clone(), target.clone(), totals.clone(), file.clone());
                    handles.push(s.spawn(move || -> Result<()> {
                        let mut conn = target.conn()?;
                        let mut lat = (Lat::new(), Lat::new());
                        loop {
                            let next = {
                                let mut g = shared.lock().unwrap();
                                let i = g.0;
                                g.0 += 1;
                                g.1.next().map(|r| (i, r))
                            };
                            let Some((i, r)) = next else { break };
                            if opts.past_limit(i) {
                                break;
                            }
                            let r = r?;
                            if i < opts.skip {
                                continue;
                            }
                            let (op, off, len) = place(&r, size, opts.wrap, &file)?;
                            run_one(&mut conn, op, off, len, Instant::now(), &totals, &mut lat, log);
                        }
                        let mut all = totals.all.lock().unwrap();
                        all.0.add(&lat.0);
                        all.1.add(&lat.1);
                        Ok(())
                    }));
                }
            }
            let mut first_err = None;
            for h in handles {
                if let Err(e) = h.join().expect("a worker does not panic") {
                    first_err.get_or_insert(e);
                }
            }
            for r in shared_readers {
                let r = Arc::try_unwrap(r).ok().expect("workers joined").into_inner().unwrap();
                reordered.lock().unwrap().extend(r.1.reordered());
            }
            first_err.map_or(Ok(()), Err)
        }
    });
    let wall_s = t0.elapsed().as_secs_f64();
    let reordered = crate::trace::order::Reordered::sum(&reordered.lock().unwrap());
    drop(target);
    if let Some(l) = log_owned {
        l.finish()?;
    }
    if let Some(a) = local {
        let a = Arc::try_unwrap(a).map_err(|_| Error::config("array still in use after the replay"))?;
        a.close()?;
    }
    result?;
    let (reads, writes) = std::mem::replace(&mut *totals.all.lock().unwrap(), (Lat::new(), Lat::new()));
    let mut all = Lat::new();
    all.add(&reads);
    all.add(&writes);
    let a = all.summary();
    Ok(ReplayReport {
        replay: if open { "open" } else { "closed" }.into(),
        streams,
        target: target_name.into(),
        direct,
        requests: totals.requests.load(Ordering::Relaxed),
        reads: reads.0.count(),
        writes: writes.0.count(),
        errors: totals.errors.load(Ordering::Relaxed),
        bytes_read: totals.bytes_read.load(Ordering::Relaxed),
        bytes_written: totals.bytes_written.load(Ordering::Relaxed),
        reordered,
        wall_s,
        response: Response {
            avg_ms: a.avg_ms,
            p50_ms: a.p50_ms,
            p95_ms: a.p95_ms,
            p99_ms: a.p99_ms,
            max_ms: a.max_ms,
            reads: reads.summary(),
            writes: writes.summary(),
        },
    })
}
