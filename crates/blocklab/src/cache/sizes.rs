//! Cache sizes as users write them: `100` (blocks), `64MiB` / `1GiB` (bytes,
//! turned into blocks of `block_size`), `5%` (a share of the trace's unique
//! blocks, which needs a counting pre-pass; see [`needs_unique`]).

use crate::error::{Error, Result};

/// One size as written, before it is resolved to blocks.
#[derive(Debug, Clone, PartialEq)]
pub enum SizeSpec {
    Blocks(u64),
    Bytes(u64),
    /// Percent of the unique blocks of the trace.
    Percent(f64),
}

fn bad(text: &str, why: &str) -> Error {
    Error::config(format!("bad cache size `{text}`: {why}"))
}

/// Parse one size. Binary units (`K`, `KiB`, `M`, `MiB`, `G`, `GiB`, `T`,
/// `TiB`) are powers of 1024; decimal ones (`KB`, `MB`, `GB`, `TB`) powers of
/// 1000; a bare `B` suffix is bytes. Case does not matter.
pub fn parse_size(text: &str) -> Result<SizeSpec> {
    let s = text.trim();
    if s.is_empty() {
        return Err(bad(text, "empty"));
    }
    if let Some(num) = s.strip_suffix('%') {
        let p: f64 = num
            .trim()
            .parse()
            .map_err(|_| bad(text, "expected a number before `%`"))?;
        if !p.is_finite() || p <= 0.0 || p > 100.0 {
            return Err(bad(text, "a percentage must be in (0, 100]"));
        }
        return Ok(SizeSpec::Percent(p));
    }
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = (&s[..split], s[split..].trim());
    if num.is_empty() {
        return Err(bad(text, "expected a number"));
    }
    if unit.is_empty() {
        let n: u64 = num
            .parse()
            .map_err(|_| bad(text, "a size in blocks must be a whole number"))?;
        if n == 0 {
            return Err(bad(text, "a cache needs at least one block"));
        }
        return Ok(SizeSpec::Blocks(n));
    }
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(bad(
                text,
                "unknown unit (use blocks, B, KiB, MiB, GiB, TiB, KB, MB, GB, TB or %)",
            ))
        }
    };
    let v: f64 = num.parse().map_err(|_| bad(text, "expected a number"))?;
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(bad(text, "too large"));
    }
    Ok(SizeSpec::Bytes(bytes.round() as u64))
}

/// Which accesses the footprint behind a `%` size counts: `cache` and `rgr`
/// count the distinct blocks of the stream they simulate, so with the same
/// `--reads-only` (and, for `rgr`, `--tenant-map key`) they agree.
pub fn footprint_of(reads_only: bool) -> &'static str {
    if reads_only {
        "reads only"
    } else {
        "reads and writes"
    }
}

/// Parse a comma-separated list of sizes.
pub fn parse_specs(list: &str) -> Result<Vec<SizeSpec>> {
    let specs: Vec<SizeSpec> = list.split(',').map(parse_size).collect::<Result<_>>()?;
    Ok(specs)
}

/// Whether resolving `list` needs the trace's unique-block count.
pub fn needs_unique(list: &str) -> bool {
    list.split(',').any(|s| s.trim().ends_with('%'))
}

/// Resolve one size to blocks. Bytes round down to whole blocks; percentages
/// of the unique blocks round down too (as libCacheSim does).
pub fn resolve(spec: &SizeSpec, text: &str, block_size: u64, unique_blocks: Option<u64>) -> Result<u64> {
    if block_size == 0 {
        return Err(Error::config("block size must be positive"));
    }
    match *spec {
        SizeSpec::Blocks(n) => Ok(n),
        SizeSpec::Bytes(b) => {
            let n = b / block_size;
            if n == 0 {
                return Err(bad(
                    text,
                    &format!("{b} bytes is less than one block of {block_size} bytes"),
                ));
            }
            Ok(n)
        }
        SizeSpec::Percent(p) => {
            let u = unique_blocks.ok_or_else(|| bad(text, "a percentage needs the trace's unique-block count"))?;
            let n = (u as f64 * p / 100.0).floor() as u64;
            if n == 0 {
                return Err(bad(text, &format!("{p}% of {u} unique blocks is less than one block")));
            }
            Ok(n)
        }
    }
}

/// Parse and resolve a comma-separated list of sizes to blocks, in order.
/// `unique_blocks` is needed only when a `%` size is present.
pub fn parse_sizes(list: &str, block_size: u64, unique_blocks: Option<u64>) -> Result<Vec<u64>> {
    list.split(',')
        .map(|text| resolve(&parse_size(text)?, text.trim(), block_size, unique_blocks))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_blocks_bytes_and_percent() {
        let v = parse_sizes("100, 64MiB,1GiB,5%,8k,1MB", 4096, Some(1000)).unwrap();
        assert_eq!(v, vec![100, 16384, 262144, 50, 2, 244]);
    }

    #[test]
    fn fractional_units_and_percent() {
        assert_eq!(parse_sizes("1.5MiB", 4096, None).unwrap(), vec![384]);
        assert_eq!(parse_sizes("0.5%", 4096, Some(1000)).unwrap(), vec![5]);
        assert_eq!(parse_sizes("100%", 512, Some(7)).unwrap(), vec![7]);
    }

    #[test]
    fn errors_name_the_bad_size() {
        for (s, needle) in [
            ("100,abc", "`abc`"),
            ("1KiB", "less than one block"),
            ("0", "at least one block"),
            ("5%", "unique"),
            ("10XB", "unknown unit"),
            ("150%", "(0, 100]"),
            ("1.5", "whole number"),
            ("", "empty"),
            ("-3", "expected a number"),
        ] {
            let unique = if s == "5%" { None } else { Some(10) };
            let e = parse_sizes(s, 4096, unique).unwrap_err().to_string();
            assert!(e.contains(needle), "{s}: {e}");
            assert!(e.contains("bad cache size"), "{s}: {e}");
        }
        let e = parse_sizes("1%", 4096, Some(10)).unwrap_err().to_string();
        assert!(e.contains("`1%`") && e.contains("less than one block"), "{e}");
    }

    #[test]
    fn needs_unique_only_for_percent() {
        assert!(needs_unique("1,5%"));
        assert!(!needs_unique("1,64MiB"));
    }
}
