//! Bindings of the disk area (conversion only).

use std::io::Write;
use std::path::Path;

use pyo3::prelude::*;

use crate::to_py;

/// Replay a DiskSim validation trace on a disk model (`.parv` or `.toml`);
/// optionally write one simulated service time (ms) per line to
/// `responses_out`; returns the summary as JSON text, with the per-request
/// `simulated_ms` and `measured_ms` lists when `samples` is set.
#[pyfunction]
#[pyo3(signature = (model, trace, responses_out=None, samples=false))]
fn disk_validate(
    py: Python<'_>,
    model: &str,
    trace: &str,
    responses_out: Option<&str>,
    samples: bool,
) -> PyResult<String> {
    py.allow_threads(|| {
        let v = blocklab::device::validate::validate(Path::new(model), Path::new(trace))?;
        if let Some(out) = responses_out {
            let f = std::fs::File::create(out).map_err(|e| blocklab::Error::io(out, e))?;
            let mut w = std::io::BufWriter::new(f);
            for s in &v.simulated_ms {
                writeln!(w, "{s:.6}").map_err(|e| blocklab::Error::io(out, e))?;
            }
            w.flush().map_err(|e| blocklab::Error::io(out, e))?;
        }
        let mut out = serde_json::to_value(&v).map_err(|e| blocklab::Error::config(e.to_string()))?;
        if samples {
            out["simulated_ms"] = serde_json::json!(v.simulated_ms);
            out["measured_ms"] = serde_json::json!(v.measured_ms);
        }
        Ok(out.to_string())
    })
    .map_err(to_py)
}

/// Write `model` (a native TOML disk spec) scaled `years` ahead to `out`
/// (Hsu–Smith's four trends at annual rates; None: the defaults); returns
/// a summary of both disks as JSON text.
#[pyfunction]
#[pyo3(signature = (model, years, out, seek_rate=None, rpm_rate=None, bpi_rate=None, tpi_rate=None))]
#[allow(clippy::too_many_arguments)]
fn disk_scale(
    model: &str,
    years: f64,
    out: &str,
    seek_rate: Option<f64>,
    rpm_rate: Option<f64>,
    bpi_rate: Option<f64>,
    tpi_rate: Option<f64>,
) -> PyResult<String> {
    use blocklab::device::scale::{scale_spec, summary, ScaleRates};
    let d = ScaleRates::default();
    let rates = ScaleRates {
        seek: seek_rate.unwrap_or(d.seek),
        rpm: rpm_rate.unwrap_or(d.rpm),
        bpi: bpi_rate.unwrap_or(d.bpi),
        tpi: tpi_rate.unwrap_or(d.tpi),
    };
    let run = || -> blocklab::Result<String> {
        let src = std::fs::read_to_string(model).map_err(|e| blocklab::Error::io(model, e))?;
        let scaled = scale_spec(&src, model, years, &rates)?;
        std::fs::write(out, &scaled).map_err(|e| blocklab::Error::io(out, e))?;
        Ok(summary(&src, &scaled, model, out, years, &rates)?.to_string())
    };
    run().map_err(to_py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(disk_validate, m)?)?;
    m.add_function(wrap_pyfunction!(disk_scale, m)?)?;
    Ok(())
}
