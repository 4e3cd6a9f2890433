//! Bindings of the real executor (conversion only): arrays on member files,
//! the NBD server, faults, rebuild, scrub, replay, the integrity suite.
//! Long calls release the GIL and poll for Ctrl-C / SIGTERM.

use std::path::{Path, PathBuf};
use std::time::Duration;

use blocklab::array::ArrayConfig;
use blocklab::exec::real::control::{self, ServeOptions};
use blocklab::exec::real::integrity::{self, IntegrityOptions};
use blocklab::exec::real::rebuild::RebuildOptions;
use blocklab::exec::real::replay::ReplayOptions;
use blocklab::exec::real::stack as real_stack;
use blocklab::exec::real::stack_replay;
use blocklab::exec::real::{OpenConfig, RealArray};
use pyo3::prelude::*;

use crate::to_py;

fn json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("reports serialize")
}

/// Create a plain array of member files; with `tenants`, each tenant is a
/// volume with an NBD export of its own (kept as a stack file of no cache
/// layer). Returns `{"status", "notes"}` as JSON.
#[pyfunction]
#[pyo3(signature = (dir, raid, disks, chunk_bytes, disk_bytes, layout=None, checksums=false, block_size=4096, tenants=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn real_create(
    py: Python<'_>,
    dir: PathBuf,
    raid: &str,
    disks: u32,
    chunk_bytes: u64,
    disk_bytes: u64,
    layout: Option<String>,
    checksums: bool,
    block_size: u64,
    tenants: Vec<(String, String)>,
) -> PyResult<String> {
    let (st, notes) = py
        .allow_threads(|| {
            if tenants.is_empty() {
                let cfg =
                    ArrayConfig::from_names_sized(raid, disks, chunk_bytes, layout.as_deref(), block_size, disk_bytes)?;
                Ok((RealArray::create(&dir, cfg, checksums)?, Vec::new()))
            } else {
                real_stack::create_plain_with_tenants(
                    &dir,
                    raid,
                    disks,
                    chunk_bytes,
                    disk_bytes,
                    layout.as_deref(),
                    block_size,
                    checksums,
                    &tenants,
                )
            }
        })
        .map_err(to_py)?;
    Ok(serde_json::json!({"status": st, "notes": notes}).to_string())
}

/// Create an array laid out by a stack file's `[array]` and keep the stack
/// in `dir`; returns `{"status", "notes"}` as JSON.
#[pyfunction]
#[pyo3(signature = (dir, stack, disk_bytes=None, checksums=false, tenants=Vec::new()))]
fn real_create_stack(
    py: Python<'_>,
    dir: PathBuf,
    stack: PathBuf,
    disk_bytes: Option<u64>,
    checksums: bool,
    tenants: Vec<(String, String)>,
) -> PyResult<String> {
    let (st, notes) = py
        .allow_threads(|| real_stack::create_stack(&dir, &stack, disk_bytes, checksums, &tenants))
        .map_err(to_py)?;
    Ok(serde_json::json!({"status": st, "notes": notes}).to_string())
}

/// The stack of `dir` and its figures as JSON (None: no stack there).
#[pyfunction]
fn real_stack_status(py: Python<'_>, dir: PathBuf) -> PyResult<Option<String>> {
    Ok(py
        .allow_threads(|| real_stack::stack_status(&dir))
        .map_err(to_py)?
        .map(|v| v.to_string()))
}

/// Whether `dir` keeps a stack file (`real create --stack`).
#[pyfunction]
fn real_has_stack(dir: PathBuf) -> bool {
    real_stack::stack_file(&dir).is_some()
}

/// Serve the array over NBD until interrupted. `ready(info, status,
/// recovery)` (JSON texts) is called once it accepts connections.
#[pyfunction]
#[pyo3(signature = (dir, listen, ready, threads=16, direct=false, name="blocklab", start_dirty_degraded=false, record_writes=None))]
#[allow(clippy::too_many_arguments)]
fn real_serve(
    py: Python<'_>,
    dir: PathBuf,
    listen: String,
    ready: PyObject,
    threads: usize,
    direct: bool,
    name: &str,
    start_dirty_degraded: bool,
    record_writes: Option<PathBuf>,
) -> PyResult<()> {
    let opts = ServeOptions {
        listen,
        threads,
        direct,
        name: name.to_string(),
        start_dirty_degraded,
        record_writes,
        ..Default::default()
    };
    let serving = py.allow_threads(|| control::serve(&dir, &opts)).map_err(to_py)?;
    let info = json(&serving.info);
    let status = json(&serving.status());
    let recovery = json(&serving.recovery());
    if let Err(e) = ready.call1(py, (info, status, recovery)) {
        py.allow_threads(|| serving.shutdown()).map_err(to_py)?;
        return Err(e);
    }
    loop {
        py.allow_threads(|| std::thread::sleep(Duration::from_millis(100)));
        if let Err(e) = py.check_signals() {
            py.allow_threads(|| serving.shutdown()).map_err(to_py)?;
            return Err(e);
        }
    }
}

fn interruptible<T: Send>(
    py: Python<'_>,
    f: impl FnOnce(&std::sync::atomic::AtomicBool) -> blocklab::Result<T> + Send,
) -> PyResult<T> {
    py.allow_threads(|| control::run_interruptible(f, || Python::with_gil(|py| py.check_signals())))?
        .map_err(to_py)
}

#[pyfunction]
fn real_status(py: Python<'_>, dir: PathBuf) -> PyResult<String> {
    Ok(json(&py.allow_threads(|| control::status(&dir)).map_err(to_py)?))
}

/// A D-GRAID array's map as `block,owner,kind,parent` lines.
#[pyfunction]
fn real_dgraid_tags(py: Python<'_>, dir: PathBuf) -> PyResult<String> {
    py.allow_threads(|| blocklab::exec::real::dgraid::ops::tags(&dir))
        .map_err(to_py)
}

#[pyfunction]
fn real_fail(py: Python<'_>, dir: PathBuf, disk: u32) -> PyResult<String> {
    Ok(json(&py.allow_threads(|| control::fail(&dir, disk)).map_err(to_py)?))
}

#[pyfunction]
fn real_replace(py: Python<'_>, dir: PathBuf, disk: u32) -> PyResult<String> {
    Ok(json(&py.allow_threads(|| control::replace(&dir, disk)).map_err(to_py)?))
}

fn open_config(start_dirty_degraded: bool) -> OpenConfig {
    OpenConfig {
        start_dirty_degraded,
        ..Default::default()
    }
}

#[pyfunction]
#[pyo3(signature = (dir, repair, start_dirty_degraded=false))]
fn real_check(py: Python<'_>, dir: PathBuf, repair: bool, start_dirty_degraded: bool) -> PyResult<String> {
    let d = dir.clone();
    let open = open_config(start_dirty_degraded);
    Ok(json(&interruptible(py, move |_| {
        control::check_with(&d, repair, &open)
    })?))
}

#[pyfunction]
#[pyo3(signature = (dir, min_kbps=1000, max_kbps=200000, order="md", idle="simple", window=4,
    start_dirty_degraded=false))]
#[allow(clippy::too_many_arguments)]
fn real_rebuild(
    py: Python<'_>,
    dir: PathBuf,
    min_kbps: u64,
    max_kbps: u64,
    order: &str,
    idle: &str,
    window: usize,
    start_dirty_degraded: bool,
) -> PyResult<String> {
    let open = open_config(start_dirty_degraded);
    let opts = RebuildOptions {
        order: order.into(),
        idle: idle.into(),
        window,
        min_kbps,
        max_kbps,
        ..Default::default()
    };
    let d = dir.clone();
    Ok(json(&interruptible(py, move |stop| {
        control::rebuild_with(&d, &opts, stop, &open)
    })?))
}

#[pyfunction]
#[pyo3(signature = (dir, traces, format="auto", replay="open", speedup=1.0, outstanding=1, threads=32,
    direct=true, wrap=false, limit=0, skip_bad=false, sort_window=None, start_dirty_degraded=false, skip=0,
    log=None, think_ms=0.0, window=64, infinitely_fast=false))]
#[allow(clippy::too_many_arguments)]
fn real_replay(
    py: Python<'_>,
    dir: PathBuf,
    traces: Vec<String>,
    format: &str,
    replay: &str,
    speedup: f64,
    outstanding: usize,
    threads: usize,
    direct: bool,
    wrap: bool,
    limit: u64,
    skip_bad: bool,
    sort_window: Option<f64>,
    start_dirty_degraded: bool,
    skip: u64,
    log: Option<String>,
    think_ms: f64,
    window: usize,
    infinitely_fast: bool,
) -> PyResult<String> {
    let o = ReplayOptions {
        skip,
        log,
        think_ms,
        window,
        infinitely_fast,
        traces,
        format: format.into(),
        skip_bad,
        replay: replay.into(),
        speedup,
        outstanding,
        threads,
        direct,
        wrap,
        limit,
        sort_window,
        start_dirty_degraded,
    };
    Ok(json(&interruptible(py, move |_| stack_replay::replay_dir(&dir, &o))?))
}

/// Run the integrity suite; `progress(round, report_json)` is called every
/// `every` rounds.
#[pyfunction]
#[pyo3(signature = (rounds, seed=1, dir=None, nbd_every=4, progress=None, every=100, stack_every=0))]
#[allow(clippy::too_many_arguments)]
fn real_integrity(
    py: Python<'_>,
    rounds: u64,
    seed: u64,
    dir: Option<PathBuf>,
    nbd_every: u64,
    progress: Option<PyObject>,
    every: u64,
    stack_every: u64,
) -> PyResult<String> {
    let o = IntegrityOptions {
        rounds,
        seed,
        dir,
        nbd_every,
        stack_every,
    };
    let mut interrupted: Option<PyErr> = None;
    let rep = py
        .allow_threads(|| {
            integrity::run(&o, &mut |i, rep| {
                Python::with_gil(|py| {
                    if let Err(e) = py.check_signals() {
                        interrupted = Some(e);
                        return false;
                    }
                    if let Some(p) = &progress {
                        if (i + 1) % every.max(1) == 0 {
                            if let Err(e) = p.call1(py, (i + 1, json(rep))) {
                                interrupted = Some(e);
                                return false;
                            }
                        }
                    }
                    true
                })
            })
        })
        .map_err(to_py)?;
    if let Some(e) = interrupted {
        return Err(e);
    }
    Ok(json(&rep))
}

/// Whether `dir` holds an array (for friendlier CLI errors).
#[pyfunction]
fn real_exists(dir: PathBuf) -> bool {
    Path::new(&dir).join("array.json").exists() || blocklab::exec::real::dgraid::is_dgraid_dir(&dir)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(real_create, m)?)?;
    m.add_function(wrap_pyfunction!(real_create_stack, m)?)?;
    m.add_function(wrap_pyfunction!(real_stack_status, m)?)?;
    m.add_function(wrap_pyfunction!(real_has_stack, m)?)?;
    m.add_function(wrap_pyfunction!(real_serve, m)?)?;
    m.add_function(wrap_pyfunction!(real_status, m)?)?;
    m.add_function(wrap_pyfunction!(real_dgraid_tags, m)?)?;
    m.add_function(wrap_pyfunction!(real_fail, m)?)?;
    m.add_function(wrap_pyfunction!(real_replace, m)?)?;
    m.add_function(wrap_pyfunction!(real_check, m)?)?;
    m.add_function(wrap_pyfunction!(real_rebuild, m)?)?;
    m.add_function(wrap_pyfunction!(real_replay, m)?)?;
    m.add_function(wrap_pyfunction!(real_integrity, m)?)?;
    m.add_function(wrap_pyfunction!(real_exists, m)?)?;
    Ok(())
}
