//! Bindings of the composed stack (conversion only).

use std::path::Path;

use blocklab::stack::{run, Executor, StackSpec, TraceInput};
use pyo3::prelude::*;

use crate::to_py;

/// Run a stack file over traces; returns the stack result as JSON.
#[pyfunction]
#[pyo3(signature = (stack, traces, format="auto", executor="timed", sets=Vec::new(), skip_bad=false))]
fn run_stack(
    py: Python<'_>,
    stack: String,
    traces: Vec<String>,
    format: &str,
    executor: &str,
    sets: Vec<String>,
    skip_bad: bool,
) -> PyResult<String> {
    let exec = Executor::parse(executor).map_err(to_py)?;
    let spec = StackSpec::load(Path::new(&stack), &sets).map_err(to_py)?;
    let inputs: Vec<TraceInput> = traces
        .into_iter()
        .map(|path| TraceInput {
            path,
            format: format.to_string(),
            skip_bad,
        })
        .collect();
    let result = py.allow_threads(|| run(&spec, &inputs, exec)).map_err(to_py)?;
    Ok(result.to_json())
}

/// Check a stack file with its overrides without running it (errors as `run_stack`'s).
#[pyfunction]
#[pyo3(signature = (stack, sets=Vec::new()))]
fn check_stack(stack: String, sets: Vec<String>) -> PyResult<()> {
    StackSpec::load(Path::new(&stack), &sets).map_err(to_py)?;
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_stack, m)?)?;
    m.add_function(wrap_pyfunction!(check_stack, m)?)?;
    Ok(())
}
