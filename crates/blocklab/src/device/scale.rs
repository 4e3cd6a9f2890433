//! Disk-technology scaling (Hsu & Smith §5): a native `[hdd]` spec moved
//! `years` ahead along four separate trends, each at an annual rate:
//!
//! * faster seeks — every seek time (both curves, and the head switch, a
//!   track-to-track settle) × (1 − seek)^years;
//! * higher RPM — `rpm` × (1 + rpm)^years;
//! * linear density (BPI) — sectors per track × (1 + bpi)^years (media rate
//!   and capacity grow with it); the host interface keeps its ratio to the
//!   outer media rate;
//! * track density (TPI) — cylinders × (1 + tpi)^years, and the seek curve's
//!   distance axis with them, `t'(d) = f · t(d / g)`, so that crossing the
//!   same width of the platter takes the time the faster actuator needs.
//!
//! Command overheads, zones, surfaces and the drive cache stay as they are.
//! The default rates ([`ScaleRates::default`]) are fitted to the drives of
//! 1992–2001 whose parameters we have (see docs/repro-hsu-smith.md, "Disk
//! technology"): the paper's own rates are in the part of its text we lack.

use toml::Value;

use crate::error::{Error, Location, Result};

/// Annual rates of the four trends (fractions: 0.085 = 8.5 % a year).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScaleRates {
    /// Seek times shrink by this share a year.
    pub seek: f64,
    pub rpm: f64,
    pub bpi: f64,
    pub tpi: f64,
}

impl Default for ScaleRates {
    /// Log-linear fits over 11 drives, 1992–2001 (HP C2247A to IBM
    /// Ultrastar 73LZX): mean random seek −8.5 %/yr, RPM +7.9 %/yr, outer
    /// sectors per track +26 %/yr, cylinders +32 %/yr (areal density +67
    /// %/yr, within the 60–100 %/yr the literature reports for the decade).
    fn default() -> Self {
        ScaleRates {
            seek: 0.085,
            rpm: 0.079,
            bpi: 0.26,
            tpi: 0.32,
        }
    }
}

/// The factors after `years`: (seek time, rpm, bpi, tpi).
pub fn factors(years: f64, r: &ScaleRates) -> (f64, f64, f64, f64) {
    (
        (1.0 - r.seek).powf(years),
        (1.0 + r.rpm).powf(years),
        (1.0 + r.bpi).powf(years),
        (1.0 + r.tpi).powf(years),
    )
}

fn bad(file: &str, key: &str, msg: impl Into<String>) -> Error {
    Error::parse(file, Location::Whole, key, msg.into())
}

fn num(t: &toml::Table, key: &str, file: &str) -> Result<f64> {
    match t.get(key) {
        Some(Value::Integer(i)) => Ok(*i as f64),
        Some(Value::Float(x)) => Ok(*x),
        _ => Err(bad(file, key, format!("`{key}` must be a number"))),
    }
}

fn set_num(t: &mut toml::Table, key: &str, v: f64, whole: bool) {
    let v = if whole {
        Value::Integer(v.round().max(1.0) as i64)
    } else {
        Value::Float((v * 1e6).round() / 1e6)
    };
    t.insert(key.to_string(), v);
}

/// Scale one seek curve table (`[hdd.seek]` / `[hdd.write_seek]`).
fn scale_seek(t: &mut toml::Table, f: f64, g: f64, file: &str, key: &str) -> Result<()> {
    let form = t
        .get("form")
        .and_then(Value::as_str)
        .ok_or_else(|| bad(file, key, "a seek curve needs a `form`"))?
        .to_string();
    match form.as_str() {
        "power-linear" | "three-point" => {
            for k in ["single_ms", "average_ms", "full_ms"] {
                let v = num(t, k, file)?;
                set_num(t, k, v * f, false);
            }
            if form == "power-linear" {
                let b = num(t, "boundary", file)?;
                set_num(t, "boundary", b * g, false);
            }
        }
        "table" => {
            let pts = t
                .get("points")
                .and_then(Value::as_array)
                .ok_or_else(|| bad(file, key, "a seek table needs `points`"))?;
            let mut out = Vec::new();
            for p in pts {
                let pair = p.as_array().filter(|a| a.len() == 2);
                let get = |v: &Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
                match pair.and_then(|a| Some((get(&a[0])?, get(&a[1])?))) {
                    Some((d, ms)) => out.push(Value::Array(vec![
                        Value::Float((d * g * 1e3).round() / 1e3),
                        Value::Float((ms * f * 1e6).round() / 1e6),
                    ])),
                    None => return Err(bad(file, key, "seek points are [distance, ms] pairs")),
                }
            }
            t.insert("points".into(), Value::Array(out));
        }
        "hpl" => {
            // a + b√d below x0, c + e·d above: t'(d) = f·t(d/g).
            let (x0, a, b, c, e) = (
                num(t, "x0", file)?,
                num(t, "a", file)?,
                num(t, "b", file)?,
                num(t, "c", file)?,
                num(t, "e", file)?,
            );
            set_num(t, "x0", x0 * g, false);
            set_num(t, "a", a * f, false);
            set_num(t, "b", b * f / g.sqrt(), false);
            set_num(t, "c", c * f, false);
            set_num(t, "e", e * f / g, false);
        }
        other => return Err(bad(file, key, format!("unknown seek form `{other}`"))),
    }
    Ok(())
}

/// The spec text `src` (a native TOML `[hdd]` spec) moved `years` ahead.
pub fn scale_spec(src: &str, file: &str, years: f64, r: &ScaleRates) -> Result<String> {
    if !(years.is_finite() && years >= 0.0) {
        return Err(Error::config("--years must be a non-negative number"));
    }
    // Seek times shrink by `seek` (below 1); the others grow by theirs (above −1).
    for (name, v, max) in [
        ("--seek-rate", r.seek, 1.0),
        ("--rpm-rate", r.rpm, f64::INFINITY),
        ("--bpi-rate", r.bpi, f64::INFINITY),
        ("--tpi-rate", r.tpi, f64::INFINITY),
    ] {
        if !(v.is_finite() && v > -1.0 && v < max) {
            return Err(Error::config(format!(
                "{name}: {v} is not an annual rate (a fraction such as 0.08)"
            )));
        }
    }
    // Check it is a valid spec first (errors name the file).
    let spec = super::spec::parse_spec(src, file)?;
    if spec.hdd.is_none() {
        return Err(bad(file, "hdd", "only a disk ([hdd]) can be scaled"));
    }
    let mut root: toml::Table = toml::from_str(src).map_err(|e| bad(file, "spec", e.message().to_string()))?;
    let (f, fr, fb, ft) = factors(years, r);
    let name = root.get("name").and_then(Value::as_str).unwrap_or("disk").to_string();
    root.insert("name".into(), Value::String(format!("{name} + {years} years")));
    root.insert(
        "description".into(),
        Value::String(format!(
            "{name} scaled {years} years ahead: seek x{f:.3}, rpm x{fr:.3}, linear density x{fb:.3}, track density x{ft:.3} \
             (annual rates: seek -{:.1}%, rpm +{:.1}%, bpi +{:.1}%, tpi +{:.1}%)",
            100.0 * r.seek,
            100.0 * r.rpm,
            100.0 * r.bpi,
            100.0 * r.tpi
        )),
    );
    let hdd = root
        .get_mut("hdd")
        .and_then(Value::as_table_mut)
        .ok_or_else(|| bad(file, "hdd", "no [hdd] table"))?;
    let rpm = num(hdd, "rpm", file)?;
    set_num(hdd, "rpm", rpm * fr, false);
    for k in ["outer_sectors_per_track", "inner_sectors_per_track"] {
        let v = num(hdd, k, file)?;
        set_num(hdd, k, v * fb, true);
    }
    let cyl = num(hdd, "cylinders", file)?;
    set_num(hdd, "cylinders", cyl * ft, true);
    let hs = num(hdd, "head_switch_ms", file)?;
    set_num(hdd, "head_switch_ms", hs * f, false);
    let bus = num(hdd, "bus_mb_s", file)?;
    set_num(hdd, "bus_mb_s", bus * fr * fb, false);
    // Explicit skews are in sectors of the old geometry: derive them anew.
    hdd.remove("track_skew_sectors");
    hdd.remove("cylinder_skew_sectors");
    for key in ["seek", "write_seek"] {
        if let Some(t) = hdd.get_mut(key).and_then(Value::as_table_mut) {
            scale_seek(t, f, ft, file, &format!("hdd.{key}"))?;
        }
    }
    let out = toml::to_string(&root).map_err(|e| Error::config(e.to_string()))?;
    // The result must load as a disk.
    super::spec::build(&super::spec::parse_spec(&out, file)?)
        .map_err(|e| Error::config(format!("{file} scaled {years} years: {e}")))?;
    Ok(out)
}

/// What a disk spec describes, for a before/after summary: capacity (GB),
/// RPM, average read seek (ms), outer media rate (MB/s), cylinders.
fn describe(src: &str, file: &str) -> Result<serde_json::Value> {
    let spec = super::spec::parse_spec(src, file)?;
    let h = spec.hdd.as_ref().ok_or_else(|| bad(file, "hdd", "not a disk"))?;
    let model = super::spec::build(&spec)?;
    let average = match &h.seek {
        super::spec::SeekSpec::ThreePoint { average_ms, .. }
        | super::spec::SeekSpec::PowerLinear { average_ms, .. } => Some(*average_ms),
        _ => None,
    };
    Ok(serde_json::json!({
        "name": spec.name,
        "capacity_gb": model.capacity_sectors() as f64 * 512.0 / 1e9,
        "rpm": h.rpm,
        "average_seek_ms": average,
        "outer_media_mb_s": h.outer_sectors_per_track as f64 * 512.0 * h.rpm / 60.0 / 1e6,
        "cylinders": h.cylinders,
    }))
}

/// The `disk scale` summary: both disks, the factors and the rates.
pub fn summary(
    src: &str,
    scaled: &str,
    file: &str,
    out: &str,
    years: f64,
    r: &ScaleRates,
) -> Result<serde_json::Value> {
    let (f, fr, fb, ft) = factors(years, r);
    Ok(serde_json::json!({
        "model": file,
        "out": out,
        "years": years,
        "rates": {"seek": r.seek, "rpm": r.rpm, "bpi": r.bpi, "tpi": r.tpi},
        "factors": {"seek": f, "rpm": fr, "bpi": fb, "tpi": ft},
        "before": describe(src, file)?,
        "after": describe(scaled, out)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str = include_str!("../../../../examples/disks/hsu-smith/ultrastar-73lzx-36.toml");

    #[test]
    fn zero_years_changes_nothing_that_matters() {
        let out = scale_spec(SPEC, "d.toml", 0.0, &ScaleRates::default()).unwrap();
        let a = super::super::spec::build(&super::super::spec::parse_spec(SPEC, "a").unwrap()).unwrap();
        let b = super::super::spec::build(&super::super::spec::parse_spec(&out, "b").unwrap()).unwrap();
        assert_eq!(a.capacity_sectors(), b.capacity_sectors());
    }

    #[test]
    fn the_four_trends_scale_their_parameters() {
        // Rates that double or halve in one year, for hand-checkable numbers.
        let r = ScaleRates {
            seek: 0.5,
            rpm: 1.0,
            bpi: 1.0,
            tpi: 1.0,
        };
        let out = scale_spec(SPEC, "d.toml", 1.0, &r).unwrap();
        let t: toml::Table = toml::from_str(&out).unwrap();
        let h = t["hdd"].as_table().unwrap();
        assert_eq!(h["rpm"].as_float(), Some(20000.0));
        assert_eq!(h["cylinders"].as_integer(), Some(71200));
        assert_eq!(h["outer_sectors_per_track"].as_integer(), Some(1336));
        assert_eq!(h["inner_sectors_per_track"].as_integer(), Some(680));
        assert_eq!(h["head_switch_ms"].as_float(), Some(0.25));
        assert_eq!(h["bus_mb_s"].as_float(), Some(640.0));
        let s = h["seek"].as_table().unwrap();
        assert_eq!(s["average_ms"].as_float(), Some(2.45));
        assert_eq!(s["boundary"].as_float(), Some(10000.0));
        // Capacity ×4 (twice the tracks, twice the sectors on each).
        let a = super::super::spec::build(&super::super::spec::parse_spec(SPEC, "a").unwrap()).unwrap();
        let b = super::super::spec::build(&super::super::spec::parse_spec(&out, "b").unwrap()).unwrap();
        let ratio = b.capacity_sectors() as f64 / a.capacity_sectors() as f64;
        assert!((ratio - 4.0).abs() < 0.01, "{ratio}");
    }

    #[test]
    fn tables_and_hpl_curves_stretch_the_distance_axis() {
        let mut t: toml::Table = toml::from_str("form = \"table\"\npoints = [[1, 2.0], [100, 10.0]]").unwrap();
        scale_seek(&mut t, 0.5, 2.0, "f", "k").unwrap();
        let p = t["points"].as_array().unwrap();
        assert_eq!(p[1].as_array().unwrap()[0].as_float(), Some(200.0));
        assert_eq!(p[1].as_array().unwrap()[1].as_float(), Some(5.0));
        let mut t: toml::Table =
            toml::from_str("form = \"hpl\"\nx0 = 100\na = 1.0\nb = 0.4\nc = 3.0\ne = 0.01").unwrap();
        scale_seek(&mut t, 0.5, 4.0, "f", "k").unwrap();
        // t'(4d) = t(d)/2: at d = 25 (√25 = 5), t = 1 + 0.4·5 = 3 → t'(100) = 1.5.
        let (a, b) = (t["a"].as_float().unwrap(), t["b"].as_float().unwrap());
        assert!((a + b * 10.0 - 1.5).abs() < 1e-9);
    }

    #[test]
    fn only_native_disks_scale() {
        let e = scale_spec("name = \"s\"\n[ssd]\ncapacity_gb = 1\nread_latency_us = 1\nwrite_latency_us = 1\nchannels = 1\nchannel_mb_s = 1\n", "s.toml", 1.0, &ScaleRates::default()).unwrap_err();
        assert!(e.to_string().contains("s.toml"), "{e}");
        assert!(scale_spec(SPEC, "d.toml", -1.0, &ScaleRates::default()).is_err());
    }
}
