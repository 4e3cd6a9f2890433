//! Executors run I/O plans: `count` (no time, tallies), `real` (member files
//! with real bytes); the timed executor lives in `timed`.

pub mod buf;
pub mod count;
pub mod real;
