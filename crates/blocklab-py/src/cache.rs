//! Bindings of the cache area (conversion only).

use crate::to_py;
use blocklab::analysis::mrc::{mrc_trace, Method};
use blocklab::cache::sim::{simulate_trace, SimConfig};
use blocklab::trace::blocks::BlockOptions;
use blocklab::trace::synth;
use blocklab::trace::TraceOptions;
use pyo3::prelude::*;
use std::path::PathBuf;

fn trace_opts(format: &str, skip_bad: bool) -> TraceOptions {
    TraceOptions {
        format: format.to_string(),
        skip_bad,
        ..Default::default()
    }
}

fn json<T: serde::Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
}

/// libCacheSim's `cachesim` on a vscsi file: one object per request
/// (`cache::objects::vscsi_cells`); JSON list of cells.
#[pyfunction]
#[pyo3(signature = (path, policies, sizes, ignore_obj_size=false))]
fn cachesim_vscsi(
    py: Python<'_>,
    path: PathBuf,
    policies: Vec<String>,
    sizes: Vec<u64>,
    ignore_obj_size: bool,
) -> PyResult<String> {
    let cells = py
        .allow_threads(|| blocklab::cache::objects::vscsi_cells(&path, &policies, &sizes, ignore_obj_size))
        .map_err(to_py)?;
    json(&cells)
}

/// libCacheSim's working set of a vscsi file: (objects, bytes).
#[pyfunction]
fn vscsi_working_set(py: Python<'_>, path: PathBuf) -> PyResult<(u64, u64)> {
    py.allow_threads(|| blocklab::cache::objects::vscsi_working_set(&path))
        .map_err(to_py)
}

/// Simulate every (policy, size) cell in one pass; JSON `{"cells": [...], "skipped": n}`.
/// `progress(accesses_so_far)` is called after every chunk (with the GIL).
#[pyfunction]
#[pyo3(signature = (path, format, policies, sizes, block_size, reads_only, skip_bad, progress=None))]
#[allow(clippy::too_many_arguments)]
fn simulate_cache(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    policies: &str,
    sizes: &str,
    block_size: u64,
    reads_only: bool,
    skip_bad: bool,
    progress: Option<PyObject>,
) -> PyResult<String> {
    let cfg = SimConfig {
        trace: trace_opts(format, skip_bad),
        blocks: BlockOptions { block_size, reads_only },
        policies: policies.to_string(),
        sizes: sizes.to_string(),
    };
    // A Python exception raised by the callback (e.g. KeyboardInterrupt) stops
    // the run and is re-raised as is.
    let mut py_err: Option<PyErr> = None;
    let result = py.allow_threads(|| {
        let mut cb = |done: u64| -> blocklab::Result<()> {
            Python::with_gil(|py| {
                let r = match &progress {
                    Some(f) => f.call1(py, (done,)).map(|_| ()),
                    None => py.check_signals(),
                };
                r.map_err(|e| {
                    py_err = Some(e);
                    blocklab::Error::config("interrupted")
                })
            })
        };
        simulate_trace(&path, &cfg, &mut cb)
    });
    if let Some(e) = py_err {
        return Err(e);
    }
    json(&result.map_err(to_py)?)
}

/// LRU miss-ratio curve; JSON `{"method", "points": [...], "accesses", "skipped"}`.
#[pyfunction]
#[pyo3(signature = (path, format, method, rate, max_samples, sizes, block_size, reads_only, skip_bad))]
#[allow(clippy::too_many_arguments)]
fn mrc(
    py: Python<'_>,
    path: PathBuf,
    format: &str,
    method: &str,
    rate: Option<f64>,
    max_samples: Option<u64>,
    sizes: Option<String>,
    block_size: u64,
    reads_only: bool,
    skip_bad: bool,
) -> PyResult<String> {
    let method = Method::parse(method, rate, max_samples).map_err(to_py)?;
    let topts = trace_opts(format, skip_bad);
    let blocks = BlockOptions { block_size, reads_only };
    let report = py
        .allow_threads(|| mrc_trace(&path, &topts, blocks, method, sizes.as_deref()))
        .map_err(to_py)?;
    json(&report)
}

/// Write a seeded Zipf(alpha) trace as a libCacheSim oracleGeneral file.
#[pyfunction]
#[pyo3(signature = (path, accesses, universe, alpha, seed, obj_size=1))]
fn write_zipf_oracle(
    py: Python<'_>,
    path: PathBuf,
    accesses: u64,
    universe: u64,
    alpha: f64,
    seed: u64,
    obj_size: u32,
) -> PyResult<()> {
    py.allow_threads(|| synth::write_zipf_oracle(&path, accesses, universe, alpha, seed, obj_size))
        .map_err(to_py)
}

/// Write a seeded Zipf(alpha) trace as blocklab's native CSV (one block read per access; `-`: stdout).
#[pyfunction]
#[pyo3(signature = (path, accesses, universe, alpha, seed, block_size=4096))]
fn write_zipf_csv(
    py: Python<'_>,
    path: PathBuf,
    accesses: u64,
    universe: u64,
    alpha: f64,
    seed: u64,
    block_size: u64,
) -> PyResult<()> {
    py.allow_threads(|| synth::write_zipf_csv(&path, accesses, universe, alpha, seed, block_size))
        .map_err(to_py)
}

/// Names of the cache policies.
#[pyfunction]
fn cache_policies() -> Vec<&'static str> {
    blocklab::cache::POLICIES.to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(simulate_cache, m)?)?;
    m.add_function(wrap_pyfunction!(cachesim_vscsi, m)?)?;
    m.add_function(wrap_pyfunction!(vscsi_working_set, m)?)?;
    m.add_function(wrap_pyfunction!(mrc, m)?)?;
    m.add_function(wrap_pyfunction!(write_zipf_oracle, m)?)?;
    m.add_function(wrap_pyfunction!(write_zipf_csv, m)?)?;
    m.add_function(wrap_pyfunction!(cache_policies, m)?)?;
    Ok(())
}
