//! Replay a DiskSim validation trace against a disk model and compute the
//! Ruemmler–Wilkes demerit figure.
//!
//! Trace lines: `R|W Hit|Miss blkno bcount measured_us think_us` (512-byte
//! sectors). One request is outstanding: request i+1 arrives `think_us`
//! after request i *completes* (in the simulation), so the think time moves
//! the platter and lets read-ahead and destaging progress, as on the real
//! drive. The Hit/Miss column is the tracer's guess and is not used.
//!
//! Demerit: the root-mean-square horizontal distance between the simulated
//! and measured response-time CDFs, computed exactly on quantiles: both
//! empirical CDFs are step functions, so the horizontal distance at
//! probability p is `Qs(p) − Qm(p)` and
//! `demerit² = ∫₀¹ (Qs(p) − Qm(p))² dp`, integrated piece by piece between
//! the merged breakpoints k/n and j/m. With equal sample sizes this is the
//! RMS of the differences of the sorted samples.

use std::io::BufRead;
use std::path::Path;

use serde::Serialize;

use crate::array::plan::DiskOpKind;
use crate::device::{DevRequest, DeviceModel};
use crate::error::{Error, Location, Result};

/// One line of a validation trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ValRequest {
    pub kind: DiskOpKind,
    pub lbn: u64,
    pub sectors: u32,
    pub measured_ms: f64,
    pub think_ms: f64,
}

pub fn read_trace(path: &Path) -> Result<Vec<ValRequest>> {
    let shown = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| Error::io(&shown, e))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|e| Error::io(&shown, e))?;
        if let Some(r) = parse_line(&line, &shown, i as u64 + 1)? {
            out.push(r);
        }
    }
    Ok(out)
}

pub fn parse_line(line: &str, file: &str, n: u64) -> Result<Option<ValRequest>> {
    let t = line.trim();
    if t.is_empty() || t.starts_with('#') {
        return Ok(None);
    }
    let f: Vec<&str> = t.split_whitespace().collect();
    let at = Location::Line(n);
    if f.len() != 6 {
        return Err(Error::parse(
            file,
            at,
            "line",
            format!("expected 6 fields, found {}", f.len()),
        ));
    }
    let kind = match f[0] {
        "R" | "r" => DiskOpKind::Read,
        "W" | "w" => DiskOpKind::Write,
        o => return Err(Error::parse(file, at, "op", format!("expected R or W, got `{o}`"))),
    };
    let int = |s: &str, name: &str| {
        s.parse::<u64>()
            .map_err(|_| Error::parse(file, at, name, format!("not a whole number: `{s}`")))
    };
    let num = |s: &str, name: &str| match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(Error::parse(
            file,
            at,
            name,
            format!("not a non-negative number: `{s}`"),
        )),
    };
    let lbn = int(f[2], "blkno")?;
    let sectors = int(f[3], "bcount")?;
    if sectors == 0 || sectors > u32::MAX as u64 {
        return Err(Error::parse(file, at, "bcount", "must be at least 1"));
    }
    Ok(Some(ValRequest {
        kind,
        lbn,
        sectors: sectors as u32,
        measured_ms: num(f[4], "measured_service_us")? / 1000.0,
        think_ms: num(f[5], "next_interarrival_us")? / 1000.0,
    }))
}

/// Replay: returns the simulated service time (ms) of each request.
pub fn replay(model: &mut dyn DeviceModel, reqs: &[ValRequest]) -> Result<Vec<f64>> {
    let cap = model.capacity_sectors();
    let mut now = 0.0;
    let mut out = Vec::with_capacity(reqs.len());
    for (i, r) in reqs.iter().enumerate() {
        if r.lbn + r.sectors as u64 > cap {
            return Err(Error::config(format!(
                "request {} (blocks {}+{}) is beyond the disk's {cap} sectors",
                i + 1,
                r.lbn,
                r.sectors
            )));
        }
        let s = model.service(
            now,
            &DevRequest {
                kind: r.kind,
                lbn: r.lbn,
                sectors: r.sectors,
            },
        );
        out.push(s);
        now += s + r.think_ms;
    }
    Ok(out)
}

/// RMS horizontal distance between two empirical CDFs (same units as input).
pub fn demerit(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (n, m) = (a.len(), b.len());
    // Walk the merged breakpoints i/n and j/m (compared exactly as i·m vs j·n).
    let (mut i, mut j) = (0usize, 0usize);
    let mut prev = 0.0f64;
    let mut sum = 0.0;
    while i < n && j < m {
        let (ni, nj) = ((i + 1) as u128 * m as u128, (j + 1) as u128 * n as u128);
        let next = if ni <= nj {
            (i + 1) as f64 / n as f64
        } else {
            (j + 1) as f64 / m as f64
        };
        let d = a[i] - b[j];
        sum += d * d * (next - prev);
        prev = next;
        if ni <= nj {
            i += 1;
        }
        if nj <= ni {
            j += 1;
        }
    }
    sum.max(0.0).sqrt()
}

/// `<repo>/../shared/disk-models/disksim-valid` (or `$BLOCKLAB_SHARED/...`)
/// when present; tests and the development table use it.
pub fn validation_dir() -> Option<std::path::PathBuf> {
    let base = std::env::var_os("BLOCKLAB_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let d = base.join("disk-models/disksim-valid");
    d.exists().then_some(d)
}

#[derive(Debug, Clone, Serialize)]
pub struct Validation {
    pub requests: usize,
    pub demerit_ms: f64,
    pub demerit_pct: f64,
    pub mean_measured_ms: f64,
    pub mean_simulated_ms: f64,
    /// Per request, in trace order.
    #[serde(skip)]
    pub simulated_ms: Vec<f64>,
    #[serde(skip)]
    pub measured_ms: Vec<f64>,
}

/// Load a model (by extension), replay `trace`, compare with the measurements.
pub fn validate(model_path: &Path, trace: &Path) -> Result<Validation> {
    let mut model = crate::device::load(model_path)?;
    let reqs = read_trace(trace)?;
    validate_model(model.as_mut(), &reqs)
}

pub fn validate_model(model: &mut dyn DeviceModel, reqs: &[ValRequest]) -> Result<Validation> {
    let sim = replay(model, reqs)?;
    let meas: Vec<f64> = reqs.iter().map(|r| r.measured_ms).collect();
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let d = demerit(&sim, &meas);
    let mm = mean(&meas);
    Ok(Validation {
        requests: reqs.len(),
        demerit_ms: d,
        demerit_pct: if mm > 0.0 { 100.0 * d / mm } else { 0.0 },
        mean_measured_ms: mm,
        mean_simulated_ms: mean(&sim),
        simulated_ms: sim,
        measured_ms: meas,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demerit_of_equal_samples_is_rms_of_sorted_differences() {
        // Sorted pairs (1,2), (2,2), (3,5): differences 1, 0, 2 → √(5/3).
        let d = demerit(&[3.0, 1.0, 2.0], &[2.0, 5.0, 2.0]);
        assert!((d - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(demerit(&[1.0, 2.0], &[2.0, 1.0]), 0.0);
    }

    #[test]
    fn demerit_with_unequal_sizes_integrates_over_merged_steps() {
        // a = {0, 10} (steps at ½), b = {0, 0, 30} (steps at ⅓, ⅔).
        // p∈(0,⅓]: 0−0; (⅓,½]: 0−0; (½,⅔]: 10−0; (⅔,1]: 10−30.
        // ∫ = 100·(1/6) + 400·(1/3) = 150 → √150.
        let d = demerit(&[0.0, 10.0], &[0.0, 0.0, 30.0]);
        assert!((d - 150f64.sqrt()).abs() < 1e-9, "{d}");
    }

    #[test]
    fn a_shift_gives_the_shift() {
        let a: Vec<f64> = (0..100).map(|i| i as f64 * 0.1).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 0.25).collect();
        assert!((demerit(&a, &b) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn bad_lines_are_parse_errors() {
        assert!(parse_line("R Hit 10 4 1000.0 2000.0", "t", 1).unwrap().is_some());
        for (line, field) in [
            ("X Hit 10 4 1 2", "op"),
            ("R Hit -1 4 1 2", "blkno"),
            ("R Hit 10 0 1 2", "bcount"),
            ("R Hit 10 4 abc 2", "measured_service_us"),
            ("R Hit 10 4 1 nan", "next_interarrival_us"),
            ("R Hit 10 4 1", "line"),
        ] {
            match parse_line(line, "t", 7) {
                Err(Error::Parse { location, field: f, .. }) => {
                    assert_eq!(location, Location::Line(7));
                    assert_eq!(f, field, "{line}");
                }
                other => panic!("{line}: {other:?}"),
            }
        }
    }

    #[test]
    fn atlas10k_validates_under_disksims_demerit() {
        let Some(dir) = validation_dir() else { return };
        let v = validate(&dir.join("atlas10k.parv"), &dir.join("atlas10k.trace")).unwrap();
        assert_eq!(v.requests, 10_000);
        // DiskSim 4.0 reaches 0.268 ms on this drive.
        assert!(v.demerit_ms <= 0.268, "demerit {} ms", v.demerit_ms);
        assert!((v.mean_simulated_ms - v.mean_measured_ms).abs() < 0.2);
    }
}
