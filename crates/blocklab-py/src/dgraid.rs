//! Bindings of the ext2 model and D-GRAID (conversion only): parameters
//! arrive as JSON objects (the fields of the engine's `*Params` structs),
//! results leave as JSON text.

use crate::to_py;
use blocklab::dgraid::run;
use blocklab::fsmodel::{Geometry, MkfsParams};
use pyo3::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

fn params<T: DeserializeOwned>(text: &str) -> PyResult<T> {
    serde_json::from_str(text).map_err(|e| to_py(blocklab::Error::config(format!("bad parameters: {e}"))))
}

fn json<T: Serialize>(v: &T) -> PyResult<String> {
    serde_json::to_string(v).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
}

/// The layout `mke2fs -t ext2` gives: JSON of the whole geometry (`groups` is the per-group list).
#[pyfunction]
#[pyo3(signature = (size, block_size, inode_ratio=None, inode_size=None))]
fn fs_geometry(size: u64, block_size: u64, inode_ratio: Option<u64>, inode_size: Option<u64>) -> PyResult<String> {
    let g = Geometry::mke2fs(&MkfsParams {
        size_bytes: size,
        block_size,
        inode_ratio,
        inode_size,
    })
    .map_err(to_py)?;
    json(&g)
}

/// Statistics of a tree (`TreeSpec` JSON); writes it as a listing to `out` when given.
#[pyfunction]
#[pyo3(signature = (tree, out=None))]
fn fs_tree(py: Python<'_>, tree: &str, out: Option<std::path::PathBuf>) -> PyResult<String> {
    let spec: run::TreeSpec = params(tree)?;
    py.allow_threads(|| {
        let ns = spec.load()?;
        if let Some(p) = &out {
            let name = p.display().to_string();
            let f = std::fs::File::create(p).map_err(|e| blocklab::Error::io(&name, e))?;
            let mut w = std::io::BufWriter::new(f);
            ns.write_listing(&mut w, 4096)
                .map_err(|e| blocklab::Error::io(&name, e))?;
            std::io::Write::flush(&mut w).map_err(|e| blocklab::Error::io(&name, e))?;
        }
        Ok(ns.stats())
    })
    .map_err(to_py)
    .and_then(|s| json(&s))
}

/// Annotated trace of making the file system and copying the tree in.
#[pyfunction]
fn fs_trace(py: Python<'_>, params_json: &str, out: std::path::PathBuf) -> PyResult<String> {
    let p: run::TraceParams = params(params_json)?;
    let r = py.allow_threads(|| run::write_trace(&p, &out)).map_err(to_py)?;
    json(&r)
}

#[pyfunction]
fn dgraid_avail(py: Python<'_>, params_json: &str) -> PyResult<String> {
    let p: run::AvailParams = params(params_json)?;
    let r = py.allow_threads(|| run::availability(&p)).map_err(to_py)?;
    json(&r)
}

#[pyfunction]
fn dgraid_space(py: Python<'_>, params_json: &str) -> PyResult<String> {
    let p: run::SpaceParams = params(params_json)?;
    let r = py.allow_threads(|| run::space(&p)).map_err(to_py)?;
    json(&r)
}

#[pyfunction]
fn dgraid_postmark(py: Python<'_>, params_json: &str) -> PyResult<String> {
    let p: run::PostmarkParams = params(params_json)?;
    let r = py.allow_threads(|| run::postmark(&p)).map_err(to_py)?;
    json(&r)
}

#[pyfunction]
fn dgraid_live(py: Python<'_>, params_json: &str) -> PyResult<String> {
    let p: run::LiveParams = params(params_json)?;
    let r = py.allow_threads(|| run::live(&p)).map_err(to_py)?;
    json(&r)
}

#[pyfunction]
fn dgraid_diffusion(py: Python<'_>, params_json: &str) -> PyResult<String> {
    let p: run::DiffusionParams = params(params_json)?;
    let r = py.allow_threads(|| run::diffusion(&p)).map_err(to_py)?;
    json(&r)
}

#[pyfunction]
fn dgraid_place(py: Python<'_>, params_json: &str) -> PyResult<String> {
    let p: run::PlaceParams = params(params_json)?;
    let r = py.allow_threads(|| run::place_trace(&p)).map_err(to_py)?;
    json(&r)
}

/// An ext2 image written through the inference classifier in an order,
/// scored against its truth CSV (`InferParams` JSON in, `InferReport` out).
#[pyfunction]
fn dgraid_infer(py: Python<'_>, params_json: &str) -> PyResult<String> {
    let p: blocklab::dgraid::infer::measure::InferParams = params(params_json)?;
    let r = py
        .allow_threads(|| blocklab::dgraid::infer::measure::measure(&p))
        .map_err(to_py)?;
    json(&r)
}

/// An annotated trace of a model workload (`postmark`, `seqread`,
/// `readers`) written to `out`; its summary as JSON.
#[pyfunction]
fn dgraid_workload(py: Python<'_>, kind: &str, params_json: &str, out: &str, max_request: u64) -> PyResult<String> {
    use blocklab::dgraid::workload;
    let path = std::path::PathBuf::from(out);
    let r = match kind {
        "postmark" => {
            let p: run::PostmarkParams = params(params_json)?;
            py.allow_threads(|| workload::postmark_trace(&p, &path, max_request))
        }
        "seqread" => {
            let p: workload::SeqReadParams = params(params_json)?;
            py.allow_threads(|| workload::seqread_trace(&p, &path))
        }
        "readers" => {
            let p: workload::ReadersParams = params(params_json)?;
            py.allow_threads(|| workload::readers_trace(&p, &path))
        }
        other => Err(blocklab::Error::unknown(
            "workload",
            other,
            &["postmark", "seqread", "readers"],
        )),
    }
    .map_err(to_py)?;
    json(&r)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(dgraid_workload, m)?)?;
    m.add_function(wrap_pyfunction!(dgraid_place, m)?)?;
    m.add_function(wrap_pyfunction!(dgraid_infer, m)?)?;
    m.add_function(wrap_pyfunction!(fs_geometry, m)?)?;
    m.add_function(wrap_pyfunction!(fs_tree, m)?)?;
    m.add_function(wrap_pyfunction!(fs_trace, m)?)?;
    m.add_function(wrap_pyfunction!(dgraid_avail, m)?)?;
    m.add_function(wrap_pyfunction!(dgraid_space, m)?)?;
    m.add_function(wrap_pyfunction!(dgraid_postmark, m)?)?;
    m.add_function(wrap_pyfunction!(dgraid_live, m)?)?;
    m.add_function(wrap_pyfunction!(dgraid_diffusion, m)?)?;
    Ok(())
}
