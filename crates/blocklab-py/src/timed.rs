//! Bindings of the timed simulation (conversion only).

use blocklab::timed::disk_run::{run, RunOptions};
use pyo3::prelude::*;

use crate::to_py;

/// Replay traces in simulated time on a drive model; returns the report as JSON.
#[pyfunction]
#[pyo3(signature = (model, traces, format="auto", replay="open", speedup=1.0, outstanding=1, think_ms=0.0,
    infinitely_fast=false, window=64, scheduler="auto", queue_depth=0, wrap=false,
    interval_ms=0.0, xor_ms=0.0, reference_model=None, skip_bad=false, raid=None, disks=4,
    chunk="64KiB", failed=Vec::new(), block_size=4096, layout=None, disk_size=None, rebuild=false,
    rebuild_at_ms=0.0, rebuild_window=4, rebuild_min_kbps=1000, rebuild_max_kbps=200000,
    rebuild_order="md", rebuild_idle="simple", fit=None, live_frac=None, live_layout="compact",
    live_map=None, live_unit=None, allow_loss=false, sort_window=None, synthetic=false, seed=None))]
#[allow(clippy::too_many_arguments)]
fn disk_run(
    py: Python<'_>,
    model: String,
    traces: Vec<String>,
    format: &str,
    replay: &str,
    speedup: f64,
    outstanding: usize,
    think_ms: f64,
    infinitely_fast: bool,
    window: usize,
    scheduler: &str,
    queue_depth: usize,
    wrap: bool,
    interval_ms: f64,
    xor_ms: f64,
    reference_model: Option<String>,
    skip_bad: bool,
    raid: Option<String>,
    disks: u32,
    chunk: &str,
    failed: Vec<u32>,
    block_size: u64,
    layout: Option<String>,
    disk_size: Option<String>,
    rebuild: bool,
    rebuild_at_ms: f64,
    rebuild_window: usize,
    rebuild_min_kbps: u64,
    rebuild_max_kbps: u64,
    rebuild_order: &str,
    rebuild_idle: &str,
    fit: Option<String>,
    live_frac: Option<f64>,
    live_layout: &str,
    live_map: Option<String>,
    live_unit: Option<String>,
    allow_loss: bool,
    sort_window: Option<f64>,
    synthetic: bool,
    seed: Option<u64>,
) -> PyResult<String> {
    let o = RunOptions {
        model,
        reference_model,
        traces,
        format: format.into(),
        skip_bad,
        replay: replay.into(),
        speedup,
        outstanding,
        think_ms,
        infinitely_fast,
        window,
        scheduler: scheduler.into(),
        queue_depth,
        wrap,
        interval_ms,
        xor_ms,
        raid,
        disks,
        chunk: chunk.into(),
        layout,
        failed,
        allow_loss,
        block_size,
        disk_size,
        rebuild,
        rebuild_at_ms,
        rebuild_window,
        rebuild_min_kbps,
        rebuild_max_kbps,
        rebuild_order: rebuild_order.into(),
        rebuild_idle: rebuild_idle.into(),
        fit,
        live_frac,
        live_layout: live_layout.into(),
        live_map,
        live_unit,
        sort_window,
        synthetic,
        seed,
    };
    let report = py.allow_threads(|| run(&o)).map_err(to_py)?;
    Ok(report.to_json())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(disk_run, m)?)?;
    Ok(())
}
