//! Bindings of the composed stack (conversion only).

use std::path::Path;

use blocklab::stack::batch::run_count_each;
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
    let inputs = trace_inputs(traces, format, skip_bad);
    let result = py.allow_threads(|| run(&spec, &inputs, exec)).map_err(to_py)?;
    Ok(result.to_json())
}

/// Check a stack file with its overrides without running it (errors as
/// `run_stack`'s): its keys and names, and that its device models load.
#[pyfunction]
#[pyo3(signature = (stack, sets=Vec::new()))]
fn check_stack(stack: String, sets: Vec<String>) -> PyResult<()> {
    let spec = StackSpec::load(Path::new(&stack), &sets).map_err(to_py)?;
    blocklab::stack::build::check_models(&spec).map_err(to_py)?;
    Ok(())
}

/// Counted runs of many (stack file, overrides) cells over the same traces,
/// sharing passes where that leaves each result as it is alone
/// (`stack::batch`); one `(json, None)` or `(None, error)` per cell, in order.
#[pyfunction]
#[pyo3(signature = (cells, traces, format="auto", skip_bad=false))]
fn run_stacks_count(
    py: Python<'_>,
    cells: Vec<(String, Vec<String>)>,
    traces: Vec<String>,
    format: &str,
    skip_bad: bool,
) -> Vec<(Option<String>, Option<String>)> {
    let inputs = trace_inputs(traces, format, skip_bad);
    let loaded: Vec<blocklab::Result<StackSpec>> = cells
        .iter()
        .map(|(stack, sets)| StackSpec::load(Path::new(stack), sets))
        .collect();
    let specs: Vec<StackSpec> = loaded.iter().filter_map(|s| s.as_ref().ok().cloned()).collect();
    let mut results = py.allow_threads(|| run_count_each(&specs, &inputs)).into_iter();
    loaded
        .into_iter()
        .map(
            |s| match s.and_then(|_| results.next().expect("one result per loaded stack")) {
                Ok(r) => (Some(r.to_json()), None),
                Err(e) => (None, Some(e.to_string())),
            },
        )
        .collect()
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_stack, m)?)?;
    m.add_function(wrap_pyfunction!(check_stack, m)?)?;
    m.add_function(wrap_pyfunction!(run_stacks_count, m)?)?;
    Ok(())
}

/// The traces of a run, each read with `format` (`skip_bad`: malformed lines skipped).
fn trace_inputs(traces: Vec<String>, format: &str, skip_bad: bool) -> Vec<TraceInput> {
    traces
        .into_iter()
        .map(|path| TraceInput {
            path,
            format: format.to_string(),
            skip_bad,
        })
        .collect()
}
