//! The seek curve: arm travel time as a function of cylinder distance, in
//! the forms drive specifications and extraction tools give it, and the
//! reader for DiskSim's measured `.seek` tables.

use crate::error::{Error, Result};

/// Seek time (ms) as a function of cylinder distance.
#[derive(Debug, Clone, PartialEq)]
pub enum SeekCurve {
    /// Measured distance→time points, linearly interpolated (and
    /// extrapolated from the last two points beyond the table).
    Table(Vec<(f64, f64)>),
    /// Ruemmler & Wilkes (HP) form: `a + b·√d` below `x0` cylinders,
    /// `c + e·d` from there on; `first` overrides distances 1..=first.len().
    Hpl {
        x0: f64,
        a: f64,
        b: f64,
        c: f64,
        e: f64,
        first: Vec<f64>,
    },
    /// Three-point fit through (1, single), (⅓·max, average), (max, full):
    /// `t = single + p·√(d−1) + q·(d−1)`.
    ThreePoint { single: f64, p: f64, q: f64 },
    /// Hsu–Smith form: power law `a + b·d^c` below `boundary`, `e + f·d`
    /// from there on.
    PowerLinear {
        a: f64,
        b: f64,
        c: f64,
        boundary: f64,
        e: f64,
        f: f64,
    },
}

impl SeekCurve {
    /// Fit the three-point form: average seek taken at one third of the
    /// full stroke (the mean distance of uniformly random seeks).
    pub fn three_point(single: f64, average: f64, full: f64, cylinders: u64) -> SeekCurve {
        let dmax = (cylinders.max(3) - 1) as f64;
        let x1 = dmax / 3.0 - 1.0;
        let x2 = dmax - 1.0;
        // Solve  p·√x1 + q·x1 = avg − single ;  p·√x2 + q·x2 = full − single.
        let (r1, r2) = (average - single, full - single);
        let det = x1.sqrt() * x2 - x2.sqrt() * x1;
        let (p, q) = if det.abs() < 1e-12 {
            (0.0, r2 / x2.max(1.0))
        } else {
            ((r1 * x2 - r2 * x1) / det, (x1.sqrt() * r2 - x2.sqrt() * r1) / det)
        };
        SeekCurve::ThreePoint { single, p, q }
    }

    pub fn time(&self, d: u64) -> f64 {
        if d == 0 {
            return 0.0;
        }
        let x = d as f64;
        match self {
            SeekCurve::Table(pts) => interpolate(pts, x),
            SeekCurve::Hpl { x0, a, b, c, e, first } => {
                if (d as usize) <= first.len() {
                    first[d as usize - 1]
                } else if x < *x0 {
                    a + b * x.sqrt()
                } else {
                    c + e * x
                }
            }
            SeekCurve::ThreePoint { single, p, q } => single + p * (x - 1.0).sqrt() + q * (x - 1.0),
            SeekCurve::PowerLinear {
                a,
                b,
                c,
                boundary,
                e,
                f,
            } => {
                if x < *boundary {
                    a + b * x.powf(*c)
                } else {
                    e + f * x
                }
            }
        }
    }
}

fn interpolate(pts: &[(f64, f64)], x: f64) -> f64 {
    match pts.len() {
        0 => 0.0,
        1 => pts[0].1,
        n => {
            // First segment whose right end is >= x (extrapolate at the ends).
            let i = pts.partition_point(|p| p.0 < x).clamp(1, n - 1);
            let (x0, y0) = pts[i - 1];
            let (x1, y1) = pts[i];
            if x1 == x0 {
                y1
            } else {
                y0 + (y1 - y0) * (x - x0) / (x1 - x0)
            }
        }
    }
}

/// Read a DiskSim `.seek` file: `Seek distances measured: N` then `d, ms`.
pub fn parse_seek_file(path: &std::path::Path) -> Result<Vec<(f64, f64)>> {
    let shown = path.display().to_string();
    let src = std::fs::read_to_string(path).map_err(|e| Error::io(&shown, e))?;
    parse_seek_table(&src, &shown)
}

pub fn parse_seek_table(src: &str, file: &str) -> Result<Vec<(f64, f64)>> {
    use crate::error::Location;
    let mut pts = Vec::new();
    let mut declared = None;
    for (i, line) in src.lines().enumerate() {
        let ln = Location::Line(i as u64 + 1);
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(rest) = t.strip_prefix("Seek distances measured:") {
            declared = Some(
                rest.trim()
                    .parse::<usize>()
                    .map_err(|_| Error::parse(file, ln, "Seek distances measured", "expected a count"))?,
            );
            continue;
        }
        let mut it = t
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|s| !s.is_empty());
        let d = it.next().and_then(|s| s.parse::<f64>().ok());
        let ms = it.next().and_then(|s| s.parse::<f64>().ok());
        match (d, ms) {
            (Some(d), Some(ms)) if d >= 0.0 && ms >= 0.0 && d.is_finite() && ms.is_finite() => {
                if pts.last().is_some_and(|&(pd, _)| pd >= d) {
                    return Err(Error::parse(file, ln, "distance", "distances must increase"));
                }
                pts.push((d, ms));
            }
            (None, _) => {
                return Err(Error::parse(
                    file,
                    ln,
                    "distance",
                    format!("expected `distance, ms`, got `{t}`"),
                ))
            }
            _ => {
                return Err(Error::parse(
                    file,
                    ln,
                    "time",
                    format!("expected `distance, ms`, got `{t}`"),
                ))
            }
        }
    }
    if let Some(n) = declared {
        if n != pts.len() {
            return Err(Error::parse(
                file,
                crate::error::Location::Whole,
                "Seek distances measured",
                format!("declares {n} points, file has {}", pts.len()),
            ));
        }
    }
    if pts.is_empty() {
        return Err(Error::parse(
            file,
            crate::error::Location::Whole,
            "distance",
            "no seek points",
        ));
    }
    Ok(pts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seek_table_interpolates_between_points() {
        let c = SeekCurve::Table(vec![(1.0, 1.0), (10.0, 2.8), (100.0, 5.0)]);
        assert_eq!(c.time(0), 0.0);
        assert!((c.time(1) - 1.0).abs() < 1e-12);
        // 5.5 is halfway between 1 and 10: 1.0 + 0.2·4.5 = 1.9.
        assert!((c.time(5) - (1.0 + 0.2 * 4.0)).abs() < 1e-12);
        assert!((c.time(55) - (2.8 + 2.2 * 45.0 / 90.0)).abs() < 1e-12);
        // Beyond the table: the last segment extended.
        assert!((c.time(190) - (5.0 + 2.2 * 90.0 / 90.0)).abs() < 1e-12);
    }

    #[test]
    fn hpl_equation_at_hand_computed_points() {
        // HP C2247A: x0 = 300, a = 3.81, b = 0.33, c = 7.75, e = 0.0059.
        let c = SeekCurve::Hpl {
            x0: 300.0,
            a: 3.81,
            b: 0.33,
            c: 7.75,
            e: 0.0059,
            first: vec![2.89, 3.68],
        };
        assert_eq!(c.time(1), 2.89);
        assert_eq!(c.time(2), 3.68);
        assert!((c.time(100) - (3.81 + 0.33 * 10.0)).abs() < 1e-12); // 7.11
        assert!((c.time(1000) - (7.75 + 5.9)).abs() < 1e-12); // 13.65
    }

    #[test]
    fn three_point_passes_through_its_points() {
        let c = SeekCurve::three_point(0.8, 4.9, 10.5, 3001);
        assert!((c.time(1) - 0.8).abs() < 1e-9);
        assert!((c.time(1000) - 4.9).abs() < 1e-9);
        assert!((c.time(3000) - 10.5).abs() < 1e-9);
    }

    #[test]
    fn power_linear_form() {
        let c = SeekCurve::PowerLinear {
            a: 0.5,
            b: 0.1,
            c: 0.5,
            boundary: 5000.0,
            e: 5.0,
            f: 0.001,
        };
        assert!((c.time(400) - (0.5 + 0.1 * 20.0)).abs() < 1e-12);
        assert!((c.time(6000) - 11.0).abs() < 1e-12);
    }

    #[test]
    fn seek_file_errors_name_the_line() {
        match parse_seek_table("Seek distances measured: 2\n1, 0.8\n2 x\n", "a.seek") {
            Err(Error::Parse { location, field, .. }) => {
                assert_eq!(location, crate::error::Location::Line(3));
                assert_eq!(field, "time");
            }
            other => panic!("{other:?}"),
        }
        assert!(parse_seek_table("Seek distances measured: 3\n1, 0.8\n2, 1\n", "a.seek").is_err());
        assert_eq!(
            parse_seek_table("Seek distances measured: 2\n1,\t0.8\n2,\t1\n", "a").unwrap(),
            vec![(1.0, 0.8), (2.0, 1.0)]
        );
    }
}
