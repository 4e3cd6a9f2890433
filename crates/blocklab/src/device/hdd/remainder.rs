//! `f64::rem_euclid` by a whole number of sectors (or revolutions), bit for
//! bit, without the general `fmod`.
//!
//! Angles are reduced modulo the sectors per track (or 1 revolution) at every
//! LBN mapped and every rotational wait; the library `fmod` that
//! `rem_euclid` calls reduces bit by bit and was a seventh of a disk run's
//! time. For a divisor `y` that is a whole number and a dividend below 2^52,
//! `x - trunc(x / y) * y` is exact: the product is an integer below 2^53,
//! and the difference is a multiple of the dividend's last place no larger
//! than the dividend, so representable; a quotient rounded across an
//! integer is off by one at most and corrected by one exact add or subtract.
//! So the remainder equals `fmod`'s (which is exact by definition), and the
//! Euclidean step after it is the same floating-point operation as the
//! standard library's. Other arguments go to `rem_euclid` itself.

/// Dividends up to this take the fast path (2^52: every double below it
/// has a last place of at most 1/2).
const FAST_LIMIT: f64 = 4_503_599_627_370_496.0;

/// The exact remainder of `x / y` for `0 <= x < 2^52` and a whole `y`
/// in `1..2^32`, as `fmod` gives it.
#[inline]
fn fmod_whole(x: f64, y: f64) -> f64 {
    let q = (x / y).trunc();
    let r = x - q * y;
    if r < 0.0 {
        r + y
    } else if r >= y {
        r - y
    } else {
        r
    }
}

/// `x.rem_euclid(y)`, bit for bit.
#[inline]
pub(super) fn rem_euclid(x: f64, y: f64) -> f64 {
    let whole = y >= 1.0 && y < 4_294_967_296.0 && y.fract() == 0.0;
    if whole && x.abs() < FAST_LIMIT {
        // fmod takes the dividend's sign (-0.0 included); then the standard
        // library's step.
        let r = if x.is_sign_negative() {
            -fmod_whole(-x, y)
        } else {
            fmod_whole(x, y)
        };
        if r < 0.0 {
            r + y
        } else {
            r
        }
    } else {
        x.rem_euclid(y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(x: f64, y: f64) {
        let (ours, std) = (rem_euclid(x, y), x.rem_euclid(y));
        assert_eq!(
            ours.to_bits(),
            std.to_bits(),
            "rem_euclid({x:?}, {y:?}): {ours:?} against {std:?}"
        );
    }

    #[test]
    fn hand_worked_values() {
        assert_eq!(rem_euclid(7.5, 2.0), 1.5);
        assert_eq!(rem_euclid(-0.25, 1.0), 0.75);
        assert_eq!(rem_euclid(254.0 * 3.0, 254.0), 0.0);
        assert_eq!(rem_euclid(97.0 * 1000.0 + 133.0 * 83.0 + 5.0, 254.0), 94.0);
    }

    #[test]
    fn agrees_bit_for_bit_with_the_standard_library() {
        // Seeded xorshift: dividends of every magnitude the disk model uses
        // (angles of millions of sectors, times in revolutions), with
        // fractions, signs, exact multiples and their neighbours.
        let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let divisors = [
            1.0,
            2.0,
            3.0,
            7.0,
            64.0,
            96.0,
            245.0,
            254.0,
            255.0,
            1000.0,
            4_294_967_295.0,
        ];
        for _ in 0..200_000 {
            let y = divisors[(next() % divisors.len() as u64) as usize];
            let mag = 2f64.powi((next() % 60) as i32 - 6);
            let u = (next() >> 11) as f64 / (1u64 << 53) as f64;
            let x = if next() % 2 == 0 { u * mag } else { -u * mag };
            same(x, y);
            let k = (next() % 1_000_000) as f64 * y;
            for v in [k, k - 0.5, k + 0.5, f64::from_bits(k.to_bits().wrapping_sub(1)), -k] {
                same(v, y);
            }
        }
        for x in [
            0.0,
            -0.0,
            1e-300,
            -1e-300,
            FAST_LIMIT,
            -FAST_LIMIT,
            FAST_LIMIT * 4.0,
            f64::NAN,
            f64::INFINITY,
        ] {
            for y in [1.0, 254.0, 0.5, 1.5] {
                same(x, y);
            }
        }
    }
}
