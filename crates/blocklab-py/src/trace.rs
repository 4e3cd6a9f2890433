//! Bindings of the trace area (conversion only).

use crate::to_py;
use blocklab::analysis::partition::Solver;
use blocklab::analysis::partition_plan::{plan_trace, PlanOptions};
use blocklab::analysis::reuse::{reuse_trace, History, ReuseOptions};
use blocklab::analysis::sizing::{Estimator, Value};
use blocklab::analysis::sizing_time::time_sizing;
use blocklab::analysis::stats::trace_stats as stats;
use blocklab::cache::sizes;
use blocklab::trace::merge::{self, Clock, MergeInput, TenantMap};
use blocklab::trace::{self, convert, TraceOptions};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

fn options(format: &str, skip_bad: bool, blkparse_event: &str) -> PyResult<TraceOptions> {
    let mut chars = blkparse_event.chars();
    let event = match (chars.next(), chars.next()) {
        (Some(c), None) => c,
        _ => {
            return Err(to_py(blocklab::Error::config(format!(
                "blkparse event must be Q or D, not `{blkparse_event}`"
            ))))
        }
    };
    Ok(TraceOptions {
        format: format.to_string(),
        skip_bad,
        blkparse_event: event,
        ..Default::default()
    })
}

/// Read a trace into columns: a dict of lists `time, op ("R"/"W"), offset, len, tenant`
/// (up to `limit` requests).
#[pyfunction]
#[pyo3(signature = (path, format="auto", skip_bad=false, blkparse_event="Q", limit=None))]
fn read_trace<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: &str,
    skip_bad: bool,
    blkparse_event: &str,
    limit: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = options(format, skip_bad, blkparse_event)?;
    type Cols = (Vec<f64>, Vec<&'static str>, Vec<u64>, Vec<u64>, Vec<u32>);
    let cols: Cols = py
        .allow_threads(|| -> blocklab::Result<Cols> {
            let mut c: Cols = Default::default();
            let reader = trace::open(&path, &opts)?;
            for r in reader.take(limit.unwrap_or(u64::MAX) as usize) {
                let r = r?;
                c.0.push(r.time);
                c.1.push(if r.op.is_write() { "W" } else { "R" });
                c.2.push(r.offset);
                c.3.push(r.len);
                c.4.push(r.tenant);
            }
            Ok(c)
        })
        .map_err(to_py)?;
    let d = PyDict::new(py);
    d.set_item("time", cols.0)?;
    d.set_item("op", cols.1)?;
    d.set_item("offset", cols.2)?;
    d.set_item("len", cols.3)?;
    d.set_item("tenant", cols.4)?;
    Ok(d)
}

/// Trace statistics in one streaming pass, as JSON text.
#[pyfunction]
#[pyo3(signature = (path, format="auto", block_size=4096, skip_bad=false, blkparse_event="Q"))]
fn trace_stats(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    block_size: u64,
    skip_bad: bool,
    blkparse_event: &str,
) -> PyResult<String> {
    let opts = options(format, skip_bad, blkparse_event)?;
    let s = py.allow_threads(|| stats(&path, &opts, block_size)).map_err(to_py)?;
    serde_json::to_string(&s).map_err(|e| to_py(blocklab::Error::config(e.to_string())))
}

/// Convert `src` to `dst` in format `to` (`csv` or `oracle`); a JSON summary.
#[pyfunction]
#[pyo3(signature = (src, format, dst, to, block_size=4096, skip_bad=false, blkparse_event="Q"))]
#[allow(clippy::too_many_arguments)]
fn trace_convert(
    py: Python<'_>,
    src: PathBuf,
    format: &str,
    dst: PathBuf,
    to: &str,
    block_size: u64,
    skip_bad: bool,
    blkparse_event: &str,
) -> PyResult<String> {
    let opts = options(format, skip_bad, blkparse_event)?;
    let s = py
        .allow_threads(|| convert::convert(&src, &opts, &dst, to, block_size))
        .map_err(to_py)?;
    serde_json::to_string(&s).map_err(|e| to_py(blocklab::Error::config(e.to_string())))
}

/// Reuse analysis (TRD / URD sizes per tenant and window), as JSON text.
#[pyfunction]
#[pyo3(signature = (path, format="auto", block_size=4096, per_tenant=false, window=None, history="all", skip_bad=false, blkparse_event="Q"))]
#[allow(clippy::too_many_arguments)]
fn trace_reuse(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    block_size: u64,
    per_tenant: bool,
    window: Option<f64>,
    history: &str,
    skip_bad: bool,
    blkparse_event: &str,
) -> PyResult<String> {
    let opts = options(format, skip_bad, blkparse_event)?;
    let r = ReuseOptions {
        block_size,
        per_tenant,
        window,
        history: History::parse(history).map_err(to_py)?,
    };
    let s = py.allow_threads(|| reuse_trace(&path, &opts, &r)).map_err(to_py)?;
    serde_json::to_string(&s).map_err(|e| to_py(blocklab::Error::config(e.to_string())))
}

/// How long the sizing analysis takes per tenant and window (ECI-Cache App. B),
/// as JSON text: rows of tenant, window, accesses, seconds, trd_size, urd_size.
#[pyfunction]
#[pyo3(signature = (path, window, format="auto", block_size=4096, history="all", skip_bad=false, blkparse_event="Q"))]
#[allow(clippy::too_many_arguments)]
fn trace_sizing_time(
    py: Python<'_>,
    path: PathBuf,
    window: f64,
    format: &str,
    block_size: u64,
    history: &str,
    skip_bad: bool,
    blkparse_event: &str,
) -> PyResult<String> {
    let opts = options(format, skip_bad, blkparse_event)?;
    let r = ReuseOptions {
        block_size,
        per_tenant: true,
        window: Some(window),
        history: History::parse(history).map_err(to_py)?,
    };
    let s = py.allow_threads(|| time_sizing(&path, &opts, &r)).map_err(to_py)?;
    serde_json::to_string(&s).map_err(|e| to_py(blocklab::Error::config(e.to_string())))
}

/// What Centaur and ECI would allocate per window (and ECI's write policy),
/// as JSON text. `capacity`: a size as for `cache --size` (blocks or bytes),
/// None for unlimited.
#[pyfunction]
#[pyo3(signature = (path, format="auto", block_size=4096, capacity=None, window=None, history="all", solver="exact", units=None, estimator="max", objective="hit-ratio", min_blocks=0, theta=0.5, skip_bad=false, blkparse_event="Q"))]
#[allow(clippy::too_many_arguments)]
fn trace_partition(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    block_size: u64,
    capacity: Option<&str>,
    window: Option<f64>,
    history: &str,
    solver: &str,
    units: Option<u64>,
    estimator: &str,
    objective: &str,
    min_blocks: u64,
    theta: f64,
    skip_bad: bool,
    blkparse_event: &str,
) -> PyResult<String> {
    let opts = options(format, skip_bad, blkparse_event)?;
    let capacity = match capacity {
        None => None,
        Some(text) => {
            Some(sizes::resolve(&sizes::parse_size(text).map_err(to_py)?, text, block_size, None).map_err(to_py)?)
        }
    };
    let p = PlanOptions {
        block_size,
        window,
        history: History::parse(history).map_err(to_py)?,
        capacity,
        solver: Solver::parse(solver, units).map_err(to_py)?,
        estimator: Estimator::parse(estimator).map_err(to_py)?,
        value: Value::parse(objective).map_err(to_py)?,
        min_blocks,
        theta,
    };
    let s = py.allow_threads(|| plan_trace(&path, &opts, &p)).map_err(to_py)?;
    serde_json::to_string(&s).map_err(|e| to_py(blocklab::Error::config(e.to_string())))
}

/// Merge traces (`PATH[:FORMAT]` each) by time into native CSV at `dst`;
/// a JSON summary with the tenant mapping.
#[pyfunction]
#[pyo3(signature = (dst, inputs, format="auto", tenants="input", align="start", span=None, skip_bad=false, blkparse_event="Q"))]
#[allow(clippy::too_many_arguments)]
fn trace_merge(
    py: Python<'_>,
    dst: PathBuf,
    inputs: Vec<String>,
    format: &str,
    tenants: &str,
    align: &str,
    span: Option<f64>,
    skip_bad: bool,
    blkparse_event: &str,
) -> PyResult<String> {
    let opts = options(format, skip_bad, blkparse_event)?;
    let inputs: Vec<MergeInput> = inputs.iter().map(|s| MergeInput::parse(s, &opts)).collect();
    let map = TenantMap::parse(tenants).map_err(to_py)?;
    let clock = Clock::parse(align, span).map_err(to_py)?;
    let s = py
        .allow_threads(|| merge::merge(&inputs, &dst, map, clock))
        .map_err(to_py)?;
    serde_json::to_string(&s).map_err(|e| to_py(blocklab::Error::config(e.to_string())))
}

/// The trace formats: a list of (name, one-line description).
#[pyfunction]
fn trace_formats() -> Vec<(&'static str, &'static str)> {
    trace::FORMAT_INFO.to_vec()
}

/// The format `auto` would pick for `path` (or a BlocklabError saying why not).
#[pyfunction]
fn sniff_format(py: Python<'_>, path: PathBuf) -> PyResult<&'static str> {
    py.allow_threads(|| trace::sniff::sniff(&path)).map_err(to_py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(trace_stats, m)?)?;
    m.add_function(wrap_pyfunction!(trace_convert, m)?)?;
    m.add_function(wrap_pyfunction!(trace_reuse, m)?)?;
    m.add_function(wrap_pyfunction!(trace_sizing_time, m)?)?;
    m.add_function(wrap_pyfunction!(trace_partition, m)?)?;
    m.add_function(wrap_pyfunction!(trace_merge, m)?)?;
    m.add_function(wrap_pyfunction!(trace_formats, m)?)?;
    m.add_function(wrap_pyfunction!(sniff_format, m)?)?;
    Ok(())
}
