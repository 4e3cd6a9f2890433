//! Bindings of the array area (conversion only).

use blocklab::array::{self, plans::plan_view, Array, ArrayConfig};
use blocklab::exec::count::CountExecutor;
use pyo3::prelude::*;
use serde_json::json;

use crate::to_py;

fn build(
    level: &str,
    disks: u32,
    chunk_bytes: u64,
    layout: Option<&str>,
    block_size: u64,
    disk_bytes: u64,
    failed: &[u32],
) -> blocklab::Result<Array> {
    let mut a = Array::new(ArrayConfig::from_names_sized(
        level,
        disks,
        chunk_bytes,
        layout,
        block_size,
        disk_bytes,
    )?)?;
    for &d in failed {
        a.fail(d)?;
    }
    Ok(a)
}

/// With a known member size, blocks past the array's end are an error (a
/// far layout would otherwise place them over other blocks' copies).
fn check_within(a: &Array, first: u64, count: u64) -> blocklab::Result<()> {
    match a.capacity_blocks() {
        Some(cap) if first.saturating_add(count) > cap => Err(blocklab::Error::config(format!(
            "block {} is beyond the array: {} disks of {} B hold {cap} blocks (0..{})",
            first.saturating_add(count) - 1,
            a.ndisks(),
            a.config().disk_bytes,
            cap.saturating_sub(1)
        ))),
        _ => Ok(()),
    }
}

/// Parse a byte size such as `64KiB`.
#[pyfunction]
fn parse_bytes(s: &str) -> PyResult<u64> {
    array::parse_bytes(s).map_err(to_py)
}

/// Placement of each logical block, as JSON: a list of
/// `{"block", "disks", "disk_block", "disk_blocks", "parity"}`.
#[pyfunction]
#[pyo3(signature = (level, disks, chunk_bytes, blocks, layout=None, block_size=4096, disk_bytes=0))]
fn array_map(
    py: Python<'_>,
    level: &str,
    disks: u32,
    chunk_bytes: u64,
    blocks: Vec<u64>,
    layout: Option<&str>,
    block_size: u64,
    disk_bytes: u64,
) -> PyResult<String> {
    let a = build(level, disks, chunk_bytes, layout, block_size, disk_bytes, &[]).map_err(to_py)?;
    for &b in &blocks {
        check_within(&a, b, 1).map_err(to_py)?;
    }
    py.allow_threads(|| {
        let out: Vec<_> = blocks
            .iter()
            .map(|&b| {
                let p = a.map(b);
                json!({"block": b, "disks": p.disks, "disk_block": p.disk_block,
                       "disk_blocks": p.disk_blocks, "parity": p.parity})
            })
            .collect();
        Ok(serde_json::to_string(&out).expect("serializable"))
    })
}

/// The I/O plan of one logical read or write, with its counts, as JSON.
#[pyfunction]
#[pyo3(signature = (level, disks, chunk_bytes, op, block, nblocks=1, failed=vec![], layout=None, block_size=4096, disk_bytes=0))]
#[allow(clippy::too_many_arguments)]
fn array_plan(
    py: Python<'_>,
    level: &str,
    disks: u32,
    chunk_bytes: u64,
    op: &str,
    block: u64,
    nblocks: u64,
    failed: Vec<u32>,
    layout: Option<&str>,
    block_size: u64,
    disk_bytes: u64,
) -> PyResult<String> {
    let a = build(level, disks, chunk_bytes, layout, block_size, disk_bytes, &failed).map_err(to_py)?;
    check_within(&a, block, nblocks).map_err(to_py)?;
    let write = match op {
        "read" => false,
        "write" => true,
        other => return Err(to_py(blocklab::Error::unknown("operation", other, &["read", "write"]))),
    };
    py.allow_threads(|| {
        let plan = if write {
            a.plan_write(block, nblocks)
        } else {
            a.plan_read(block, nblocks)
        };
        let mut ex = CountExecutor::new(a.ndisks());
        ex.run(&plan);
        let penalties: Vec<Option<u32>> = (block..block + nblocks).map(|b| a.read_penalty(b)).collect();
        let out = json!({
            "level": a.level().name(),
            "disks": a.ndisks(),
            "layout": a.config().layout_name(),
            "disk_bytes": a.config().disk_bytes,
            "chunk_bytes": a.config().chunk_bytes,
            "block_size": a.config().block_size,
            "failed": a.failed(),
            "op": op,
            "block": block,
            "nblocks": nblocks,
            "read_penalty": penalties,
            "plan": plan_view(&plan),
            "counts": ex.summary(),
        });
        Ok(serde_json::to_string(&out).expect("serializable"))
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(array_map, m)?)?;
    m.add_function(wrap_pyfunction!(array_plan, m)?)?;
    Ok(())
}
