//! Timed simulation: a deterministic discrete-event engine, device queues
//! with their schedulers, the executor that runs I/O plans in time, the
//! clock the trace-replay disciplines (open, closed, Hsu–Smith feedback;
//! `exec::discipline`) run over in simulated time, and the metrics of a run.

pub mod disk_run;
pub mod engine;
pub mod executor;
pub mod latency;
pub mod metrics;
pub mod queue;
pub mod rebuild;
pub mod replay;
pub mod sched;
pub mod synthio;

#[cfg(test)]
mod tests;

pub use executor::{ExecConfig, Step, TimedExecutor};
pub use metrics::Report;
pub use replay::{run, run_with_reference, Discipline, ReplayConfig, Source, Stack};
