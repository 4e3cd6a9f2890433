//! `blocklab trace merge`: interleave several traces by time into one native
//! CSV stream, each input's requests becoming tenants of their own.
//!
//! - **Streaming k-way merge**: one pending request per input in a heap; the
//!   earliest goes out next, ties to the input given first. Memory is one
//!   request per input (plus the tenant map). An input that is not in time
//!   order is merged as read (its requests keep their order), and the
//!   output's out-of-order requests are counted.
//! - **Clocks**: traces keep different clocks (MSR starts at 0, Tencent at a
//!   Unix time), so by default (`align = start`) each input is shifted to
//!   start at 0 (its first request's time is subtracted). `align = none`
//!   keeps the times as read. `span = S` rescales each input's time line onto
//!   [0, S] (earliest → 0, latest → S), which needs a first pass over each
//!   input for its earliest and latest time.
//! - **Tenants**: with `tenants = input` (default) every request of input i
//!   (0-based, in the order given) gets tenant i; with `tenants = pair` each
//!   (input, input tenant) pair gets its own tenant, numbered 0, 1, ... in
//!   the order the pairs first appear in the output. Either way the summary
//!   lists the mapping.
//!
//! An input is given as `PATH` or `PATH:FORMAT` (the part after the last `:`
//! is a format only when it names one; otherwise the default format applies).

use super::convert::create;
use super::{native_csv, open, Request, TraceOptions, TraceReader, FORMATS};
use crate::error::{Error, Result};
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One input of a merge.
#[derive(Debug, Clone)]
pub struct MergeInput {
    pub path: PathBuf,
    pub opts: TraceOptions,
}

impl MergeInput {
    /// `PATH[:FORMAT]`; without a format, `default` (a [`TraceOptions`]
    /// whose other settings every input shares).
    pub fn parse(spec: &str, default: &TraceOptions) -> MergeInput {
        let mut opts = default.clone();
        if let Some((path, fmt)) = spec.rsplit_once(':') {
            if !path.is_empty() && (fmt == "auto" || FORMATS.contains(&fmt)) {
                opts.format = fmt.to_string();
                return MergeInput {
                    path: PathBuf::from(path),
                    opts,
                };
            }
        }
        MergeInput {
            path: PathBuf::from(spec),
            opts,
        }
    }
}

/// How input tenants become output tenants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantMap {
    /// Tenant = input index.
    Input,
    /// One tenant per (input, input tenant), numbered by first appearance.
    Pair,
}

impl TenantMap {
    pub const NAMES: &'static [&'static str] = &["input", "pair"];

    pub fn parse(s: &str) -> Result<TenantMap> {
        match s {
            "input" => Ok(TenantMap::Input),
            "pair" => Ok(TenantMap::Pair),
            other => Err(Error::unknown("tenant mapping", other, Self::NAMES)),
        }
    }
}

/// How input clocks are put on one time line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Clock {
    /// Subtract each input's first request time.
    Start,
    /// Keep times as read.
    AsIs,
    /// Rescale each input's [earliest, latest] onto [0, S].
    Span(f64),
}

impl Clock {
    /// From `--align start|none` and `--span S`.
    pub fn parse(align: &str, span: Option<f64>) -> Result<Clock> {
        if let Some(s) = span {
            if !(s.is_finite() && s > 0.0) {
                return Err(Error::config(format!(
                    "--span must be a positive number of seconds, not {s}"
                )));
            }
            if align != "start" {
                return Err(Error::config(
                    "--span rescales every input from 0: do not combine it with --align none",
                ));
            }
            return Ok(Clock::Span(s));
        }
        match align {
            "start" => Ok(Clock::Start),
            "none" => Ok(Clock::AsIs),
            other => Err(Error::unknown("alignment", other, &["start", "none"])),
        }
    }
}

/// One output tenant: which input and input tenant it holds (`input_tenant`
/// None: every tenant of that input).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TenantOrigin {
    pub tenant: u32,
    pub input: usize,
    pub input_tenant: Option<u32>,
}

/// Per input.
#[derive(Debug, Clone, Serialize)]
pub struct MergedInput {
    pub source: String,
    pub format: String,
    pub requests: u64,
    pub skipped: u64,
    /// Time of the input's first request as read (None when empty).
    pub first_time: Option<f64>,
}

/// What a merge did.
#[derive(Debug, Clone, Serialize)]
pub struct MergeSummary {
    pub destination: String,
    pub requests: u64,
    /// Output requests earlier than the one before them (inputs out of order).
    pub out_of_order: u64,
    pub inputs: Vec<MergedInput>,
    pub tenants: Vec<TenantOrigin>,
}

/// An input being merged: its reader, its clock and its pending request.
struct Source {
    reader: TraceReader,
    /// t' = (t − shift) · scale.
    shift: Option<f64>,
    scale: f64,
    requests: u64,
    first_time: Option<f64>,
}

impl Source {
    fn next(&mut self, clock: Clock) -> Result<Option<Request>> {
        let Some(r) = self.reader.next().transpose()? else {
            return Ok(None);
        };
        self.requests += 1;
        let first = *self.first_time.get_or_insert(r.time);
        let shift = match clock {
            Clock::AsIs => 0.0,
            Clock::Start => first,
            Clock::Span(_) => self.shift.unwrap_or(0.0),
        };
        Ok(Some(Request {
            time: (r.time - shift) * self.scale,
            ..r
        }))
    }
}

/// A pending request in the heap: earliest first, then lowest input.
struct Head {
    time: f64,
    input: usize,
    req: Request,
}

impl PartialEq for Head {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Head {}
impl Ord for Head {
    fn cmp(&self, o: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse both keys.
        o.time.total_cmp(&self.time).then_with(|| o.input.cmp(&self.input))
    }
}
impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// The earliest and latest request time of a trace (a first pass for `span`).
fn time_range(input: &MergeInput) -> Result<Option<(f64, f64)>> {
    let mut range: Option<(f64, f64)> = None;
    for r in open(&input.path, &input.opts)? {
        let t = r?.time;
        range = Some(range.map_or((t, t), |(lo, hi)| (lo.min(t), hi.max(t))));
    }
    Ok(range)
}

/// Merge `inputs` into native CSV at `dst` (compressed by extension).
pub fn merge(inputs: &[MergeInput], dst: &Path, tenants: TenantMap, clock: Clock) -> Result<MergeSummary> {
    if inputs.is_empty() {
        return Err(Error::config("trace merge needs at least one input"));
    }
    if inputs.len() > 1 << 24 {
        return Err(Error::config("too many inputs (tenants must stay below 2^24)"));
    }
    let dname = dst.display().to_string();
    let out = dst.canonicalize().ok();
    for i in inputs {
        if out.is_some() && i.path.canonicalize().ok() == out {
            return Err(Error::config(format!("{dname}: is also an input")));
        }
    }
    // Open every input before creating the output, so that a bad input
    // leaves no output behind.
    let mut sources = Vec::with_capacity(inputs.len());
    for i in inputs {
        let (shift, scale) = match clock {
            Clock::Span(s) => match time_range(i)? {
                Some((lo, hi)) if hi > lo => (Some(lo), s / (hi - lo)),
                Some((lo, _)) => (Some(lo), 1.0),
                None => (None, 1.0),
            },
            _ => (None, 1.0),
        };
        sources.push(Source {
            reader: open(&i.path, &i.opts)?,
            shift,
            scale,
            requests: 0,
            first_time: None,
        });
    }
    let result = write_merged(&mut sources, dst, tenants, clock);
    if result.is_err() {
        // A half-written output would look like a shorter trace.
        let _ = std::fs::remove_file(dst);
    }
    let (requests, out_of_order, origins) = result?;
    Ok(MergeSummary {
        destination: dname,
        requests,
        out_of_order,
        inputs: inputs
            .iter()
            .zip(&sources)
            .map(|(i, s)| MergedInput {
                source: i.path.display().to_string(),
                format: i.opts.format.clone(),
                requests: s.requests,
                skipped: s.reader.skipped(),
                first_time: s.first_time,
            })
            .collect(),
        tenants: origins,
    })
}

fn write_merged(
    sources: &mut [Source],
    dst: &Path,
    tenants: TenantMap,
    clock: Clock,
) -> Result<(u64, u64, Vec<TenantOrigin>)> {
    let dname = dst.display().to_string();
    let io = |e: std::io::Error| Error::io(&dname, e);
    let mut w = create(dst)?;
    native_csv::write_header(&mut w).map_err(io)?;
    let mut heap = BinaryHeap::with_capacity(sources.len());
    for (i, s) in sources.iter_mut().enumerate() {
        if let Some(req) = s.next(clock)? {
            heap.push(Head {
                time: req.time,
                input: i,
                req,
            });
        }
    }
    let mut pairs: FxHashMap<(usize, u32), u32> = FxHashMap::default();
    let mut origins: Vec<TenantOrigin> = match tenants {
        TenantMap::Input => (0..sources.len())
            .map(|i| TenantOrigin {
                tenant: i as u32,
                input: i,
                input_tenant: None,
            })
            .collect(),
        TenantMap::Pair => Vec::new(),
    };
    let (mut requests, mut out_of_order) = (0u64, 0u64);
    let mut last = f64::NEG_INFINITY;
    while let Some(Head { input, mut req, .. }) = heap.pop() {
        req.tenant = match tenants {
            TenantMap::Input => input as u32,
            TenantMap::Pair => {
                let n = pairs.len();
                if n >= 1 << 24 {
                    return Err(Error::config("more than 2^24 (input, tenant) pairs"));
                }
                *pairs.entry((input, req.tenant)).or_insert_with(|| {
                    origins.push(TenantOrigin {
                        tenant: n as u32,
                        input,
                        input_tenant: Some(req.tenant),
                    });
                    n as u32
                })
            }
        };
        if req.time < last {
            out_of_order += 1;
        }
        last = req.time;
        native_csv::write_record(&mut w, &req).map_err(io)?;
        requests += 1;
        if let Some(next) = sources[input].next(clock)? {
            heap.push(Head {
                time: next.time,
                input,
                req: next,
            });
        }
    }
    w.flush().map_err(io)?;
    Ok((requests, out_of_order, origins))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Op;
    use proptest::prelude::*;
    use std::fs;

    fn csv_opts() -> TraceOptions {
        TraceOptions {
            format: "csv".into(),
            ..Default::default()
        }
    }

    fn read(path: &Path) -> Vec<Request> {
        open(path, &csv_opts()).unwrap().map(|r| r.unwrap()).collect()
    }

    fn write(dir: &Path, name: &str, reqs: &[Request]) -> PathBuf {
        let p = dir.join(name);
        let mut f = fs::File::create(&p).unwrap();
        native_csv::write_header(&mut f).unwrap();
        for r in reqs {
            native_csv::write_record(&mut f, r).unwrap();
        }
        p
    }

    fn req(time: f64, offset: u64, tenant: u32) -> Request {
        Request {
            time,
            op: Op::Read,
            offset,
            len: 512,
            tenant,
            fs: Default::default(),
        }
    }

    #[test]
    fn spec_parsing() {
        let d = TraceOptions::default();
        let i = MergeInput::parse("a/b.csv:msr", &d);
        assert_eq!((i.path, i.opts.format.as_str()), (PathBuf::from("a/b.csv"), "msr"));
        // Not a format: the whole spec is the path.
        let i = MergeInput::parse("c:/x:y.trace", &d);
        assert_eq!(
            (i.path, i.opts.format.as_str()),
            (PathBuf::from("c:/x:y.trace"), "auto")
        );
        let i = MergeInput::parse("t.trace", &csv_opts());
        assert_eq!(i.opts.format, "csv");
    }

    #[test]
    fn hand_worked_merge() {
        let dir = tempfile::tempdir().unwrap();
        // Input 0 starts at 100 s, input 1 at 5 s: aligned, they interleave.
        let a = write(
            dir.path(),
            "a.csv",
            &[req(100.0, 0, 7), req(101.0, 512, 8), req(103.0, 0, 7)],
        );
        let b = write(dir.path(), "b.csv", &[req(5.0, 0, 7), req(6.0, 0, 7)]);
        let ins: Vec<MergeInput> = [&a, &b]
            .iter()
            .map(|p| MergeInput::parse(&format!("{}:csv", p.display()), &TraceOptions::default()))
            .collect();
        let out = dir.path().join("m.csv");
        let s = merge(&ins, &out, TenantMap::Input, Clock::Start).unwrap();
        let got: Vec<(f64, u32, u64)> = read(&out).iter().map(|r| (r.time, r.tenant, r.offset)).collect();
        // Ties (0 s, 1 s) go to the first input.
        assert_eq!(
            got,
            vec![(0.0, 0, 0), (0.0, 1, 0), (1.0, 0, 512), (1.0, 1, 0), (3.0, 0, 0)]
        );
        assert_eq!((s.requests, s.out_of_order), (5, 0));
        assert_eq!(s.inputs[0].first_time, Some(100.0));
        assert_eq!(s.tenants.len(), 2);
        // Pairs: (0,7) → 0, (1,7) → 1, (0,8) → 2 in order of appearance.
        let s = merge(&ins, &out, TenantMap::Pair, Clock::Start).unwrap();
        let t: Vec<u32> = read(&out).iter().map(|r| r.tenant).collect();
        assert_eq!(t, vec![0, 1, 2, 1, 0]);
        assert_eq!(
            s.tenants[2],
            TenantOrigin {
                tenant: 2,
                input: 0,
                input_tenant: Some(8)
            }
        );
        // As read: input 1 comes first entirely.
        merge(&ins, &out, TenantMap::Input, Clock::AsIs).unwrap();
        let t: Vec<f64> = read(&out).iter().map(|r| r.time).collect();
        assert_eq!(t, vec![5.0, 6.0, 100.0, 101.0, 103.0]);
        // Span 30 s: input 0's 3 s → 30 s, input 1's 1 s → 30 s.
        merge(&ins, &out, TenantMap::Input, Clock::Span(30.0)).unwrap();
        let got: Vec<(f64, u32)> = read(&out).iter().map(|r| (r.time, r.tenant)).collect();
        assert_eq!(got, vec![(0.0, 0), (0.0, 1), (10.0, 0), (30.0, 0), (30.0, 1)]);
    }

    #[test]
    fn bad_inputs_leave_no_output() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.csv", &[req(0.0, 0, 0)]);
        let bad = dir.path().join("bad.csv");
        fs::write(&bad, "timestamp,op,offset,size\n0,R,0,512\n1,X,0,512\n").unwrap();
        let out = dir.path().join("m.csv");
        let ins = vec![
            MergeInput::parse(&format!("{}:csv", a.display()), &TraceOptions::default()),
            MergeInput::parse(&format!("{}:csv", bad.display()), &TraceOptions::default()),
        ];
        let e = merge(&ins, &out, TenantMap::Input, Clock::Start)
            .unwrap_err()
            .to_string();
        assert!(e.contains("bad.csv") && e.contains("line 3") && e.contains("op"), "{e}");
        assert!(!out.exists());
        let missing = vec![MergeInput::parse("/nonexistent/x.csv:csv", &TraceOptions::default())];
        assert!(merge(&missing, &out, TenantMap::Input, Clock::Start).is_err());
        assert!(!out.exists());
        let e = merge(&ins[..1], &a, TenantMap::Input, Clock::Start)
            .unwrap_err()
            .to_string();
        assert!(e.contains("also an input"), "{e}");
        assert!(merge(&[], &out, TenantMap::Input, Clock::Start).is_err());
        assert!(Clock::parse("start", Some(0.0)).is_err());
        assert!(Clock::parse("none", Some(5.0)).is_err());
        assert!(Clock::parse("middle", None).is_err());
        assert!(TenantMap::parse("each").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The output is the inputs' requests, each tagged with its input,
        /// sorted by (aligned time, input) with each input's order kept.
        #[test]
        fn merge_is_a_stable_sort(inputs in prop::collection::vec(prop::collection::vec((0u32..50, 0u64..8), 0..20), 1..5)) {
            let dir = tempfile::tempdir().unwrap();
            let mut specs = Vec::new();
            let mut want: Vec<(f64, usize, usize, u64)> = Vec::new();
            for (i, reqs) in inputs.iter().enumerate() {
                let mut t = 1000.0 * i as f64;
                let rs: Vec<Request> = reqs.iter().map(|&(dt, b)| { t += dt as f64 / 4.0; req(t, b * 512, 3) }).collect();
                let first = rs.first().map_or(0.0, |r| r.time);
                for (k, r) in rs.iter().enumerate() {
                    want.push((r.time - first, i, k, r.offset));
                }
                let p = write(dir.path(), &format!("{i}.csv"), &rs);
                specs.push(MergeInput::parse(&format!("{}:csv", p.display()), &TraceOptions::default()));
            }
            want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
            let out = dir.path().join("m.csv");
            let s = merge(&specs, &out, TenantMap::Input, Clock::Start).unwrap();
            let got: Vec<(f64, u32, u64)> = read(&out).iter().map(|r| (r.time, r.tenant, r.offset)).collect();
            let want: Vec<(f64, u32, u64)> = want.iter().map(|&(t, i, _, o)| (t, i as u32, o)).collect();
            prop_assert_eq!(got, want);
            prop_assert_eq!(s.out_of_order, 0);
        }
    }
}
