//! `blocklab disk run`: a front end of the stack (`crate::stack`). Its
//! options become a stack without cache layers (tenants share the address
//! space, as they always did here) run by the timed executor; it prints the
//! replayer's report, with what the stack file would have said: the tenant
//! map and the address fit used, and what could not be served.

use serde::Serialize;

use super::metrics::Report;
use super::replay::ISSUE_WINDOW;
use crate::error::{Error, Result};
use crate::stack::spec::{ArraySpec, DeviceSpec, NumOrStr, Origin, RebuildSpec, ReplaySpec, StackSpec, TenantMap};
use crate::stack::TraceInput;

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
    /// `fcfs`, `sstf`, `clook`, `satf`; `auto`: a DiskSim file's driver
    /// policy, else FCFS.
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
    /// Run with more failed disks than the level tolerates (`--allow-loss`):
    /// requests of lost blocks are unreadable and left out of the response
    /// figures. Without it such an array is refused, as `run` refuses it.
    pub allow_loss: bool,
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
    /// Rebuild order: `md`, `pro`, `dor`, `pro-dor`.
    pub rebuild_order: String,
    /// MD's idle test: `simple`, `md2611`, `md6`.
    pub rebuild_idle: String,
    /// How trace addresses are fitted onto the array: `none`, `wrap`,
    /// `scale` (None: `wrap` with `--wrap`, else none).
    pub fit: Option<String>,
    /// Live-block rebuild (the `live` order, chosen by these when the order
    /// is left at `md`): this share of each lost member is live ...
    pub live_frac: Option<f64>,
    /// ... laid out `compact` or `spread`;
    pub live_layout: String,
    /// or the live blocks of a model run (`dgraid live --json`);
    pub live_map: Option<String>,
    /// `spread` in runs of this many bytes (`64KiB`, ...; None: one block).
    pub live_unit: Option<String>,
    /// `--sort`: put times that go back in order within this many seconds
    /// (None: they are an error naming the line).
    pub sort_window: Option<f64>,
    /// Run the DiskSim file's own `disksim_synthio` workload instead of traces.
    pub synthetic: bool,
    /// Seed of the synthetic workload (None: the file's `Real Seed`, else 42).
    pub seed: Option<u64>,
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
            scheduler: "auto".into(),
            queue_depth: 0,
            wrap: false,
            interval_ms: 0.0,
            xor_ms: 0.0,
            raid: None,
            disks: 4,
            chunk: "64KiB".into(),
            layout: None,
            failed: Vec::new(),
            allow_loss: false,
            block_size: 4096,
            disk_size: None,
            rebuild: false,
            rebuild_at_ms: 0.0,
            rebuild_window: super::rebuild::DEFAULT_WINDOW,
            rebuild_min_kbps: super::rebuild::MD_SPEED_MIN,
            rebuild_max_kbps: super::rebuild::MD_SPEED_MAX,
            rebuild_order: "md".into(),
            rebuild_idle: "simple".into(),
            fit: None,
            live_frac: None,
            live_layout: "compact".into(),
            live_map: None,
            live_unit: None,
            sort_window: None,
            synthetic: false,
            seed: None,
        }
    }
}

/// The stack of a `disk run`.
pub fn stack_spec(o: &RunOptions) -> Result<StackSpec> {
    if o.raid.is_none() {
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
        if o.fit.is_some() {
            return Err(Error::config("--fit needs an array (--raid)"));
        }
    }
    let live = o.live_frac.is_some() || o.live_map.is_some();
    if live && !o.rebuild {
        return Err(Error::config(
            "--live-frac / --live-map need a rebuild (--rebuild with --failed)",
        ));
    }
    if o.rebuild && o.failed.is_empty() {
        return Err(Error::config("--rebuild needs failed disks (--failed) to rebuild"));
    }
    if !(o.xor_ms.is_finite() && o.xor_ms >= 0.0 && o.interval_ms.is_finite() && o.interval_ms >= 0.0) {
        return Err(Error::config("times must be non-negative numbers"));
    }
    let array = o.raid.as_ref().map(|level| ArraySpec {
        raid: NumOrStr::Str(level.clone()),
        disks: o.disks,
        chunk: NumOrStr::Str(o.chunk.clone()),
        layout: o.layout.clone(),
        failed: o.failed.clone(),
        fail_at: None,
        allow_loss: o.allow_loss,
        disk_size: o.disk_size.clone().map(NumOrStr::Str),
        block_size: Some(o.block_size),
        wrap: o.wrap,
        fit: o.fit.clone(),
        xor_ms: o.xor_ms,
        stripe_cache: 0,
        rebuild: o.rebuild.then(|| RebuildSpec {
            at: o.rebuild_at_ms,
            window: o.rebuild_window,
            min: o.rebuild_min_kbps,
            max: o.rebuild_max_kbps,
            // The live flags choose the live order unless another is named.
            order: if live && o.rebuild_order.eq_ignore_ascii_case("md") {
                "live".into()
            } else {
                o.rebuild_order.clone()
            },
            idle: o.rebuild_idle.clone(),
            live_frac: o.live_frac,
            live_layout: o.live_layout.clone(),
            live_map: o.live_map.clone(),
            live_unit: o.live_unit.clone().map(NumOrStr::Str),
            ..Default::default()
        }),
        dgraid: None,
    });
    // A DiskSim file of several disks routes each trace device to its own
    // disk: the tenants (devices) keep their own address spaces.
    let system = crate::device::disksim_system::is_system(&o.model)?;
    let scheduler = if o.scheduler.eq_ignore_ascii_case("auto") {
        parv_scheduler(&o.model)?.unwrap_or("fcfs").to_string()
    } else {
        o.scheduler.clone()
    };
    let spec = StackSpec {
        seed: 0,
        // A system's stack blocks are sectors, so that every request keeps
        // its exact sectors whatever its device number.
        block_size: system.then_some(512),
        tenant_map: if system { TenantMap::Key } else { TenantMap::Ignore },
        replay: ReplaySpec {
            mode: o.replay.to_ascii_lowercase(),
            speedup: o.speedup,
            outstanding: o.outstanding,
            think_ms: o.think_ms,
            window: o.window,
            infinitely_fast: o.infinitely_fast,
            reference: o.reference_model.clone(),
            interval: o.interval_ms,
            reads_only: false,
            sort: o.sort_window.is_some(),
            sort_window: o.sort_window.unwrap_or(1.0),
            ..Default::default()
        },
        cache: Vec::new(),
        tier: None,
        tenant: Vec::new(),
        device: DeviceSpec {
            model: o.model.clone(),
            scheduler,
            queue_depth: o.queue_depth,
            wrap: o.wrap && array.is_none(),
            ..DeviceSpec::new(&o.model)
        },
        array,
        origin: Origin {
            file: "disk run".into(),
            dir: Default::default(),
        },
    };
    spec.validated().map_err(flag_error)
}

/// The scheduler of a DiskSim file's device driver (`--scheduler auto`):
/// DiskSim queues requests in the driver, ordered by its policy.
fn parv_scheduler(model: &str) -> Result<Option<&'static str>> {
    let p = std::path::Path::new(model);
    if p.extension().and_then(|e| e.to_str()) != Some("parv") || !p.exists() {
        return Ok(None);
    }
    crate::device::disksim_system::DiskSystem::load(p)?.scheduler()
}

/// A stack-file key error as the `disk run` flag it mirrors (keys take the
/// flags' names: `array.rebuild.window` is `--rebuild-window`).
fn flag_error(e: Error) -> Error {
    let Error::Key { key, message, .. } = e else { return e };
    let name = key.rsplit('.').next().unwrap_or(&key).replace('_', "-");
    let flag = match key.as_str() {
        "replay.mode" => "--replay".to_string(),
        "device.model" => "MODEL".to_string(),
        "replay.reference" => "--reference".to_string(),
        "array" => "--raid".to_string(),
        k if k.starts_with("array.rebuild.live_") => format!("--{name}"),
        k if k.starts_with("array.rebuild") => format!("--rebuild-{name}").replace("--rebuild-rebuild", "--rebuild"),
        _ => format!("--{name}"),
    };
    // The stack file's way out of a refusal is a flag here.
    let message = message.replace("set array.allow_loss = true", "give --allow-loss");
    Error::config(format!("{flag}: {message}"))
}

/// What `disk run` reports: the replayer's report and the layout it ran
/// with, and what could not be served.
#[derive(Debug, Serialize)]
pub struct DiskRunReport {
    #[serde(flatten)]
    pub report: Report,
    /// Blocks that could not be read or stored (past redundancy).
    pub unreadable_blocks: u64,
    /// `all` or `served`: whether the response figures leave out the
    /// `unreadable` requests.
    pub response_covers: String,
    /// `ignore`: every tenant addresses the same volume; `key` for a
    /// DiskSim system of several disks: each trace device its own.
    pub tenant_map: String,
    /// `none`, `wrap` or `scale`.
    pub fit: String,
    /// The mean response time of the user's (logical) requests: DiskSim's
    /// "Overall I/O System Response time average". `avg_response_ms` is
    /// the same figure, except on a DiskSim system with arrays, where it is
    /// DiskSim's "IOdriver Response time average": the mean over the
    /// member disks' operations, from their arrival in the disk's queue.
    pub overall_response_ms: f64,
    /// `--synthetic`: the seed and what the generators issued.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<super::synthio::SynthFigures>,
}

impl DiskRunReport {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a disk run report always serializes")
    }
}

/// Run `o` and report.
pub fn run(o: &RunOptions) -> Result<DiskRunReport> {
    if o.synthetic {
        return run_synthetic(o);
    }
    if o.seed.is_some() {
        return Err(Error::config("--seed needs --synthetic (a trace run draws nothing)"));
    }
    let spec = stack_spec(o)?;
    let traces: Vec<TraceInput> = o
        .traces
        .iter()
        .map(|p| TraceInput {
            path: p.clone(),
            format: o.format.clone(),
            skip_bad: o.skip_bad,
        })
        .collect();
    let (mut report, result) = crate::stack::run::run_timed(&spec, &traces).map_err(flag_error)?;
    report.reordered = result.reordered;
    let overall_response_ms = report.avg_response_ms;
    disksim_driver_figure(&mut report, &o.model)?;
    Ok(DiskRunReport {
        overall_response_ms,
        unreadable_blocks: result.array.as_ref().map_or(0, |a| a.unreadable_blocks),
        response_covers: crate::stack::result::response_covers(report.unreadable).to_string(),
        tenant_map: result.tenant_map,
        fit: result.fit,
        report,
        synthetic: None,
    })
}

/// On a DiskSim system with arrays, `avg_response_ms` becomes DiskSim's
/// IOdriver figure (see [`DiskRunReport::overall_response_ms`]).
fn disksim_driver_figure(report: &mut Report, model: &str) -> Result<()> {
    let p = std::path::Path::new(model);
    if p.extension().and_then(|e| e.to_str()) == Some("parv")
        && p.exists()
        && crate::device::disksim_system::DiskSystem::load(p)?.has_arrays()
    {
        iodriver_average(report);
    }
    Ok(())
}

/// DiskSim's "IOdriver Response time average": every disk operation's time
/// from its arrival in the disk's queue to its completion, pooled (a run
/// drains: every operation started also completed).
fn iodriver_average(report: &mut Report) {
    let (sum, n) = report.devices.iter().fold((0.0, 0u64), |(s, n), d| {
        (s + d.avg_response_ms * d.ops as f64, n + d.ops)
    });
    if n > 0 {
        report.avg_response_ms = sum / n as f64;
    }
}

/// `--synthetic`: the DiskSim file's `disksim_synthio` workload on its disks.
fn run_synthetic(o: &RunOptions) -> Result<DiskRunReport> {
    use crate::device::disksim_system::DiskSystem;
    let path = std::path::Path::new(&o.model);
    if path.extension().and_then(|e| e.to_str()) != Some("parv") {
        return Err(Error::config(format!(
            "--synthetic needs a DiskSim parameter file (.parv) with a `disksim_synthio` block, got {}",
            o.model
        )));
    }
    if !o.traces.is_empty() {
        return Err(Error::config("--synthetic generates its own requests: give no --trace"));
    }
    if o.raid.is_some() || o.replay != "open" {
        return Err(Error::config(
            "--synthetic runs the file's own processes: no --raid and no --replay",
        ));
    }
    let sys = DiskSystem::load(path)?;
    let names: Vec<String> = sys.disks.iter().map(|(n, _)| n.clone()).collect();
    let synth = super::synthio::SynthSpec::load(path, &names)?;
    let seed = o.seed.or(synth.file_seed).unwrap_or(42);
    let spec = stack_spec(o)?;
    let cfg = crate::stack::run::replay_config(&spec)?;
    let mut stack =
        crate::stack::build::build(&spec, crate::stack::build::Executor::Timed, None).map_err(flag_error)?;
    let exec = super::executor::ExecConfig {
        released_join_queue: sys.has_arrays(),
        ..cfg.exec.clone()
    };
    let (mut report, figures) = super::synthio::run(&mut stack, &exec, &synth, seed)?;
    report.replay = "synthetic".into();
    report.streams = synth.generators.len();
    let overall_response_ms = report.avg_response_ms;
    if sys.has_arrays() {
        iodriver_average(&mut report);
    }
    Ok(DiskRunReport {
        overall_response_ms,
        unreadable_blocks: 0,
        response_covers: crate::stack::result::response_covers(report.unreadable).to_string(),
        tenant_map: spec.tenant_map.name().to_string(),
        fit: spec.fit_used().name().to_string(),
        report,
        synthetic: Some(figures),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(failed: &[u32], allow_loss: bool) -> RunOptions {
        RunOptions {
            model: "const:1".into(),
            raid: Some("5".into()),
            disks: 6,
            failed: failed.to_vec(),
            allow_loss,
            ..Default::default()
        }
    }

    #[test]
    fn past_redundancy_is_refused_unless_allowed() {
        let e = stack_spec(&array(&[0, 1], false)).unwrap_err().to_string();
        assert!(
            e.contains("--failed") && e.contains("survives 1") && e.contains("--allow-loss"),
            "{e}"
        );
        assert!(!e.contains("array.allow_loss"), "{e}");
        assert!(stack_spec(&array(&[0, 1], true)).is_ok());
        assert!(stack_spec(&array(&[0], false)).is_ok());
    }

    #[test]
    fn report_counts_what_was_lost_and_states_the_layout() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.csv");
        // Block 0 lives on disk 0 (lost with disks 0 and 1 gone); block 32
        // (chunk 2) on disk 2, which survives.
        std::fs::write(&t, "timestamp,op,offset,size\n0.0,R,0,4096\n0.1,R,131072,4096\n").unwrap();
        let mut o = array(&[0, 1], true);
        o.traces = vec![t.to_string_lossy().into_owned()];
        o.format = "csv".into();
        let r = run(&o).unwrap();
        assert_eq!((r.report.requests, r.report.unreadable), (2, 1));
        assert_eq!(r.unreadable_blocks, 1);
        assert_eq!(r.response_covers, "served");
        assert_eq!((r.tenant_map.as_str(), r.fit.as_str()), ("ignore", "none"));
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(json["response_covers"], "served");
        assert_eq!(json["unreadable_blocks"], 1);
        assert_eq!(json["requests"], 2);
        // One failure: every request is served.
        let mut o = array(&[0], false);
        o.traces = vec![t.to_string_lossy().into_owned()];
        o.format = "csv".into();
        let r = run(&o).unwrap();
        assert_eq!((r.report.unreadable, r.unreadable_blocks), (0, 0));
        assert_eq!(r.response_covers, "all");
    }
}
