//! Thin PyO3 bindings: conversion only, no policy logic. Engine results are
//! handed to Python as JSON text (serde), which the Python package decodes.
//! Each engine area registers its functions from its own file.

mod array;
mod cache;
mod dgraid;
mod disk;
mod policy;
mod real;
mod stack;
mod timed;
mod trace;
mod vdf;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    _core,
    BlocklabError,
    PyException,
    "Bad input or configuration (file, line, field)."
);

/// Map an engine error to the Python exception the CLI reports with exit status 2.
pub(crate) fn to_py(err: blocklab::Error) -> PyErr {
    BlocklabError::new_err(err.to_string())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("BlocklabError", m.py().get_type::<BlocklabError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    trace::register(m)?;
    cache::register(m)?;
    array::register(m)?;
    disk::register(m)?;
    timed::register(m)?;
    policy::register(m)?;
    stack::register(m)?;
    vdf::register(m)?;
    dgraid::register(m)?;
    real::register(m)?;
    Ok(())
}
