//! When the configured disks fail (`array.fail_at`): at the start, or when
//! the request stream reaches a time of the trace's own clock or a request
//! index. The trigger is the request stream, so a counted and a timed run
//! fail the disks before the same request.

use crate::error::{Error, Result};

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FailAt {
    Start,
    /// Before the first request whose trace time is >= this many seconds.
    Time(f64),
    /// Before this request (0-based, counted after `replay.reads_only`).
    Request(u64),
}

impl FailAt {
    /// `30`, `30s`, `2.5s` (seconds) or `1000req` (request index).
    pub fn parse(s: &str) -> Result<FailAt> {
        let t = s.trim();
        let bad = || {
            Error::config(format!(
                "bad fail-at `{s}`: expected seconds (`30`, `2.5s`) or a request index (`1000req`)"
            ))
        };
        if let Some(n) = t.strip_suffix("req") {
            return n.trim().parse::<u64>().map(FailAt::Request).map_err(|_| bad());
        }
        let n = t.strip_suffix('s').unwrap_or(t);
        match n.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(FailAt::Time(x)),
            _ => Err(bad()),
        }
    }

    /// Whether the failure is due before request `index` at trace time `time`.
    pub fn due(&self, index: u64, time: f64) -> bool {
        match *self {
            FailAt::Start => true,
            FailAt::Time(t) => time >= t,
            FailAt::Request(r) => index >= r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse() {
        assert_eq!(FailAt::parse("30").unwrap(), FailAt::Time(30.0));
        assert_eq!(FailAt::parse("2.5s").unwrap(), FailAt::Time(2.5));
        assert_eq!(FailAt::parse("100req").unwrap(), FailAt::Request(100));
        assert!(FailAt::parse("x").is_err());
        assert!(FailAt::parse("-1").is_err());
        assert!(FailAt::Request(3).due(3, 0.0) && !FailAt::Request(3).due(2, 9.0));
        assert!(FailAt::Time(1.5).due(0, 1.5) && !FailAt::Time(1.5).due(9, 1.4));
    }
}
