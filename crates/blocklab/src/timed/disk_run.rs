//! `blocklab disk run`: a front end of the stack (`crate::stack`). Its
//! options become a stack without cache layers (tenants share the address
//! space, as they always did here) run by the timed executor; it prints the
//! replayer's report.

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
            rebuild_order: "md".into(),
            rebuild_idle: "simple".into(),
            fit: None,
            live_frac: None,
            live_layout: "compact".into(),
            live_map: None,
            live_unit: None,
            sort_window: None,
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
        // A degraded array beyond its tolerance still runs: lost blocks are unreadable.
        allow_loss: !o.rebuild,
        disk_size: o.disk_size.clone().map(NumOrStr::Str),
        block_size: Some(o.block_size),
        wrap: o.wrap,
        fit: o.fit.clone(),
        xor_ms: o.xor_ms,
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
    let spec = StackSpec {
        seed: 0,
        block_size: None,
        tenant_map: TenantMap::Ignore,
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
        device: DeviceSpec {
            model: o.model.clone(),
            scheduler: o.scheduler.clone(),
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
    Error::config(format!("{flag}: {message}"))
}

/// Run `o` and report.
pub fn run(o: &RunOptions) -> Result<Report> {
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
    Ok(report)
}
