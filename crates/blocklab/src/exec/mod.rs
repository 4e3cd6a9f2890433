//! The three executors of one stack, side by side: `count` (no time,
//! tallies), `timed` (simulated time: the discrete-event engine), `real`
//! (member files with real bytes). `discipline`: the
//! replay disciplines both the timed and the real executor run, over a clock
//! each of them implements.

pub mod buf;
pub mod count;
pub mod discipline;
pub mod real;
pub mod timed;
