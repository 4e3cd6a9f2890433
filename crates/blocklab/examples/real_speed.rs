//! In-process speed of the real executor (no NBD): sequential 1 MiB writes
//! and reads over a RAID-5 of four 256 MiB members. Diagnostic.
use blocklab::array::ArrayConfig;
use blocklab::exec::real::{OpenConfig, RealArray};
use std::time::Instant;

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).unwrap_or("out/benchtmp/speed".into()));
    let direct = std::env::args().nth(2).as_deref() == Some("direct");
    let level = std::env::args().nth(3).unwrap_or("raid5".into());
    let _ = std::fs::remove_dir_all(&dir);
    let disks = if level == "raid6" { 5 } else { 4 };
    let cfg = ArrayConfig::from_names_sized(&level, disks, 65536, None, 4096, 256 << 20).unwrap();
    RealArray::create(&dir, cfg, false).unwrap();
    let a = RealArray::open(&dir, OpenConfig { direct, faults: None }).unwrap();
    let size = a.size_bytes();
    let buf = vec![7u8; 1 << 20];
    let t = Instant::now();
    let mut off = 0;
    while off + (1 << 20) <= size {
        a.write(off, &buf, false).unwrap();
        off += 1 << 20;
    }
    let w = t.elapsed().as_secs_f64();
    let mut rb = blocklab::exec::buf::AlignedBuf::zeroed(1 << 20);
    let t = Instant::now();
    let mut off = 0;
    while off + (1 << 20) <= size {
        a.read(off, &mut rb).unwrap();
        off += 1 << 20;
    }
    let r = t.elapsed().as_secs_f64();
    println!(
        "{level} direct={} write {:.0} MiB/s read {:.0} MiB/s",
        a.status().direct,
        size as f64 / w / 1048576.0,
        size as f64 / r / 1048576.0
    );
}
