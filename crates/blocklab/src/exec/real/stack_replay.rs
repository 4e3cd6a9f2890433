//! `real replay` of a stack directory: a trace's requests through the
//! stack on real bytes, reported in `blocklab run`'s schema (`layers`,
//! `array`, `devices`, `response`; executor `real`), so that a counted, a
//! timed and a real run of one stack file sit side by side.
//!
//! The stack serves one request at a time, so one issuer replays the trace
//! in its order, serving each request itself (`wall_clock`'s inline clock)
//! under the disciplines of `exec::discipline`: `closed` (one outstanding)
//! issues each request when the previous one completed (plus `think_ms`);
//! `open` issues each at its trace time (divided by `speedup`) and measures
//! its response from then. (Feedback is refused: its reference pass would
//! have warmed the stack's caches, and its window would issue requests out
//! of trace order.) The run ends with a FLUSH (the counted run's end-of-run
//! flush), whose destages are in the figures.
//!
//! Several traces are merged by time as `blocklab run` merges them (each
//! trace's clock from its first request; ties: the earlier trace first) into
//! one stream, whose times are each trace's own since its first request;
//! each request goes to the volume of its tenant column, as in a counted
//! run: with `[[tenant]]`, tenant i's export; without, the one volume. The
//! stack's clock (an SSD tier's windows) is the trace's own time.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::control::server_of;
use super::replay::{fill_pattern, place_in, Cut, Reorders, ReplayOptions, RequestLog};
use super::stack::{stack_file, RealStack};
use super::wall_clock::{Port, Served, WallClock};
use super::RealArray;
use crate::error::{Error, Result};
use crate::exec::discipline::{self, Discipline, Source};
use crate::stack::result::{response_covers, RealTenant, Response, StackResult};
use crate::stack::run::MergedByTime;
use crate::stack::spec::StackSpec;
use crate::timed::latency::Latencies;
use crate::timed::metrics::ResponseSummary;
use crate::trace::order::Reordered;
use crate::trace::{self, Op, Request, TraceOptions};

fn summary(l: &Latencies) -> ResponseSummary {
    let q = l.quantiles_ms(&[0.50, 0.95, 0.99]);
    ResponseSummary {
        requests: l.count(),
        avg_ms: l.mean_ms(),
        p50_ms: q[0],
        p95_ms: q[1],
        p99_ms: q[2],
        max_ms: l.max_ms(),
    }
}

/// What `real replay DIR` runs: a stack directory not being served is
/// replayed here through its stack (`run`'s schema); a served one, like any
/// served array, through its server over NBD (`replay::replay`'s schema:
/// the server serializes the stack's requests, and the layers' figures are
/// the server's, `real status`). Anything else is `replay::replay`.
///
/// A served stack with tenants is refused: its server offers one export per
/// tenant and no default, and replaying over NBD would send every tenant's
/// requests to one export.
pub fn replay_dir(dir: &Path, opts: &ReplayOptions) -> Result<serde_json::Value> {
    let served = server_of(dir)?;
    let v = match (stack_file(dir), served) {
        (Some(file), None) => serde_json::to_value(replay_stack(dir, &file, opts)?),
        (Some(file), Some(info)) if StackSpec::load(&file, &[])?.tenant_volumes()?.is_some() => {
            return Err(Error::config(format!(
                "{}: the stack's tenants are served as exports {}: stop the server to replay it here \
                 (each request to its tenant's volume), or replay a client of each export",
                dir.display(),
                info.exports.join(", ")
            )))
        }
        _ => serde_json::to_value(super::replay::replay(dir, opts)?),
    };
    Ok(v.expect("replay reports serialize"))
}

/// Requests with the index of the trace each came from.
type Tagged = Box<dyn Iterator<Item = Result<(usize, Request)>> + Send>;

/// The requests of `traces` merged by time as `blocklab run` merges them; a
/// single trace is read as it is (its reorder reported in `sink`).
fn merged(traces: &[String], topts: &TraceOptions, sink: &Arc<Mutex<Option<Reordered>>>) -> Result<Tagged> {
    // Every file is opened before any is read, as before.
    let readers = traces
        .iter()
        .map(|t| trace::open(Path::new(t), topts))
        .collect::<Result<Vec<_>>>()?;
    Ok(match <[_; 1]>::try_from(readers) {
        Ok([one]) => Box::new(Reorders::new(one, sink).map(|x| x.map(|r| (0, r)))),
        Err(readers) => Box::new(MergedByTime::new(readers.into_iter().map(Ok))?),
    })
}

/// The stack served inline: each request to its tenant's volume at its
/// trace's own time (`times`: the stream's requests' trace times, in order).
struct StackPort<'s> {
    stack: &'s RealStack,
    times: Arc<Mutex<VecDeque<f64>>>,
}

impl Port for StackPort<'_> {
    fn serve(&mut self, req: &Request, buf: &mut Vec<u8>) -> bool {
        let clock = self.times.lock().unwrap().pop_front();
        let (tenant, off) = (req.tenant, req.offset);
        buf.clear();
        buf.resize(req.len as usize, 0);
        match req.op {
            Op::Read => self.stack.read_at(tenant, clock, off, buf).is_ok(),
            Op::Write => {
                fill_pattern(buf, off);
                self.stack.write_at(tenant, clock, off, buf, false).is_ok()
            }
        }
    }
}

/// Replay `opts.traces` through the stack kept in `dir` (its stack file
/// `file`), which is not being served (`replay_dir` looked).
fn replay_stack(dir: &Path, file: &Path, opts: &ReplayOptions) -> Result<StackResult> {
    let discipline = opts.discipline()?;
    if opts.traces.is_empty() {
        return Err(Error::config("no trace given"));
    }
    match discipline {
        Discipline::Closed { outstanding, .. } if outstanding != 1 => {
            return Err(Error::config(
                "--outstanding: a stack serves one request at a time; replay it with --outstanding 1",
            ))
        }
        Discipline::Feedback { .. } => {
            return Err(Error::config(
                "--replay feedback: a stack is replayed open or closed (feedback's first pass would warm its caches)",
            ))
        }
        _ => {}
    }
    let spec = StackSpec::load(file, &[])?;
    let topts = opts.trace_options();
    let sink = Arc::default();
    let requests = merged(&opts.traces, &topts, &sink)?;
    let array = Arc::new(RealArray::open(dir, opts.open_config())?);
    let stack = RealStack::new(&spec, array.clone())?;
    let tenants = stack.has_tenants();
    let (mut reads, mut writes) = (Latencies::new(), Latencies::new());
    // Per tenant (with tenants): reads and writes.
    let nt = if tenants { stack.volumes().len() } else { 0 };
    let mut per: Vec<(Latencies, Latencies)> = (0..nt).map(|_| (Latencies::new(), Latencies::new())).collect();
    let mut errors = 0u64;
    let t0 = Instant::now();
    let log = match &opts.log {
        Some(p) => Some(RequestLog::create(p, t0)?),
        None => None,
    };
    // Each volume's size: the tenant column picks the volume (without tenants: the one).
    let sizes: Vec<u64> = (0..nt.max(1) as u32).map(|t| stack.volume_size(t)).collect();
    let times: Arc<Mutex<VecDeque<f64>>> = Arc::default();
    let mut requests = Some(requests);
    let (traces, wrap, file_shown) = (opts.traces.clone(), opts.wrap, file.display().to_string());
    let queued = times.clone();
    // Each trace's clock starts at its first request (as the merge reads it).
    let mut base: Vec<Option<f64>> = vec![None; opts.traces.len()];
    let mut source: Source = Box::new(move || {
        let requests = requests.take().expect("a stack is replayed in one pass");
        let (traces, file_shown, sizes, queued) = (traces.clone(), file_shown.clone(), sizes.clone(), queued.clone());
        let mut base = std::mem::take(&mut base);
        let placed = Cut::new(requests, opts).map(move |r| {
            let (from, r) = r?;
            let trace_path = &traces[from];
            let tenant = if tenants { r.tenant } else { 0 };
            let Some(&size) = sizes.get(tenant as usize) else {
                return Err(Error::config(format!(
                    "{trace_path}: tenant {tenant}: the stack declares {} tenants ([[tenant]] in {file_shown})",
                    sizes.len()
                )));
            };
            let target = || match tenants {
                true => format!("tenant {tenant}'s volume"),
                false => "the array".to_string(),
            };
            let (op, offset, len) = place_in(&r, size, wrap, trace_path, target)?;
            let b = *base[from].get_or_insert(r.time);
            queued.lock().unwrap().push_back(r.time);
            Ok(Request {
                time: r.time - b,
                op,
                offset,
                len,
                tenant,
                ..r
            })
        });
        Ok(Box::new(placed) as Box<dyn Iterator<Item = Result<Request>> + Send>)
    });
    let mut record = |s: &Served| {
        let (op, ns) = (s.req.op, s.response_ns);
        if let Some(log) = &log {
            log.record(op, s.req.offset, s.req.len, s.due, ns, s.ok);
        }
        match (s.ok, op) {
            (false, _) => errors += 1,
            (true, Op::Read) => reads.record(ns),
            (true, Op::Write) => writes.record(ns),
        }
        if let (true, Some((r, w))) = (s.ok, per.get_mut(s.req.tenant as usize)) {
            match op {
                Op::Read => r.record(ns),
                Op::Write => w.record(ns),
            }
        }
    };
    let mut port = StackPort { stack: &stack, times };
    let run = discipline::replay(
        &mut WallClock::inline(&mut port, &mut record),
        std::slice::from_mut(&mut source),
        &discipline,
    )
    .and_then(|()| stack.flush().map_err(|e| Error::io(dir.display().to_string(), e)));
    drop(source);
    let run = match log {
        Some(l) => run.and(l.finish()),
        None => run,
    };
    let wall_s = t0.elapsed().as_secs_f64();
    let names: Vec<String> = stack.volumes().iter().map(|v| v.name.clone()).collect();
    let mut out = stack.result();
    drop(stack);
    let array = Arc::try_unwrap(array).map_err(|_| Error::config("array still in use after the replay"))?;
    array.close()?;
    run?;
    let mut all = Latencies::new();
    all.merge(&reads);
    all.merge(&writes);
    let a = summary(&all);
    out.response = Some(Response {
        avg_ms: a.avg_ms,
        p50_ms: a.p50_ms,
        p95_ms: a.p95_ms,
        p99_ms: a.p99_ms,
        max_ms: a.max_ms,
        reads: summary(&reads),
        writes: summary(&writes),
        cdf_ms: Vec::new(),
        covers: response_covers(errors).to_string(),
    });
    out.reordered = sink.lock().unwrap().take();
    if let Some(real) = &mut out.real {
        real.errors = errors;
        real.wall_s = wall_s;
        real.replay = discipline.name().into();
        real.tenants = per
            .iter()
            .enumerate()
            .map(|(i, (r, w))| {
                let mut all = Latencies::new();
                all.merge(r);
                all.merge(w);
                RealTenant {
                    tenant: i as u32,
                    name: names[i].clone(),
                    response: summary(&all),
                    reads: summary(r),
                    writes: summary(w),
                }
            })
            .collect();
    }
    Ok(out)
}
