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
    failed: &[u32],
) -> blocklab::Result<Array> {
    let mut a = Array::new(ArrayConfig::from_names(level, disks, chunk_bytes, layout, block_size)?)?;
    for &d in failed {
        a.fail(d)?;
    }
    Ok(a)
}

/// Parse a byte size such as `64KiB`.
#[pyfunction]
fn parse_bytes(s: &str) -> PyResult<u64> {
    array::parse_bytes(s).map_err(to_py)
}

/// Placement of each logical block, as JSON: a list of
/// `{"block", "disks", "disk_block", "disk_blocks", "parity"}`.
#[pyfunction]
#[pyo3(signature = (level, disks, chunk_bytes, blocks, layout=None, block_size=4096))]
fn array_map(
    py: Python<'_>,
    level: &str,
    disks: u32,
    chunk_bytes: u64,
    blocks: Vec<u64>,
    layout: Option<&str>,
    block_size: u64,
) -> PyResult<String> {
    let a = build(level, disks, chunk_bytes, layout, block_size, &[]).map_err(to_py)?;
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
#[pyo3(signature = (level, disks, chunk_bytes, op, block, nblocks=1, failed=vec![], layout=None, block_size=4096))]
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
) -> PyResult<String> {
    let a = build(level, disks, chunk_bytes, layout, block_size, &failed).map_err(to_py)?;
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
            "layout": a.config().layout.name(),
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
