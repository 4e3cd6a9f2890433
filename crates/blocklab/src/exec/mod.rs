//! Executors run I/O plans: `count` (no time, tallies), `real` (member files
//! with real bytes); the timed executor lives in `timed`. `discipline`: the
//! replay disciplines both the timed and the real executor run, over a clock
//! each of them implements.

pub mod buf;
pub mod count;
pub mod discipline;
pub mod real;
