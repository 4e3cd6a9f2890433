//! The deterministic discrete-event core.
//!
//! Time is an integer count of nanoseconds (`Ns`). Device models speak
//! milliseconds in `f64`; every duration is rounded to the nanosecond once,
//! where it enters the engine, so that event order never depends on float
//! summation order (`a + b + c` vs `a + (b + c)`) and two runs of the same
//! inputs are bit-identical. A `u64` of nanoseconds spans 584 years.
//!
//! Events are kept in a binary heap ordered by `(time, sequence number)`: the
//! sequence number is assigned at scheduling, so simultaneous events fire in
//! the order they were scheduled (FIFO), never in heap-internal order.
//! Components (queues, devices, replayers) are plain state machines that
//! react to the events the driver pops; there is no async runtime.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Simulated time in nanoseconds.
pub type Ns = u64;

pub const NS_PER_MS: f64 = 1e6;

/// A duration in milliseconds (from a device model) as nanoseconds, rounded
/// to nearest; negative or NaN durations become 0.
#[inline]
pub fn ms_to_ns(ms: f64) -> Ns {
    if ms > 0.0 {
        (ms * NS_PER_MS).round() as Ns
    } else {
        0
    }
}

#[inline]
pub fn ns_to_ms(ns: Ns) -> f64 {
    ns as f64 / NS_PER_MS
}

/// Seconds (trace timestamps) as nanoseconds.
#[inline]
pub fn secs_to_ns(s: f64) -> Ns {
    if s > 0.0 {
        (s * 1e9).round() as Ns
    } else {
        0
    }
}

struct Entry<E> {
    time: Ns,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.time == o.time && self.seq == o.seq
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    // Reversed: BinaryHeap is a max-heap and we want the earliest event.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.time, o.seq).cmp(&(self.time, self.seq))
    }
}

/// The event queue and the clock.
pub struct Engine<E> {
    heap: BinaryHeap<Entry<E>>,
    now: Ns,
    seq: u64,
    processed: u64,
}

impl<E> Default for Engine<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> Engine<E> {
    pub fn new() -> Self {
        Engine {
            heap: BinaryHeap::new(),
            now: 0,
            seq: 0,
            processed: 0,
        }
    }

    /// The time of the event being handled (or last handled).
    #[inline]
    pub fn now(&self) -> Ns {
        self.now
    }

    /// Schedule `ev` at `time`; a time in the past fires now (an event can
    /// never move the clock backwards).
    #[inline]
    pub fn schedule(&mut self, time: Ns, ev: E) {
        let time = time.max(self.now);
        self.heap.push(Entry {
            time,
            seq: self.seq,
            ev,
        });
        self.seq += 1;
    }

    /// Schedule `ev` after `delay` from now.
    #[inline]
    pub fn after(&mut self, delay: Ns, ev: E) {
        self.schedule(self.now.saturating_add(delay), ev);
    }

    /// Pop the earliest event and advance the clock to it.
    #[inline]
    pub fn pop(&mut self) -> Option<(Ns, E)> {
        let e = self.heap.pop()?;
        self.now = e.time;
        self.processed += 1;
        Some((e.time, e.ev))
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub fn pending(&self) -> usize {
        self.heap.len()
    }

    /// Events handled so far (the engine's work, for events/second).
    pub fn processed(&self) -> u64 {
        self.processed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_then_fifo_order() {
        let mut e = Engine::new();
        e.schedule(10, 'a');
        e.schedule(5, 'b');
        e.schedule(10, 'c');
        e.schedule(5, 'd');
        let order: Vec<(Ns, char)> = std::iter::from_fn(|| e.pop()).collect();
        assert_eq!(order, vec![(5, 'b'), (5, 'd'), (10, 'a'), (10, 'c')]);
        assert_eq!(e.processed(), 4);
    }

    #[test]
    fn past_events_fire_now() {
        let mut e = Engine::new();
        e.schedule(100, 1);
        assert_eq!(e.pop(), Some((100, 1)));
        e.schedule(50, 2);
        assert_eq!(e.pop(), Some((100, 2)));
    }

    #[test]
    fn ms_rounding() {
        assert_eq!(ms_to_ns(1.0), 1_000_000);
        assert_eq!(ms_to_ns(0.0000004), 0);
        assert_eq!(ms_to_ns(0.0000006), 1);
        assert_eq!(ms_to_ns(-3.0), 0);
        assert_eq!(ms_to_ns(f64::NAN), 0);
        assert_eq!(secs_to_ns(1.5), 1_500_000_000);
    }
}
