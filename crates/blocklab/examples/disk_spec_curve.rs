//! Print a native spec's fitted seek curves (development aid for the docs).
use std::path::Path;

fn main() {
    for arg in std::env::args().skip(1) {
        let src = std::fs::read_to_string(&arg).expect("read spec");
        let spec = blocklab::device::spec::parse_spec(&src, &arg).expect("parse spec");
        let Some(h) = spec.hdd else { continue };
        let hdd = blocklab::device::spec::build_hdd(&spec.name, &h).expect("build");
        let p = hdd.params();
        println!("{}: read {:?}", Path::new(&arg).display(), p.read_seek);
        println!("  write {:?}", p.write_seek);
        let n = h.cylinders as u64;
        println!(
            "  mean random read seek {:.3} ms",
            blocklab::device::spec::mean_random_seek(&p.read_seek, n)
        );
        for d in [1u64, 10, 100, 1000, 5000, 10000, n - 1] {
            println!(
                "  d={d:6} read {:.3} write {:.3}",
                p.read_seek.time(d),
                p.write_seek.as_ref().map(|c| c.time(d)).unwrap_or(f64::NAN)
            );
        }
    }
}
