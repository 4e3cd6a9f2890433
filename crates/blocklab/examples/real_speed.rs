//! In-process speed of the real executor (no NBD): sequential 1 MiB writes
//! and reads over a RAID-5 of four 256 MiB members. Diagnostic.
//! `cargo run --release -p blocklab --example real_speed -- DIR [direct] [raid5|raid6] [WRITE_BYTES]`
use blocklab::array::ArrayConfig;
use blocklab::exec::real::{OpenConfig, RealArray};
use std::time::Instant;

/// CPU seconds of this process so far (user + system).
fn cpu() -> (f64, f64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or("out/benchtmp/speed".into()));
    let direct = std::env::args().nth(2).as_deref() == Some("direct");
    let level = std::env::args().nth(3).unwrap_or("raid5".into());
    let _ = std::fs::remove_dir_all(&dir);
    let disks = if level == "raid6" { 5 } else { 4 };
    let cfg = ArrayConfig::from_names_sized(&level, disks, 65536, None, 4096, 256 << 20).unwrap();
    RealArray::create(&dir, cfg, false).unwrap();
    let a = RealArray::open(
        &dir,
        OpenConfig {
            direct,
            faults: None,
            ..Default::default()
        },
    )
    .unwrap();
    let size = a.size_bytes();
    let wbytes: usize = std::env::args().nth(4).map_or(1 << 20, |s| s.parse().unwrap());
    let buf = vec![7u8; wbytes];
    let (t, c) = (Instant::now(), cpu());
    let mut off = 0;
    while off + wbytes as u64 <= size {
        a.write(off, &buf, false).unwrap();
        off += wbytes as u64;
    }
    let w = t.elapsed().as_secs_f64();
    let c2 = cpu();
    let (wu, ws) = (c2.0 - c.0, c2.1 - c.1);
    let written = off;
    let mut rb = blocklab::exec::buf::AlignedBuf::zeroed(1 << 20);
    let t = Instant::now();
    let mut off = 0;
    while off + (1 << 20) <= size {
        a.read(off, &mut rb).unwrap();
        off += 1 << 20;
    }
    let r = t.elapsed().as_secs_f64();
    println!(
        "{level} direct={} write ({wbytes} B) {:.0} MiB/s (CPU s per GiB: {:.2} user, {:.2} system) read {:.0} MiB/s",
        a.status().direct,
        written as f64 / w / 1048576.0,
        wu / (written as f64 / 1073741824.0),
        ws / (written as f64 / 1073741824.0),
        size as f64 / r / 1048576.0
    );
}
