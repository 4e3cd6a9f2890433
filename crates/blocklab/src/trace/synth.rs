//! Seeded synthetic traces: Zipf-distributed block keys, and a writer of
//! libCacheSim oracleGeneral files (for benchmarks against libCacheSim).

use crate::cache::sim::next_uses_in_place;
use crate::cache::NEVER;
use crate::error::{Error, Result};
use std::io::Write;
use std::path::Path;

/// splitmix64: a small, fast, seedable generator (deterministic everywhere).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Zipf(alpha) over ranks 0..n: P(rank k) ∝ 1/(k+1)^alpha. Sampling inverts a
/// precomputed CDF by binary search (8 bytes per rank); alpha = 1 is fine.
#[derive(Debug, Clone)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: u64, alpha: f64) -> Result<Self> {
        if n == 0 {
            return Err(Error::config("Zipf universe must hold at least one block"));
        }
        if !alpha.is_finite() || alpha < 0.0 {
            return Err(Error::config(format!(
                "Zipf alpha must be finite and >= 0, got {alpha}"
            )));
        }
        let mut cdf = Vec::with_capacity(n as usize);
        let mut s = 0.0;
        for k in 0..n {
            s += ((k + 1) as f64).powf(-alpha);
            cdf.push(s);
        }
        for c in &mut cdf {
            *c /= s;
        }
        Ok(Zipf { cdf })
    }

    #[inline]
    pub fn sample(&self, rng: &mut SplitMix64) -> u64 {
        let u = rng.next_f64();
        (self.cdf.partition_point(|&c| c <= u) as u64).min(self.cdf.len() as u64 - 1)
    }
}

/// `accesses` keys drawn from Zipf(alpha) over `universe` blocks; block ids
/// are ranks + 1 (rank 0, the hottest, is block 1).
pub fn zipf_keys(accesses: u64, universe: u64, alpha: f64, seed: u64) -> Result<Vec<u64>> {
    Ok(zipf_iter(accesses, universe, alpha, seed)?.collect())
}

/// The keys of [`zipf_keys`] one at a time: memory is the CDF (8 bytes per
/// block of the universe), not the trace.
pub fn zipf_iter(accesses: u64, universe: u64, alpha: f64, seed: u64) -> Result<impl Iterator<Item = u64>> {
    let z = Zipf::new(universe, alpha)?;
    let mut rng = SplitMix64::new(seed);
    Ok((0..accesses).map(move |_| z.sample(&mut rng) + 1))
}

/// Write `keys` as a libCacheSim oracleGeneral file (see [`super::oracle`]):
/// time is the access index (one access per second); next_access_vtime is
/// the 1-based index of the next access to the same object, or -1 (the
/// convention of [`super::convert`]). libCacheSim skips objects of size 0, so
/// `obj_size` must be positive (1 to count objects, or the block size).
pub fn write_oracle(path: &Path, keys: &[u64], obj_size: u32) -> Result<()> {
    if obj_size == 0 {
        return Err(Error::config("oracleGeneral obj_size must be positive"));
    }
    let name = path.display().to_string();
    let mut next = keys.to_vec();
    next_uses_in_place(&mut next);
    let file = std::fs::File::create(path).map_err(|e| Error::io(&name, e))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    for (i, (&k, &n)) in keys.iter().zip(&next).enumerate() {
        let na: i64 = if n == NEVER { -1 } else { n as i64 + 1 };
        super::oracle::write_record(&mut w, i as u32, k, obj_size, na).map_err(|e| Error::io(&name, e))?;
    }
    w.flush().map_err(|e| Error::io(&name, e))?;
    Ok(())
}

/// Write `keys` as blocklab's native CSV: each key one access of `block_size`
/// bytes at key·block_size, a write when the key is a multiple of 4 (so that
/// read/write mixes and `--reads-only` have something to act on), else a read.
pub fn write_native_csv(path: &Path, keys: &[u64], block_size: u64) -> Result<()> {
    write_native_csv_keys(path, keys.iter().copied(), block_size)
}

/// [`write_native_csv`] of keys as they come; `path` `-` is standard output
/// (a trace piped into a reader without being stored).
pub fn write_native_csv_keys(path: &Path, keys: impl Iterator<Item = u64>, block_size: u64) -> Result<()> {
    let to_stdout = path.as_os_str() == "-";
    let name = if to_stdout {
        "standard output".to_string()
    } else {
        path.display().to_string()
    };
    let sink: Box<dyn Write> = if to_stdout {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(std::fs::File::create(path).map_err(|e| Error::io(&name, e))?)
    };
    let mut w = std::io::BufWriter::with_capacity(1 << 20, sink);
    let out = || -> std::io::Result<()> {
        writeln!(w, "{}", super::native_csv::HEADER)?;
        for (i, k) in keys.enumerate() {
            let op = if k % 4 == 0 { 'W' } else { 'R' };
            writeln!(w, "{:.6},{op},{},{block_size},0", i as f64 * 1e-3, k * block_size)?;
        }
        w.flush()
    };
    out().map_err(|e| Error::io(&name, e))
}

/// Generate a Zipf trace and write it as native CSV as it is drawn (to `-`,
/// standard output, too): memory does not grow with `accesses`.
pub fn write_zipf_csv(path: &Path, accesses: u64, universe: u64, alpha: f64, seed: u64, block_size: u64) -> Result<()> {
    write_native_csv_keys(path, zipf_iter(accesses, universe, alpha, seed)?, block_size)
}

/// Generate a Zipf trace and write it as oracleGeneral.
pub fn write_zipf_oracle(
    path: &Path,
    accesses: u64,
    universe: u64,
    alpha: f64,
    seed: u64,
    obj_size: u32,
) -> Result<()> {
    let keys = zipf_keys(accesses, universe, alpha, seed)?;
    write_oracle(path, &keys, obj_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let a = zipf_keys(10_000, 100, 1.0, 7).unwrap();
        let b = zipf_keys(10_000, 100, 1.0, 7).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, zipf_keys(10_000, 100, 1.0, 8).unwrap());
        assert!(a.iter().all(|&k| (1..=100).contains(&k)));
    }

    #[test]
    fn zipf_frequencies_follow_the_law() {
        // With alpha = 1 over 10 ranks, P(rank 0) = 1/H_10 ≈ 0.3414, P(rank 1) half of it.
        let keys = zipf_keys(200_000, 10, 1.0, 1).unwrap();
        let f = |b: u64| keys.iter().filter(|&&k| k == b).count() as f64 / keys.len() as f64;
        let h10: f64 = (1..=10).map(|k| 1.0 / k as f64).sum();
        assert!((f(1) - 1.0 / h10).abs() < 0.005, "{}", f(1));
        assert!((f(2) - 0.5 / h10).abs() < 0.005, "{}", f(2));
        assert!((f(10) - 0.1 / h10).abs() < 0.003, "{}", f(10));
        // alpha = 0 is uniform.
        let u = zipf_keys(100_000, 4, 0.0, 3).unwrap();
        let share = u.iter().filter(|&&k| k == 4).count() as f64 / u.len() as f64;
        assert!((share - 0.25).abs() < 0.01);
    }

    #[test]
    fn oracle_records_by_hand() {
        let dir = std::env::temp_dir().join(format!("blocklab-synth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("t.oracleGeneral");
        write_oracle(&p, &[5, 6, 5], 1).unwrap();
        let b = std::fs::read(&p).unwrap();
        assert_eq!(b.len(), 72);
        let rec = |i: usize| {
            let r = &b[i * 24..(i + 1) * 24];
            (
                u32::from_le_bytes(r[0..4].try_into().unwrap()),
                u64::from_le_bytes(r[4..12].try_into().unwrap()),
                u32::from_le_bytes(r[12..16].try_into().unwrap()),
                i64::from_le_bytes(r[16..24].try_into().unwrap()),
            )
        };
        assert_eq!(rec(0), (0, 5, 1, 3));
        assert_eq!(rec(1), (1, 6, 1, -1));
        assert_eq!(rec(2), (2, 5, 1, -1));
        assert!(write_oracle(&p, &[1], 0).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
