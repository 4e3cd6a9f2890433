//! Print the validation table for every drive in ../shared (development aid).
fn main() {
    let dir = blocklab::device::validate::validation_dir().expect("../shared or $BLOCKLAB_SHARED");
    let only: Vec<String> = std::env::args().skip(1).collect();
    for (name, ds) in [
        ("atlas_III", 0.378),
        ("barracuda", 0.348),
        ("cheetah4LP", 0.318),
        ("cheetah9LP", 0.107),
        ("ibm18es", 0.136),
        ("atlas10k", 0.268),
        ("hp_c2247a", 0.090),
        ("hp_c3323a", 0.306),
        ("hp_c2490a", 0.254),
        ("dec_rz26", 0.340),
    ] {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        match blocklab::device::validate::validate(
            &dir.join(format!("{name}.parv")),
            &dir.join(format!("{name}.trace")),
        ) {
            Ok(v) => {
                if let Ok(d) = std::env::var("SIM_OUT") {
                    std::fs::write(
                        format!("{d}/{name}.sim"),
                        v.simulated_ms.iter().map(|x| format!("{x}\n")).collect::<String>(),
                    )
                    .unwrap();
                }
                println!(
                    "{name:12} ours {:7.3} ms ({:5.1}%)  disksim {ds:.3}  mean meas {:7.3} sim {:7.3} {}",
                    v.demerit_ms,
                    v.demerit_pct,
                    v.mean_measured_ms,
                    v.mean_simulated_ms,
                    if v.demerit_ms <= ds { "OK" } else { "MISS" }
                )
            }
            Err(e) => println!("{name:12} error: {e}"),
        }
    }
}
