//! `real replay` of a stack directory: a trace's requests through the
//! stack on real bytes, reported in `blocklab run`'s schema (`layers`,
//! `array`, `devices`, `response`; executor `real`), so that a counted, a
//! timed and a real run of one stack file sit side by side.
//!
//! The stack serves one request at a time, so one issuer replays the trace
//! in its order: `closed` issues each request when the previous one
//! completed; `open` issues each at its trace time (divided by `speedup`)
//! and measures its response from then. The run ends with a FLUSH (the
//! counted run's end-of-run flush), whose destages are in the figures.
//!
//! Several traces are merged by time as `blocklab run` merges them (each
//! trace's clock from its first request; ties: the earlier trace first),
//! and each request goes to the volume of its tenant column, as in a
//! counted run: with `[[tenant]]`, tenant i's export; without, the one
//! volume. The stack's clock (an SSD tier's windows) is the trace's time.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::control::server_of;
use super::replay::{fill_pattern, place_in, ReplayOptions, RequestLog};
use super::stack::{stack_file, RealStack};
use super::RealArray;
use crate::error::{Error, Result};
use crate::stack::result::{response_covers, RealTenant, Response, StackResult};
use crate::stack::run::MergedByTime;
use crate::stack::spec::StackSpec;
use crate::timed::latency::Latencies;
use crate::timed::metrics::ResponseSummary;
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
type Tagged<'a> = Box<dyn Iterator<Item = Result<(usize, Request)>> + 'a>;

/// The requests of `traces` merged by time as `blocklab run` merges them.
fn merged(traces: &[String], topts: &TraceOptions) -> Result<Tagged<'static>> {
    // Every file is opened before any is read, as before.
    let readers = traces
        .iter()
        .map(|t| trace::open(Path::new(t), topts))
        .collect::<Result<Vec<_>>>()?;
    Ok(Box::new(MergedByTime::new(readers.into_iter().map(Ok))?))
}

/// Replay `opts.traces` through the stack kept in `dir` (its stack file
/// `file`), which is not being served (`replay_dir` looked).
fn replay_stack(dir: &Path, file: &Path, opts: &ReplayOptions) -> Result<StackResult> {
    let open = opts.open_loop()?;
    if opts.traces.is_empty() {
        return Err(Error::config("no trace given"));
    }
    if opts.outstanding != 1 && !open {
        return Err(Error::config(
            "--outstanding: a stack serves one request at a time; replay it with --outstanding 1",
        ));
    }
    let spec = StackSpec::load(file, &[])?;
    let topts = opts.trace_options();
    // A single trace is read as it is (its reader reports what a sort moved).
    let mut single = match opts.traces.as_slice() {
        [one] => Some(trace::open(Path::new(one), &topts)?),
        _ => None,
    };
    let requests: Tagged<'_> = match single.as_mut() {
        Some(r) => Box::new(r.by_ref().map(|x| x.map(|r| (0, r)))),
        None => merged(&opts.traces, &topts)?,
    };
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
    // Each trace's clock starts at its first request (as the merge reads it).
    let mut base: Vec<Option<f64>> = vec![None; opts.traces.len()];
    let mut buf = Vec::new();
    let run: Result<()> = (|| {
        for (i, r) in requests.enumerate() {
            if opts.past_limit(i as u64) {
                break;
            }
            let (from, r) = r?;
            if (i as u64) < opts.skip {
                continue;
            }
            let trace_path = &opts.traces[from];
            // The tenant column picks the volume (without tenants: the one).
            let tenant = if tenants { r.tenant } else { 0 };
            if tenants && tenant as usize >= stack.volumes().len() {
                return Err(Error::config(format!(
                    "{trace_path}: tenant {tenant}: the stack declares {} tenants ([[tenant]] in {})",
                    stack.volumes().len(),
                    file.display()
                )));
            }
            let size = stack.volume_size(tenant);
            let due = if open {
                let b = *base[from].get_or_insert(r.time);
                let due = t0 + Duration::from_secs_f64((r.time - b).max(0.0) / opts.speedup);
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                due
            } else {
                Instant::now()
            };
            let target = || match tenants {
                true => format!("tenant {tenant}'s volume"),
                false => "the array".to_string(),
            };
            let (op, off, len) = place_in(&r, size, opts.wrap, trace_path, target)?;
            buf.resize(len as usize, 0);
            let clock = Some(r.time);
            let ok = match op {
                Op::Read => stack.read_at(tenant, clock, off, &mut buf).is_ok(),
                Op::Write => {
                    fill_pattern(&mut buf, off);
                    stack.write_at(tenant, clock, off, &buf, false).is_ok()
                }
            };
            let ns = due.elapsed().as_nanos() as u64;
            if let Some(log) = &log {
                log.record(op, off, len, due, ns, ok);
            }
            match (ok, op) {
                (false, _) => errors += 1,
                (true, Op::Read) => reads.record(ns),
                (true, Op::Write) => writes.record(ns),
            }
            if let (true, Some((r, w))) = (ok, per.get_mut(tenant as usize)) {
                match op {
                    Op::Read => r.record(ns),
                    Op::Write => w.record(ns),
                }
            }
        }
        stack.flush().map_err(|e| Error::io(dir.display().to_string(), e))
    })();
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
    out.reordered = single.and_then(|r| r.reordered());
    if let Some(real) = &mut out.real {
        real.errors = errors;
        real.wall_s = wall_s;
        real.replay = if open { "open" } else { "closed" }.into();
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
