//! Bindings of RGR and the fault-aware policies (conversion only).

use crate::to_py;
use blocklab::analysis::rgr::{rgr_trace, RgrTraceConfig};
use blocklab::trace::TraceOptions;
use pyo3::prelude::*;
use std::path::PathBuf;

/// RGR of every (policy, size) cell over a trace; JSON `{"cells": [...], "unique_blocks", "skipped"}`.
#[pyfunction]
#[pyo3(signature = (path, format, skip_bad, block_size, reads_only, raid, disks, chunk, layout, failed, fail_at, policies, sizes, tenant_map, miss_trace, disk_size=None, allow_loss=false))]
#[allow(clippy::too_many_arguments)]
fn rgr(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    skip_bad: bool,
    block_size: u64,
    reads_only: bool,
    raid: &str,
    disks: u32,
    chunk: &str,
    layout: Option<String>,
    failed: Vec<u32>,
    fail_at: Option<String>,
    policies: &str,
    sizes: &str,
    tenant_map: &str,
    miss_trace: Option<PathBuf>,
    disk_size: Option<String>,
    allow_loss: bool,
) -> PyResult<String> {
    let cfg = RgrTraceConfig {
        trace: TraceOptions {
            format: format.to_string(),
            skip_bad,
            ..Default::default()
        },
        block_size,
        reads_only,
        raid: raid.to_string(),
        disks,
        chunk: chunk.to_string(),
        layout,
        disk_size,
        failed,
        fail_at,
        allow_loss,
        policies: policies.to_string(),
        sizes: sizes.to_string(),
        tenant_map: tenant_map.to_string(),
        miss_trace,
    };
    let report = py.allow_threads(|| rgr_trace(&path, &cfg)).map_err(to_py)?;
    serde_json::to_string(&report).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rgr, m)?)?;
    Ok(())
}
