//! `blocklab disk run`: everything the command needs, as one Rust call (the
//! Python side only converts arguments and prints).

use std::path::Path;

use super::engine::ms_to_ns;
use super::executor::ExecConfig;
use super::metrics::Report;
use super::rebuild::RebuildConfig;
use super::replay::{self, ArrayStack, Discipline, ReplayConfig, SingleDisk, Source, Stack, ISSUE_WINDOW, REPLAYS};
use crate::array::{parse_bytes, Array, ArrayConfig};
use crate::device::load_model;
use crate::error::{Error, Result};
use crate::trace::{self, Request, TraceOptions};

/// Options of one run (CLI flags).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Drive model: a `.parv` / `.toml` file, or `const:MS` / `toy:...`.
    pub model: String,
    /// Feedback: model of the traced system that yields the original
    /// completion times (default: `model`).
    pub reference_model: Option<String>,
    pub traces: Vec<String>,
    pub format: String,
    pub skip_bad: bool,
    pub replay: String,
    /// Open: timestamps divided by this. Feedback: processor speed-up n.
    pub speedup: f64,
    pub outstanding: usize,
    /// Closed: think time between a completion and the next issue (ms).
    pub think_ms: f64,
    pub infinitely_fast: bool,
    pub window: usize,
    pub scheduler: String,
    pub queue_depth: usize,
    /// Fold addresses beyond the device's capacity back onto it.
    pub wrap: bool,
    /// Time-series interval in ms (0: none).
    pub interval_ms: f64,
    pub xor_ms: f64,
    /// RAID level (`raid5`, `5`, ...); None: a single disk.
    pub raid: Option<String>,
    pub disks: u32,
    /// Chunk size (`64KiB`, `65536`, ...).
    pub chunk: String,
    /// MD layout name (`left-symmetric`, RAID-10 `n2` / `f2` / `o2`, ...); None: the default.
    pub layout: Option<String>,
    /// Failed disks (degraded mode).
    pub failed: Vec<u32>,
    /// Array block size in bytes.
    pub block_size: u64,
    /// Bytes of each member used by the array (`4GiB`, ...); None: the whole model disk.
    pub disk_size: Option<String>,
    /// Replace the failed disks by spares and rebuild them in the background.
    pub rebuild: bool,
    /// When the spares arrive (ms of simulated time).
    pub rebuild_at_ms: f64,
    /// Rebuild steps (chunk rows) in flight at most.
    pub rebuild_window: usize,
    /// MD's sync_speed_min / sync_speed_max (KiB/s).
    pub rebuild_min_kbps: u64,
    pub rebuild_max_kbps: u64,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            model: String::new(),
            reference_model: None,
            traces: Vec::new(),
            format: "auto".into(),
            skip_bad: false,
            replay: "open".into(),
            speedup: 1.0,
            outstanding: 1,
            think_ms: 0.0,
            infinitely_fast: false,
            window: ISSUE_WINDOW,
            scheduler: "fcfs".into(),
            queue_depth: 0,
            wrap: false,
            interval_ms: 0.0,
            xor_ms: 0.0,
            raid: None,
            disks: 4,
            chunk: "64KiB".into(),
            layout: None,
            failed: Vec::new(),
            block_size: 4096,
            disk_size: None,
            rebuild: false,
            rebuild_at_ms: 0.0,
            rebuild_window: super::rebuild::DEFAULT_WINDOW,
            rebuild_min_kbps: super::rebuild::MD_SPEED_MIN,
            rebuild_max_kbps: super::rebuild::MD_SPEED_MAX,
        }
    }
}

pub fn discipline(o: &RunOptions) -> Result<Discipline> {
    Ok(match o.replay.to_ascii_lowercase().as_str() {
        "open" => Discipline::Open { speedup: o.speedup },
        "closed" => Discipline::Closed {
            outstanding: o.outstanding,
            think_ms: o.think_ms,
        },
        "feedback" => Discipline::Feedback {
            cpu_speedup: if o.infinitely_fast { None } else { Some(o.speedup) },
            window: o.window,
        },
        other => return Err(Error::unknown("replay discipline", other, REPLAYS)),
    })
}

fn sources(o: &RunOptions) -> Vec<Source<'static>> {
    o.traces
        .iter()
        .map(|p| {
            let path = p.clone();
            let topts = TraceOptions {
                format: o.format.clone(),
                skip_bad: o.skip_bad,
                ..Default::default()
            };
            Box::new(move || {
                let r = trace::open(Path::new(&path), &topts)?;
                Ok(Box::new(r) as Box<dyn Iterator<Item = Result<Request>> + Send>)
            }) as Source<'static>
        })
        .collect()
}

/// The storage of a run: one disk, or an array of `o.disks` such disks.
/// Returns the stack and its sectors per plan block.
fn stack(spec: &str, o: &RunOptions) -> Result<(Box<dyn Stack>, u64)> {
    let member_sectors = load_model(spec)?.capacity_sectors(); // fails early, with the model's own error
    let s = spec.to_string();
    let make = move || load_model(&s);
    let Some(level) = &o.raid else {
        if !o.failed.is_empty() {
            return Err(Error::config("--failed needs an array (--raid)"));
        }
        if o.rebuild {
            return Err(Error::config(
                "--rebuild needs an array (--raid) with failed disks (--failed)",
            ));
        }
        if o.disk_size.is_some() {
            return Err(Error::config("--disk-size needs an array (--raid)"));
        }
        return Ok((Box::new(SingleDisk::new(make, o.wrap)?), 1));
    };
    let mut cfg = ArrayConfig::new(ArrayConfig::parse_level(level)?, o.disks);
    cfg.chunk_bytes = parse_bytes(&o.chunk)?;
    cfg.block_size = o.block_size;
    if let Some(l) = &o.layout {
        cfg.set_layout(l)?;
    }
    // Members are the model disks: RAID-10 far layouts place their far
    // regions by this size, as MD does by the component size.
    cfg.disk_bytes = match &o.disk_size {
        Some(s) => parse_bytes(s)?,
        None => member_sectors * 512,
    };
    let mut array = Array::new(cfg)?;
    for &d in &o.failed {
        array.fail(d)?;
    }
    let mut st = ArrayStack::new(array, make, o.wrap)?;
    if o.rebuild {
        if o.failed.is_empty() {
            return Err(Error::config("--rebuild needs failed disks (--failed) to rebuild"));
        }
        if !(o.rebuild_at_ms.is_finite() && o.rebuild_at_ms >= 0.0) {
            return Err(Error::config("--rebuild-at must be a non-negative number of ms"));
        }
        st = st.with_rebuild(RebuildConfig {
            start: ms_to_ns(o.rebuild_at_ms),
            window: o.rebuild_window,
            min_kbps: o.rebuild_min_kbps,
            max_kbps: o.rebuild_max_kbps,
        })?;
    }
    let spb = st.sectors_per_block();
    Ok((Box::new(st), spb))
}

fn stack_of(spec: &str, o: &RunOptions) -> Result<Box<dyn Stack>> {
    Ok(stack(spec, o)?.0)
}

/// Run `o` and report.
pub fn run(o: &RunOptions) -> Result<Report> {
    if o.traces.is_empty() {
        return Err(Error::config("no trace given"));
    }
    if !(o.xor_ms.is_finite() && o.xor_ms >= 0.0 && o.interval_ms.is_finite() && o.interval_ms >= 0.0) {
        return Err(Error::config("times must be non-negative numbers"));
    }
    let cfg = ReplayConfig {
        discipline: discipline(o)?,
        exec: ExecConfig {
            scheduler: o.scheduler.clone(),
            queue_depth: if o.queue_depth == 0 { usize::MAX } else { o.queue_depth },
            xor_ns: ms_to_ns(o.xor_ms),
            pq_ns: ms_to_ns(o.xor_ms),
            sectors_per_block: 1, // set from the stack below
            interval_ns: if o.interval_ms > 0.0 {
                Some(ms_to_ns(o.interval_ms).max(1))
            } else {
                None
            },
        },
    };
    super::sched::build(&o.scheduler)?;
    let mut cfg = cfg;
    let (mut stack, spb) = stack(&o.model, o)?;
    cfg.exec.sectors_per_block = spb;
    let mut reference = match &o.reference_model {
        Some(r) => Some(stack_of(r, o)?),
        None => None,
    };
    let mut srcs = sources(o);
    let report = match reference.as_mut() {
        Some(r) => replay::run_with_reference(stack.as_mut(), Some(r.as_mut()), &mut srcs, &cfg),
        None => replay::run(stack.as_mut(), &mut srcs, &cfg),
    };
    report
}
