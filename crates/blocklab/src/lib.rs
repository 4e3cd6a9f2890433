//! blocklab core: replay block I/O traces through a storage stack.
//!
//! Layers (see docs/ARCHITECTURE.md): `trace` (readers, Request stream),
//! `cache` (replacement policies behind one trait, counted simulation),
//! `analysis` (trace statistics, miss-ratio curves), `array` (RAID layouts and
//! I/O plans), `rebuild` (rebuild orders, without time), `exec` (the three
//! executors side by side: `exec::count`, `exec::timed` — the discrete-event
//! engine, trace replay, the rebuild paced in time — and `exec::real`),
//! `device` (disk and SSD models), `stack`
//! (host caches over an array or a device, from a stack file, in either executor),
//! `nbd` (the Network Block Device server that exports real arrays).

pub mod analysis;
pub mod array;
pub mod cache;
pub mod device;
pub mod dgraid;
pub mod error;
pub mod exec;
pub mod fsmodel;
pub mod nbd;
pub mod rebuild;
pub mod stack;
pub mod trace;

pub use error::{Error, Location, Result};
/// The timed executor under its old path: `crate::timed` is `exec::timed`.
pub use exec::timed;
