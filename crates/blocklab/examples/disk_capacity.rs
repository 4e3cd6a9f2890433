//! Print each validated drive's modelled capacity (development aid).
use blocklab::device::DeviceModel;

fn main() {
    let dir = blocklab::device::validate::validation_dir().expect("../shared or $BLOCKLAB_SHARED");
    for name in [
        "atlas_III",
        "barracuda",
        "cheetah4LP",
        "cheetah9LP",
        "ibm18es",
        "atlas10k",
        "hp_c2247a",
        "hp_c3323a",
        "hp_c2490a",
        "dec_rz26",
    ] {
        let d = blocklab::device::disksim_load::load_parv(&dir.join(format!("{name}.parv"))).unwrap();
        println!("{name:12} {}", d.capacity_sectors());
    }
}
