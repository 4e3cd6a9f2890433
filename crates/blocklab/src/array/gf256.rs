//! GF(2^8) arithmetic and RAID-6 P+Q syndromes, as Linux MD's raid6 library.
//!
//! The field is GF(2)[x] / (x^8 + x^4 + x^3 + x^2 + 1), i.e. polynomial 0x11d,
//! with generator g = 2 ({02}). For data units D_z in syndrome slot z:
//! P = XOR of all D_z, Q = sum over z of g^z · D_z (MD's `gen_syndrome`,
//! Horner's rule from the highest slot down). Any two lost units of a
//! stripe row can be recovered: one data unit from P (XOR) or from Q
//! (`raid6_datap_recov`), two data units from P and Q (`raid6_2data_recov`),
//! and lost P/Q by recomputing them.

use crate::error::{Error, Result};

/// The field polynomial x^8 + x^4 + x^3 + x^2 + 1.
pub const POLY: u16 = 0x11d;

const fn build_tables() -> ([u8; 512], [u8; 256]) {
    let mut exp = [0u8; 512];
    let mut log = [0u8; 256];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 255 {
        exp[i] = x as u8;
        exp[i + 255] = x as u8;
        log[x as usize] = i as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    // exp[510], exp[511] unused; log[0] undefined (0 has no logarithm).
    (exp, log)
}

const TABLES: ([u8; 512], [u8; 256]) = build_tables();
static EXP: [u8; 512] = TABLES.0;
static LOG: [u8; 256] = TABLES.1;

/// a · b in GF(2^8).
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    if a == 0 || b == 0 {
        0
    } else {
        EXP[LOG[a as usize] as usize + LOG[b as usize] as usize]
    }
}

/// Multiplicative inverse; `inv(0)` is 0 by convention (never needed).
#[inline]
pub fn inv(a: u8) -> u8 {
    if a == 0 {
        0
    } else {
        EXP[255 - LOG[a as usize] as usize]
    }
}

/// a / b (b ≠ 0).
#[inline]
pub fn div(a: u8, b: u8) -> u8 {
    mul(a, inv(b))
}

/// g^i for the generator g = 2.
#[inline]
pub fn gpow(i: u32) -> u8 {
    EXP[(i % 255) as usize]
}

/// Multiply every byte of `src` by the constant `c` and XOR into `dst`.
pub fn mul_xor_into(dst: &mut [u8], src: &[u8], c: u8) {
    let table: [u8; 256] = std::array::from_fn(|v| mul(v as u8, c));
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= table[*s as usize];
    }
}

fn scale(buf: &mut [u8], c: u8) {
    let table: [u8; 256] = std::array::from_fn(|v| mul(v as u8, c));
    for b in buf.iter_mut() {
        *b = table[*b as usize];
    }
}

/// `dst ^= src`, byte by byte (eight bytes at a time).
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (dst, src) = (&mut dst[..n], &src[..n]);
    let mut dc = dst.chunks_exact_mut(8);
    let mut sc = src.chunks_exact(8);
    for (d, s) in (&mut dc).zip(&mut sc) {
        let v = u64::from_ne_bytes(d[..8].try_into().unwrap()) ^ u64::from_ne_bytes(s.try_into().unwrap());
        d.copy_from_slice(&v.to_ne_bytes());
    }
    for (d, s) in dc.into_remainder().iter_mut().zip(sc.remainder()) {
        *d ^= *s;
    }
}

/// `dst` = `a` ⊕ `b`: the first step of a parity in one pass (instead of a
/// copy, then an XOR).
pub fn xor_pair_into(dst: &mut [u8], a: &[u8], b: &[u8]) {
    let n = dst.len().min(a.len()).min(b.len());
    let (dst, a, b) = (&mut dst[..n], &a[..n], &b[..n]);
    let mut dc = dst.chunks_exact_mut(8);
    let (mut ac, mut bc) = (a.chunks_exact(8), b.chunks_exact(8));
    for ((d, x), y) in (&mut dc).zip(&mut ac).zip(&mut bc) {
        let v = u64::from_ne_bytes(x.try_into().unwrap()) ^ u64::from_ne_bytes(y.try_into().unwrap());
        d.copy_from_slice(&v.to_ne_bytes());
    }
    for ((d, x), y) in dc.into_remainder().iter_mut().zip(ac.remainder()).zip(bc.remainder()) {
        *d = x ^ y;
    }
}

/// Multiply every byte of `buf` by g = {02}, eight bytes at a time: shift
/// each byte left and reduce the bytes whose top bit fell out by 0x1d (the
/// low byte of the field polynomial), as MD's SIMD `gen_syndrome` does.
pub fn mul2_in_place(buf: &mut [u8]) {
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut chunks = buf.chunks_exact_mut(8);
    for c in &mut chunks {
        let w = u64::from_ne_bytes(c[..8].try_into().unwrap());
        let hi = w & HI;
        let v = ((w & !HI) << 1) ^ ((hi >> 7) * 0x1d);
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for b in chunks.into_remainder() {
        *b = mul(*b, 2);
    }
}

/// `q` = `q`·g ⊕ `src`, byte by byte: one Horner step in one pass over the
/// memory (where [`mul2_in_place`] then [`xor_into`] take two).
pub fn mul2_xor_into(q: &mut [u8], src: &[u8]) {
    const HI: u64 = 0x8080_8080_8080_8080;
    let n = q.len().min(src.len());
    let (q, src) = (&mut q[..n], &src[..n]);
    let mut qc = q.chunks_exact_mut(8);
    let mut sc = src.chunks_exact(8);
    for (d, s) in (&mut qc).zip(&mut sc) {
        let w = u64::from_ne_bytes(d[..8].try_into().unwrap());
        let hi = w & HI;
        let v = ((w & !HI) << 1) ^ ((hi >> 7) * 0x1d) ^ u64::from_ne_bytes(s.try_into().unwrap());
        d.copy_from_slice(&v.to_ne_bytes());
    }
    for (d, s) in qc.into_remainder().iter_mut().zip(sc.remainder()) {
        *d = mul(*d, 2) ^ *s;
    }
}

/// P and Q of `data` where `data[i]` sits in syndrome slot `slots[i]`:
/// Horner's rule from the highest slot down (Q = Q·g^gap ⊕ D), as MD.
pub fn syndrome(data: &[&[u8]], slots: &[u32], p: &mut [u8], q: &mut [u8]) {
    p.fill(0);
    q.fill(0);
    let mut order: Vec<usize> = (0..data.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(slots[i]));
    let mut prev: Option<u32> = None;
    for &i in &order {
        if let Some(ps) = prev {
            for _ in 0..ps - slots[i] {
                mul2_in_place(q);
            }
        }
        xor_into(p, data[i]);
        xor_into(q, data[i]);
        prev = Some(slots[i]);
    }
    for _ in 0..prev.unwrap_or(0) {
        mul2_in_place(q);
    }
}

/// Q alone of `data` (slot `slots[i]` for `data[i]`) into `q`: the same
/// bytes as [`syndrome`]'s Q, without a P buffer (RAID-6 parity written
/// straight into a member write buffer).
pub fn q_into(data: &[&[u8]], slots: &[u32], q: &mut [u8]) {
    let mut order: Vec<usize> = (0..data.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(slots[i]));
    let mut prev: Option<u32> = None;
    for &i in &order {
        match prev {
            None => q.copy_from_slice(data[i]),
            Some(ps) => {
                for _ in 1..ps - slots[i] {
                    mul2_in_place(q);
                }
                mul2_xor_into(q, data[i]);
            }
        }
        prev = Some(slots[i]);
    }
    if prev.is_none() {
        q.fill(0);
    }
    for _ in 0..prev.unwrap_or(0) {
        mul2_in_place(q);
    }
}

/// A unit of a P+Q stripe row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// The i-th entry of the data slice.
    Data(usize),
    P,
    Q,
}

/// Rebuild up to two `lost` units in place from the others. `data[i]` is in
/// Q slot `slots[i]`; the contents of lost buffers are ignored and overwritten.
pub fn recover(data: &mut [&mut [u8]], slots: &[u32], p: &mut [u8], q: &mut [u8], lost: &[Unit]) -> Result<()> {
    let len = p.len();
    if lost.len() > 2 || (lost.len() == 2 && lost[0] == lost[1]) {
        return Err(Error::config(format!(
            "P+Q recovers at most two distinct units, asked for {lost:?}"
        )));
    }
    if data.len() != slots.len() || data.iter().any(|d| d.len() != len) || q.len() != len {
        return Err(Error::config(
            "P+Q units must all have the same length, one slot per data unit",
        ));
    }
    if let Some(Unit::Data(i)) = lost.iter().find(|u| matches!(u, Unit::Data(i) if *i >= data.len())) {
        return Err(Error::config(format!("data unit {i} out of range")));
    }
    let lost_data: Vec<usize> = lost
        .iter()
        .filter_map(|u| if let Unit::Data(i) = u { Some(*i) } else { None })
        .collect();
    let p_lost = lost.contains(&Unit::P);
    let q_lost = lost.contains(&Unit::Q);

    // Sum (XOR) and Q-weighted sum of the surviving data units.
    let partial = |data: &[&mut [u8]]| {
        let mut px = vec![0u8; len];
        let mut qx = vec![0u8; len];
        for (i, d) in data.iter().enumerate() {
            if !lost_data.contains(&i) {
                xor_into(&mut px, d);
                mul_xor_into(&mut qx, d, gpow(slots[i]));
            }
        }
        (px, qx)
    };

    match lost_data.as_slice() {
        [] => {}
        [x] if !p_lost => {
            // D_x = P ^ (XOR of the others).
            let (px, _) = partial(data);
            data[*x].copy_from_slice(p);
            xor_into(data[*x], &px);
        }
        [x] => {
            // P lost too: D_x = (Q ^ Q_without_x) / g^slot(x).
            let (_, qx) = partial(data);
            data[*x].copy_from_slice(q);
            xor_into(data[*x], &qx);
            scale(data[*x], inv(gpow(slots[*x])));
        }
        [x, y] => {
            // a = D_x ^ D_y, b = g^sx D_x ^ g^sy D_y
            // => D_x = (b ^ g^sy a) / (g^sx ^ g^sy), D_y = a ^ D_x.
            let (px, qx) = partial(data);
            let (gx, gy) = (gpow(slots[*x]), gpow(slots[*y]));
            let denom_inv = inv(gx ^ gy);
            let cb = denom_inv; // coefficient of b
            let ca = mul(gy, denom_inv); // coefficient of a
            let mut dx = vec![0u8; len];
            let mut dy = vec![0u8; len];
            for i in 0..len {
                let a = p[i] ^ px[i];
                let b = q[i] ^ qx[i];
                dx[i] = mul(cb, b) ^ mul(ca, a);
                dy[i] = a ^ dx[i];
            }
            data[*x].copy_from_slice(&dx);
            data[*y].copy_from_slice(&dy);
        }
        _ => unreachable!("at most two lost units"),
    }
    if p_lost || q_lost {
        let views: Vec<&[u8]> = data.iter().map(|d| &**d).collect();
        let mut np = vec![0u8; len];
        let mut nq = vec![0u8; len];
        syndrome(&views, slots, &mut np, &mut nq);
        if p_lost {
            p.copy_from_slice(&np);
        }
        if q_lost {
            q.copy_from_slice(&nq);
        }
    }
    Ok(())
}

/// What a stripe row's P and Q say about its units (see [`locate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syndrome {
    /// P and Q match the data.
    Consistent,
    /// Exactly one unit is wrong and it is this one.
    Wrong(Unit),
    /// The mismatch cannot come from a single wrong unit.
    Unlocatable,
}

/// Find the single wrong unit of a RAID-6 row, as `raid6check` does: with
/// ΔP = P ⊕ ΣD and ΔQ = Q ⊕ Σ g^z·D, one wrong data unit in slot z with error e
/// gives ΔP = e and ΔQ = g^z·e at every byte, a wrong P gives ΔQ = 0 and a
/// wrong Q gives ΔP = 0. Every differing byte must point at the same unit.
pub fn locate(data: &[&[u8]], slots: &[u32], p: &[u8], q: &[u8]) -> Syndrome {
    let len = p.len();
    let mut dp = p.to_vec();
    let mut dq = q.to_vec();
    for (d, &z) in data.iter().zip(slots) {
        xor_into(&mut dp, d);
        mul_xor_into(&mut dq, d, gpow(z));
    }
    let mut found: Option<Unit> = None;
    for i in 0..len {
        let unit = match (dp[i], dq[i]) {
            (0, 0) => continue,
            (_, 0) => Unit::P,
            (0, _) => Unit::Q,
            (a, b) => {
                let z = LOG[div(b, a) as usize] as u32;
                match slots.iter().position(|&s| s % 255 == z) {
                    Some(idx) => Unit::Data(idx),
                    None => return Syndrome::Unlocatable,
                }
            }
        };
        match found {
            None => found = Some(unit),
            Some(u) if u == unit => {}
            Some(_) => return Syndrome::Unlocatable,
        }
    }
    found.map_or(Syndrome::Consistent, Syndrome::Wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng(seed: &mut u64) -> u64 {
        // splitmix64
        *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Carry-less multiply reduced by 0x11d, the textbook way.
    fn slow_mul(mut a: u8, mut b: u8) -> u8 {
        let mut r = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                r ^= a;
            }
            let carry = a & 0x80 != 0;
            a <<= 1;
            if carry {
                a ^= 0x1d;
            }
            b >>= 1;
        }
        r
    }

    #[test]
    fn field_axioms() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow_mul(a, b));
            }
            if a != 0 {
                assert_eq!(mul(a, inv(a)), 1);
            }
        }
        // Known values of MD's tables: g^8 = 0x1d, g^255 = 1, 2 has order 255.
        assert_eq!(gpow(8), 0x1d);
        assert_eq!(gpow(255), 1);
        assert_eq!((1..255).filter(|&i| gpow(i) == 1).count(), 0);
        assert_eq!(mul(0x80, 2), 0x1d);
    }

    #[test]
    fn xor_pair_is_a_copy_then_an_xor() {
        let mut seed = 5;
        for len in [0, 7, 8, 61, 64] {
            let a: Vec<u8> = (0..len).map(|_| rng(&mut seed) as u8).collect();
            let b: Vec<u8> = (0..len).map(|_| rng(&mut seed) as u8).collect();
            let mut want = a.clone();
            xor_into(&mut want, &b);
            let mut got = vec![0x5a; len];
            xor_pair_into(&mut got, &a, &b);
            assert_eq!(got, want, "len {len}");
            assert!(len == 0 || got.iter().zip(&a).any(|(g, x)| g != x), "b changed nothing");
        }
    }

    #[test]
    fn q_into_is_the_syndromes_q_for_any_slots() {
        // Reference: Q = Σ g^slot · D, byte by byte, with gpow and mul.
        let mut seed = 11;
        for slots in [vec![0u32, 1, 2], vec![2, 0, 3, 1], vec![4, 1], vec![3], vec![]] {
            // Lengths past a multiple of 8 take the byte-wise tails too.
            let len = 64 + slots.len();
            let data: Vec<Vec<u8>> = slots
                .iter()
                .map(|_| (0..len).map(|_| rng(&mut seed) as u8).collect())
                .collect();
            let views: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
            let (mut p, mut q) = (vec![0; len], vec![0; len]);
            syndrome(&views, &slots, &mut p, &mut q);
            let mut direct = vec![0xa5; len];
            q_into(&views, &slots, &mut direct);
            assert_eq!(direct, q, "slots {slots:?}");
            for i in 0..len {
                let want = views
                    .iter()
                    .zip(&slots)
                    .fold(0u8, |acc, (d, &s)| acc ^ mul(d[i], gpow(s)));
                assert_eq!(direct[i], want, "slots {slots:?} byte {i}");
            }
        }
    }

    #[test]
    fn syndrome_matches_horner() {
        // MD's gen_syndrome: wq = D_z0; for z down: wq = wq*2 ^ D_z.
        let mut seed = 7;
        let data: Vec<Vec<u8>> = (0..5)
            .map(|_| (0..16).map(|_| rng(&mut seed) as u8).collect())
            .collect();
        let views: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
        let slots: Vec<u32> = (0..5).collect();
        let (mut p, mut q) = (vec![0; 16], vec![0; 16]);
        syndrome(&views, &slots, &mut p, &mut q);
        for i in 0..16 {
            let mut wq = data[4][i];
            let mut wp = data[4][i];
            for z in (0..4).rev() {
                wq = mul(wq, 2) ^ data[z][i];
                wp ^= data[z][i];
            }
            assert_eq!((p[i], q[i]), (wp, wq));
        }
    }

    #[test]
    fn recover_any_one_or_two_units() {
        let mut seed = 42;
        for ndata in [2usize, 3, 5, 8] {
            // Non-trivial slot orders, as asymmetric and DDF layouts have.
            let slots: Vec<u32> = (0..ndata as u32).map(|i| (i * 3 + 1) % 251).collect();
            let len = 64;
            let data: Vec<Vec<u8>> = (0..ndata)
                .map(|_| (0..len).map(|_| rng(&mut seed) as u8).collect())
                .collect();
            let views: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
            let (mut p0, mut q0) = (vec![0; len], vec![0; len]);
            syndrome(&views, &slots, &mut p0, &mut q0);
            let mut units: Vec<Unit> = (0..ndata).map(Unit::Data).collect();
            units.push(Unit::P);
            units.push(Unit::Q);
            let mut cases: Vec<Vec<Unit>> = units.iter().map(|&u| vec![u]).collect();
            for i in 0..units.len() {
                for j in i + 1..units.len() {
                    cases.push(vec![units[i], units[j]]);
                }
            }
            for lost in cases {
                let mut d = data.clone();
                let (mut p, mut q) = (p0.clone(), q0.clone());
                for u in &lost {
                    match u {
                        Unit::Data(i) => d[*i].fill(0xAA),
                        Unit::P => p.fill(0x55),
                        Unit::Q => q.fill(0x55),
                    }
                }
                let mut refs: Vec<&mut [u8]> = d.iter_mut().map(|v| v.as_mut_slice()).collect();
                recover(&mut refs, &slots, &mut p, &mut q, &lost).unwrap();
                assert_eq!(d, data, "ndata {ndata} lost {lost:?}");
                assert_eq!((p, q), (p0.clone(), q0.clone()), "ndata {ndata} lost {lost:?}");
            }
        }
    }

    #[test]
    fn three_lost_is_an_error() {
        let mut a = vec![0u8; 4];
        let mut b = vec![0u8; 4];
        let (mut p, mut q) = (vec![0; 4], vec![0; 4]);
        let mut refs: Vec<&mut [u8]> = vec![&mut a, &mut b];
        assert!(recover(
            &mut refs,
            &[0, 1],
            &mut p,
            &mut q,
            &[Unit::Data(0), Unit::Data(1), Unit::P]
        )
        .is_err());
    }

    #[test]
    fn locate_finds_any_single_wrong_unit() {
        let mut seed = 9;
        for ndata in [2usize, 4, 7] {
            let slots: Vec<u32> = (0..ndata as u32).map(|i| (i * 5 + 2) % 250).collect();
            let len = 32;
            let data: Vec<Vec<u8>> = (0..ndata)
                .map(|_| (0..len).map(|_| rng(&mut seed) as u8).collect())
                .collect();
            let views: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
            let (mut p, mut q) = (vec![0; len], vec![0; len]);
            syndrome(&views, &slots, &mut p, &mut q);
            assert_eq!(locate(&views, &slots, &p, &q), Syndrome::Consistent);
            let mut units: Vec<Unit> = (0..ndata).map(Unit::Data).collect();
            units.push(Unit::P);
            units.push(Unit::Q);
            for &u in &units {
                let (mut d, mut p2, mut q2) = (data.clone(), p.clone(), q.clone());
                // Flip a few bytes (never to the same value) of one unit.
                let buf = match u {
                    Unit::Data(i) => &mut d[i],
                    Unit::P => &mut p2,
                    Unit::Q => &mut q2,
                };
                for j in [0, 5, len - 1] {
                    buf[j] ^= 1 + (rng(&mut seed) as u8 % 255);
                }
                let views: Vec<&[u8]> = d.iter().map(|x| x.as_slice()).collect();
                assert_eq!(
                    locate(&views, &slots, &p2, &q2),
                    Syndrome::Wrong(u),
                    "ndata {ndata} {u:?}"
                );
            }
            // Two wrong data units at the same byte cannot pass for one.
            let mut d = data.clone();
            d[0][3] ^= 0x11;
            d[1][3] ^= 0x22;
            d[1][4] ^= 0x33;
            let views: Vec<&[u8]> = d.iter().map(|x| x.as_slice()).collect();
            assert_eq!(locate(&views, &slots, &p, &q), Syndrome::Unlocatable);
        }
    }

    #[test]
    fn fast_syndrome_equals_the_definition_for_any_slots() {
        let mut seed = 3;
        for slots in [vec![0u32, 1, 2, 3], vec![4, 0, 9, 2, 7], vec![254, 1], vec![5]] {
            let len = 37; // not a multiple of 8: the byte tail too
            let data: Vec<Vec<u8>> = slots
                .iter()
                .map(|_| (0..len).map(|_| rng(&mut seed) as u8).collect())
                .collect();
            let views: Vec<&[u8]> = data.iter().map(|d| d.as_slice()).collect();
            let (mut p, mut q) = (vec![0; len], vec![0; len]);
            syndrome(&views, &slots, &mut p, &mut q);
            for j in 0..len {
                let (mut wp, mut wq) = (0u8, 0u8);
                for (d, &z) in data.iter().zip(&slots) {
                    wp ^= d[j];
                    wq ^= mul(gpow(z), d[j]);
                }
                assert_eq!((p[j], q[j]), (wp, wq), "slots {slots:?} byte {j}");
            }
        }
        let mut b: Vec<u8> = (0..=255u8).collect();
        mul2_in_place(&mut b);
        assert!(b.iter().enumerate().all(|(i, &x)| x == mul(i as u8, 2)));
    }
}
