//! Per-access results of one replacement policy, for cross-checking against
//! other simulators (conversion only: the policy logic lives in `blocklab`).

use blocklab::cache::{build, Access, NEVER, POLICIES};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Feed `blocks` one by one to policy `name` with `capacity` blocks and return
/// one byte per access: 1 for a hit, 0 for a miss. `next_use[i]` is the index
/// of the next access to `blocks[i]` (negative: never again); it is needed by
/// `opt` only, and when it is omitted every access counts as never reused.
#[pyfunction]
#[pyo3(signature = (name, capacity, blocks, next_use=None))]
fn policy_hits<'py>(
    py: Python<'py>,
    name: &str,
    capacity: usize,
    blocks: Vec<u64>,
    next_use: Option<Vec<i64>>,
) -> PyResult<Bound<'py, PyBytes>> {
    if let Some(n) = &next_use {
        if n.len() != blocks.len() {
            return Err(crate::to_py(blocklab::Error::config(format!(
                "next_use has {} entries but blocks has {}",
                n.len(),
                blocks.len()
            ))));
        }
    }
    let mut policy = build(name, capacity).map_err(crate::to_py)?;
    let out = py.allow_threads(|| {
        let mut out = Vec::with_capacity(blocks.len());
        for (i, &block) in blocks.iter().enumerate() {
            let nu = match &next_use {
                Some(n) if n[i] >= 0 => n[i] as u64,
                _ => NEVER,
            };
            out.push(policy.access(&Access {
                block,
                next_use: nu,
                write: false,
            }) as u8);
        }
        out
    });
    Ok(PyBytes::new(py, &out))
}

/// Names of the replacement policies.
#[pyfunction]
fn policy_names() -> Vec<&'static str> {
    POLICIES.to_vec()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(policy_hits, m)?)?;
    m.add_function(wrap_pyfunction!(policy_names, m)?)?;
    Ok(())
}
