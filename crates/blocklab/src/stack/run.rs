//! Whole runs of a stack over traces: the pre-pass a stack may need, then
//! the counted executor (requests of all traces merged by time) or the
//! timed one (each trace an independent stream of the replayer).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::address::{survey, Survey, SurveyNeeds};
use super::build::{build, survey_needs, Executor};
use super::result::StackResult;
use super::runtime::Composed;
use super::spec::{StackSpec, TenantMap};
use crate::error::{Error, Result};
use crate::timed::engine::{ms_to_ns, secs_to_ns};
use crate::timed::executor::ExecConfig;
use crate::timed::metrics::Report;
use crate::timed::replay::{self, Discipline, ReplayConfig, Source};
use crate::trace::order::{Reordered, TimeOrder};
use crate::trace::{self, Op, Request, TraceOptions};
use std::sync::Mutex;

/// A trace to run: its file, format, and whether malformed records are skipped.
#[derive(Debug, Clone)]
pub struct TraceInput {
    pub path: String,
    pub format: String,
    pub skip_bad: bool,
}

type Requests = Box<dyn Iterator<Item = Result<Request>> + Send>;

impl TraceInput {
    pub fn new(path: impl Into<String>, format: impl Into<String>) -> Self {
        TraceInput {
            path: path.into(),
            format: format.into(),
            skip_bad: false,
        }
    }

    /// The trace's requests in time order (`order`: checked or sorted;
    /// writes dropped when `reads_only`); the reader's count of skipped
    /// records is kept in `skipped`, what a sort moved in `reordered`.
    fn open(&self, reads_only: bool, order: TimeOrder, seen: Seen) -> Result<Requests> {
        let opts = TraceOptions {
            format: self.format.clone(),
            skip_bad: self.skip_bad,
            order,
            ..Default::default()
        };
        let mut reader = trace::open(Path::new(&self.path), &opts)?;
        let skip_bad = self.skip_bad;
        let sorting = matches!(order, TimeOrder::Sort { .. });
        Ok(Box::new(std::iter::from_fn(move || loop {
            let r = reader.next();
            // Only a reader that skips records has any to count.
            if skip_bad {
                seen.skipped.store(reader.skipped(), Ordering::Relaxed);
            }
            if sorting && r.is_none() {
                *seen.reordered.lock().expect("not poisoned") = reader.reordered();
            }
            match r? {
                Ok(req) if reads_only && req.op == Op::Write => continue,
                other => return Some(other),
            }
        })))
    }
}

/// What a pass over one trace saw besides its requests: records skipped,
/// and what a sort moved (set when the trace ends).
#[derive(Clone, Default)]
struct Seen {
    skipped: Arc<AtomicU64>,
    reordered: Arc<Mutex<Option<Reordered>>>,
}

/// The inputs of a run and what each pass saw (one per trace, reset by each
/// pass; the last pass's counts are reported).
struct Inputs<'a> {
    traces: &'a [TraceInput],
    reads_only: bool,
    order: TimeOrder,
    seen: Vec<Seen>,
}

impl<'a> Inputs<'a> {
    fn new(traces: &'a [TraceInput], spec: &StackSpec, order: TimeOrder) -> Result<Self> {
        if traces.is_empty() {
            return Err(Error::config("no trace given"));
        }
        Ok(Inputs {
            traces,
            reads_only: spec.replay.reads_only,
            order,
            seen: traces.iter().map(|_| Seen::default()).collect(),
        })
    }

    fn open(&self, i: usize) -> Result<Requests> {
        let seen = &self.seen[i];
        seen.skipped.store(0, Ordering::Relaxed);
        *seen.reordered.lock().expect("not poisoned") = None;
        self.traces[i].open(self.reads_only, self.order, seen.clone())
    }

    fn skipped(&self) -> u64 {
        self.seen.iter().map(|s| s.skipped.load(Ordering::Relaxed)).sum()
    }

    /// What the sort moved over every trace (`replay.sort`).
    fn reordered(&self) -> Option<Reordered> {
        let all: Vec<Reordered> = self
            .seen
            .iter()
            .filter_map(|s| *s.reordered.lock().expect("not poisoned"))
            .collect();
        Reordered::sum(&all)
    }

    /// Every trace's requests merged by time since each trace's first
    /// request (ties: the earlier trace first): the order in which an open
    /// replay at speed-up 1 issues them.
    fn merged(&self) -> Result<Requests> {
        if self.traces.len() == 1 {
            return self.open(0);
        }
        let streams = (0..self.traces.len()).map(|i| self.open(i));
        Ok(Box::new(MergedByTime::new(streams)?.map(|r| r.map(|(_, req)| req))))
    }

    /// Replay sources, one per trace.
    fn sources(&self) -> Vec<Source<'_>> {
        (0..self.traces.len())
            .map(|i| Box::new(move || self.open(i)) as Source<'_>)
            .collect()
    }
}

/// The requests of several streams merged by time since each stream's first
/// request (ties: the earlier stream first), each with the index of the
/// stream it came from: the order in which an open replay at speed-up 1
/// issues them (`blocklab run` of several traces, `real replay` of a stack).
pub(crate) struct MergedByTime<I> {
    /// Each stream, its next request, and its first request's time.
    heads: Vec<(I, Option<Request>, f64)>,
}

impl<I: Iterator<Item = Result<Request>>> MergedByTime<I> {
    /// Opens each stream in turn and reads its first request.
    pub(crate) fn new(streams: impl IntoIterator<Item = Result<I>>) -> Result<Self> {
        let mut heads = Vec::new();
        for it in streams {
            let mut it = it?;
            let first = it.next().transpose()?;
            let base = first.map_or(0.0, |r| r.time);
            heads.push((it, first, base));
        }
        Ok(MergedByTime { heads })
    }
}

impl<I: Iterator<Item = Result<Request>>> Iterator for MergedByTime<I> {
    type Item = Result<(usize, Request)>;

    fn next(&mut self) -> Option<Self::Item> {
        let pick = self
            .heads
            .iter()
            .enumerate()
            .filter_map(|(i, (_, r, base))| r.map(|r| (i, secs_to_ns(r.time - base))))
            .min_by_key(|&(i, t)| (t, i))?
            .0;
        let (it, head, _) = &mut self.heads[pick];
        let out = head.take().expect("picked a stream with a request");
        match it.next().transpose() {
            Ok(next) => *head = next,
            Err(e) => return Some(Err(e)),
        }
        Some(Ok((pick, out)))
    }
}

/// How the counted executor reads the traces. It has no clock, but it reads
/// trace times where the stack asks for them: to merge several traces, to
/// fail disks at a time, to start a rebuild at a time, to end a warm-up or to
/// age a write buffer. Then times that go back are refused (or sorted) as in
/// the timed executor. A run of one trace without any of these depends only
/// on the order of the accesses, as a cache simulation does (`cache`, `rgr`):
/// it reads the file as it is. (An SSD tier's windows follow that order too:
/// a window closes at the first request past its end, as ECI-Cache's
/// prototype reads a merged mix.)
fn counted_order(spec: &StackSpec, traces: &[TraceInput]) -> TimeOrder {
    let order = spec.replay.time_order();
    if spec.replay.sort {
        return order;
    }
    let fail_by_time = spec.array.as_ref().is_some_and(|a| {
        a.fail_at.as_ref().is_some_and(|f| !f.text().trim().ends_with("req"))
            || a.rebuild.as_ref().is_some_and(|r| r.at > 0.0)
    });
    let reads_time = traces.len() > 1
        || fail_by_time
        || spec.replay.warmup_secs() > 0.0
        || spec.cache.iter().any(|c| c.write_buffer.is_some() && c.max_age_s > 0.0);
    if reads_time {
        order
    } else {
        TimeOrder::Any
    }
}

/// The pass over the traces a stack needs before it runs, if any.
fn pre_pass(spec: &StackSpec, needs: SurveyNeeds, inputs: &Inputs) -> Result<Option<Survey>> {
    if !(needs.unique
        || needs.tenants
        || needs.extents
        || needs.next_use.is_some()
        || needs.span
        || spec.tenant_map == TenantMap::Concat)
    {
        return Ok(None);
    }
    if needs.next_use.is_some() && inputs.traces.len() > 1 {
        return Err(spec.origin.err(
            "cache.0.policy",
            "opt needs the future of one access stream: give one trace",
        ));
    }
    let mut s = survey(inputs.merged()?, spec.tenant_map, spec.block_size(), needs)?;
    // Volumes declared by `[[tenant]]` are laid out as declared.
    if let Some(v) = spec.tenant_volumes()? {
        s.use_declared(&v, &spec.origin.file)?;
    }
    Ok(Some(s))
}

/// Run `spec` over `traces` with `exec`.
pub fn run(spec: &StackSpec, traces: &[TraceInput], exec: Executor) -> Result<StackResult> {
    match exec {
        Executor::Count => Ok(run_count(std::slice::from_ref(spec), traces)?.remove(0)),
        Executor::Timed => Ok(run_timed(spec, traces)?.1),
    }
}

/// The counted executor over several stacks at once: one pass over the
/// traces feeds every stack (the cells of a sweep over the same trace).
/// The stacks must agree on what they do to the trace (`replay.reads_only`,
/// `tenant_map`, block size).
pub fn run_count(specs: &[StackSpec], traces: &[TraceInput]) -> Result<Vec<StackResult>> {
    let Some(first) = specs.first() else {
        return Ok(Vec::new());
    };
    for s in specs {
        if s.replay.reads_only != first.replay.reads_only
            || counted_order(s, traces) != counted_order(first, traces)
            || s.tenant_map != first.tenant_map
            || s.tenant_volumes()? != first.tenant_volumes()?
            || s.block_size() != first.block_size()
        {
            return Err(Error::config(
                "stacks run together must agree on replay.reads_only, replay.sort, tenant_map, [[tenant]] and block_size",
            ));
        }
    }
    let inputs = Inputs::new(traces, first, counted_order(first, traces))?;
    let mut needs = SurveyNeeds::default();
    for s in specs {
        let n = survey_needs(s);
        needs.unique |= n.unique;
        needs.tenants |= n.tenants;
        needs.span |= n.span;
        needs.extents |= n.extents;
        if n.next_use.is_some() {
            if needs.next_use.is_some_and(|r| Some(r) != n.next_use) {
                return Err(Error::config(
                    "stacks run together with opt must agree on cache.0.reads_only",
                ));
            }
            needs.next_use = n.next_use;
        }
    }
    let survey = pre_pass(first, needs, &inputs)?;
    let mut stacks: Vec<Composed> = specs
        .iter()
        .map(|s| build(s, Executor::Count, survey.as_ref()))
        .collect::<Result<_>>()?;
    for req in inputs.merged()? {
        let req = req?;
        for st in &mut stacks {
            st.count_request(&req)?;
        }
    }
    let skipped = inputs.skipped();
    let reordered = inputs.reordered();
    stacks
        .iter_mut()
        .zip(specs)
        .map(|(st, spec)| {
            st.count_finish()?;
            let mut r = st.result("count");
            r.skipped = skipped;
            r.reordered = reordered;
            r.unique_blocks = survey.as_ref().and_then(|s| s.unique);
            state_layout(&mut r, spec);
            r.finish();
            Ok(r)
        })
        .collect()
}

/// The replay settings of a stack.
pub(crate) fn replay_config(spec: &StackSpec) -> Result<ReplayConfig> {
    let r = &spec.replay;
    let discipline = match r.mode.to_ascii_lowercase().as_str() {
        "open" => Discipline::Open { speedup: r.speedup },
        "closed" => Discipline::Closed {
            outstanding: r.outstanding,
            think_ms: r.think_ms,
        },
        "feedback" => Discipline::Feedback {
            cpu_speedup: if r.infinitely_fast { None } else { Some(r.speedup) },
            window: r.window,
        },
        other => {
            return Err(spec.origin.err(
                "replay.mode",
                Error::unknown("replay discipline", other, replay::REPLAYS),
            ))
        }
    };
    let (scheduler, depth) = (&spec.device.scheduler, spec.device.queue_depth);
    let xor_ms = spec.array.as_ref().map_or(0.0, |a| a.xor_ms);
    Ok(ReplayConfig {
        discipline,
        exec: ExecConfig {
            scheduler: scheduler.clone(),
            satf_window: spec.device.satf_window,
            queue_depth: if depth == 0 { usize::MAX } else { depth },
            xor_ns: ms_to_ns(xor_ms),
            pq_ns: ms_to_ns(xor_ms),
            sectors_per_block: 1, // each pass takes the stack's own
            interval_ns: (r.interval > 0.0).then(|| ms_to_ns(r.interval).max(1)),
            warmup_ns: secs_to_ns(r.warmup_secs()),
            released_join_queue: false,
        },
    })
}

/// The timed executor: the replayer's report (what `disk run` prints) and
/// the stack's result.
pub fn run_timed(spec: &StackSpec, traces: &[TraceInput]) -> Result<(Report, StackResult)> {
    let inputs = Inputs::new(traces, spec, spec.replay.time_order())?;
    let survey = pre_pass(spec, survey_needs(spec), &inputs)?;
    let cfg = replay_config(spec)?;
    let mut stack = build(spec, Executor::Timed, survey.as_ref())?;
    let mut reference = match &spec.replay.reference {
        Some(model) => {
            let mut r = spec.clone();
            r.device.model = model.clone();
            // The traced system holds the data where the trace says
            // (constant occupancy spreads it over the disk studied only).
            r.device.scale_addresses = 1.0;
            let mut reference = build(&r, Executor::Timed, survey.as_ref()).map_err(|e| match e {
                Error::Key { file, key, message } if key == "device.model" => {
                    Error::key(file, "replay.reference", message)
                }
                other => other,
            })?;
            // The traced system: the optimizations' opportunistic reading is no part of it.
            reference.opportunism = None;
            Some(reference)
        }
        None => None,
    };
    let mut sources = inputs.sources();
    let report = match reference.as_mut() {
        Some(r) => replay::run_with_reference(&mut stack, Some(r as &mut dyn replay::Stack), &mut sources, &cfg)?,
        None => replay::run(&mut stack, &mut sources, &cfg)?,
    };
    let mut result = stack.result("timed");
    result.add_timed(&report);
    result.skipped = inputs.skipped();
    result.reordered = inputs.reordered();
    result.unique_blocks = survey.as_ref().and_then(|s| s.unique);
    state_layout(&mut result, spec);
    result.finish();
    Ok((report, result))
}

/// The layout choices a result states: the tenant map and the address fit.
fn state_layout(r: &mut StackResult, spec: &StackSpec) {
    r.tenant_map = spec.tenant_map.name().to_string();
    r.fit = spec.fit_used().name().to_string();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::spec::Origin;

    fn spec(sets: &[&str]) -> StackSpec {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let text = "tenant_map = \"ignore\"\n[device]\nmodel = \"const:1\"\n";
        StackSpec::from_str_with(text, &sets, Origin::default()).unwrap()
    }

    #[test]
    fn a_counted_run_that_reads_no_time_reads_the_file_as_it_is() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("b.csv");
        std::fs::write(&path, "0.5,R,0,4096\n0.2,R,4096,4096\n0.9,W,8192,4096\n0.1,R,0,4096\n").unwrap();
        let traces = [TraceInput::new(path.display().to_string(), "csv")];
        let r = run(
            &spec(&["cache.0.policy=lru", "cache.0.size=2"]),
            &traces,
            Executor::Count,
        )
        .unwrap();
        assert_eq!((r.requests, r.reordered), (4, None));
        // A warm-up reads the times: refused.
        let e = run(&spec(&["replay.warmup=0.3"]), &traces, Executor::Count).unwrap_err();
        assert!(e.to_string().contains("line 2: field `time`"), "{e}");
        // Two traces are merged by time: refused.
        let two = [traces[0].clone(), traces[0].clone()];
        assert!(run(&spec(&[]), &two, Executor::Count).is_err());
    }

    #[test]
    fn declared_tenants_bound_the_trace_and_place_the_volumes() {
        let d = tempfile::tempdir().unwrap();
        let text = "tenant_map = \"concat\"\n[[tenant]]\nname = \"a\"\nsize = \"2MiB\"\n\
                    [[tenant]]\nname = \"b\"\nsize = \"8KiB\"\n[[cache]]\npolicy = \"lru\"\nsize = 4\n\
                    [device]\nmodel = \"const:1\"\n";
        let spec = StackSpec::from_str_with(
            text,
            &[],
            Origin {
                file: "s.toml".into(),
                ..Default::default()
            },
        )
        .unwrap();
        let go = |lines: &str| {
            let path = d.path().join("t.csv");
            std::fs::write(&path, lines).unwrap();
            run(
                &spec,
                &[TraceInput::new(path.display().to_string(), "csv")],
                Executor::Count,
            )
        };
        let r = go("0.1,R,0,4096,0\n0.2,R,4096,4096,1\n").unwrap();
        assert_eq!((r.requests, r.tenant_map.as_str()), (2, "concat"));
        let e = go("0.1,R,0,4096,0\n0.2,R,8192,4096,1\n").unwrap_err().to_string();
        assert!(
            e.contains("s.toml") && e.contains("tenant.1.size") && e.contains("block 2"),
            "{e}"
        );
        let e = go("0.1,R,0,4096,2\n").unwrap_err().to_string();
        assert!(
            e.contains("s.toml") && e.contains("tenant 2") && e.contains("declares 2"),
            "{e}"
        );
        // Volumes laid as declared: tenant 1 starts after tenant 0's 2 MiB
        // (512 blocks), whatever the trace touched of tenant 0.
        let survey = Survey::declared(&spec.tenant_volumes().unwrap().unwrap());
        let m = crate::stack::address::AddressMap::new(TenantMap::Concat, 4096, Some(&survey)).unwrap();
        assert_eq!((m.first_block(0), m.first_block(1)), (Some(0), Some(512)));
    }

    #[test]
    fn both_executors_refuse_times_that_go_back_unless_sorted() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("b.csv");
        std::fs::write(&path, "0.5,R,0,4096\n0.2,R,4096,4096\n0.9,W,8192,4096\n0.1,R,0,4096\n").unwrap();
        let traces = [TraceInput::new(path.display().to_string(), "csv")];
        for exec in [Executor::Count, Executor::Timed] {
            // (counted: a warm-up makes the run read times)
            let base: &[&str] = if exec == Executor::Count {
                &["replay.warmup=0.01"]
            } else {
                &[]
            };
            let e = run(&spec(base), &traces, exec).unwrap_err().to_string();
            assert!(
                e.contains("b.csv: line 2: field `time`: time goes back: 0.2 s after 0.5 s at line 1"),
                "{e}"
            );
            let r = run(&spec(&["replay.sort=true"]), &traces, exec).unwrap();
            assert_eq!(r.requests, 4);
            let m = r.reordered.unwrap();
            assert_eq!((m.moved, m.window_ms), (2, 1000.0));
            let e = run(&spec(&["replay.sort=true", "replay.sort_window=0.5"]), &traces, exec).unwrap_err();
            assert!(e.to_string().contains("line 4: field `time`"), "{e}");
        }
    }
}
