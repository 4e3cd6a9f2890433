//! Executors run I/O plans: `count` (no time, tallies), later timed and real.

pub mod count;
