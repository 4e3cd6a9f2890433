//! The on-disk buffer: a few segments of consecutive LBNs, replaced least
//! recently used, filled by reads and read-ahead and (with immediate report)
//! by writes destaged afterwards. Read-ahead runs in the background and is
//! advanced lazily to each request's arrival, so its state is just where it
//! has got to.

use super::{c_over, Hdd};

/// How the on-disk buffer behaves (DiskSim's cache parameters).
#[derive(Debug, Clone, PartialEq)]
pub struct CacheParams {
    pub enabled: bool,
    pub segments: u32,
    pub segment_sectors: u64,
    pub max_readahead: u64,
    /// Read-ahead counts beyond the request (else: fill the segment).
    pub readahead_over_requested: bool,
    /// Report writes once the data is in the buffer; destage later.
    pub write_back: bool,
    pub read_hits_on_write_data: bool,
    pub separate_write_segment: bool,
    /// Read sectors passing under the head during rotational latency.
    pub read_any_free: bool,
    /// Read hits free the buffer space of the data they return.
    pub consume_on_hit: bool,
    /// DiskSim "Buffer continuous read": 0 none, 1 to the end of the track,
    /// 2 to the end of the cylinder, 3 until the segment is full, 4 to the
    /// end of the following track when a sequential stream is detected
    /// (else to the end of the current track).
    pub prefetch_mode: u8,
    /// Fraction of a read request that must be in the buffer before the
    /// bus transfer starts (the "high water mark", by request size).
    pub read_water: f64,
    /// Reconnection overhead before a read's data transfer after a miss.
    pub reselect_ms: f64,
    /// A read whose first block is being read ahead counts as a hit.
    pub almost_read_hits: bool,
    /// Start read-ahead again after a full hit on an idle drive.
    pub readahead_on_idle_hit: bool,
    /// "Fast write level" 1: only appending writes are write hits.
    pub write_back_sequential_only: bool,
    /// The drive holds the bus for a whole write transfer.
    pub hold_bus_write: bool,
    /// "Data preparation overhead" before a write-through write's data phase.
    pub write_data_prep_ms: f64,
}

impl CacheParams {
    /// No buffer cache: every request goes to the media. The other switches
    /// hold the defaults of a simple spec-file drive (read-ahead until the
    /// segment is full, almost-read hits), so a cache that differs is written
    /// `CacheParams { enabled: true, .., ..CacheParams::off() }`.
    pub fn off() -> Self {
        CacheParams {
            enabled: false,
            segments: 0,
            segment_sectors: 0,
            max_readahead: 0,
            readahead_over_requested: true,
            write_back: false,
            read_hits_on_write_data: false,
            separate_write_segment: false,
            read_any_free: false,
            consume_on_hit: false,
            prefetch_mode: 3,
            read_water: 0.0,
            reselect_ms: 0.0,
            write_back_sequential_only: false,
            almost_read_hits: true,
            readahead_on_idle_hit: false,
            hold_bus_write: false,
            write_data_prep_ms: 0.0,
        }
    }
}

/// One buffer segment: LBNs `start..end`; `stamp` orders use (LRU).
#[derive(Debug, Clone, Copy)]
pub(super) struct Seg {
    start: u64,
    end: u64,
    stamp: u64,
    valid: bool,
}

impl Seg {
    pub(super) const EMPTY: Seg = Seg {
        start: 0,
        end: 0,
        stamp: 0,
        valid: false,
    };
}

/// Read-ahead in progress: the mechanism keeps reading `next..limit` into
/// segment `seg`; `t` is when it finished the previous sector.
#[derive(Debug, Clone, Copy)]
pub(super) struct Prefetch {
    seg: usize,
    next: u64,
    limit: u64,
    t: f64,
}

impl Hdd {
    /// Advance read-ahead up to time `until`; returns the time at which the
    /// mechanism can leave (end of the sector in progress at `until`).
    pub(super) fn advance_prefetch(&mut self, until: f64) -> f64 {
        let Some(mut pf) = self.prefetch else {
            return self.mech_free;
        };
        let mut leave = pf.t;
        let cap = self.p.layout.capacity();
        // Track by track: a run of consecutive sectors costs one access.
        while pf.next < pf.limit && pf.next < cap {
            let saved = self.head;
            let (ph, run) = self.p.layout.run(pf.next, pf.limit.min(cap) - pf.next);
            let (start, _) = self.access(pf.t, &ph, false);
            if start > until {
                self.head = saved;
                leave = until.max(pf.t);
                break;
            }
            let st = self.period / ph.spt as f64;
            // Sectors started by `until` are read (a sector in progress
            // completes).
            let started = (((until - start) / st).floor() as u64).saturating_add(1);
            let k = run.min(started);
            self.head_wrote = false;
            let end = start + k as f64 * st;
            pf.t = end;
            pf.next += k;
            leave = end;
            let seg = &mut self.segs[pf.seg];
            seg.end = pf.next;
            if seg.end - seg.start > self.p.cache.segment_sectors {
                seg.start = seg.end - self.p.cache.segment_sectors;
            }
            if k < run || end > until {
                break;
            }
        }
        if pf.next >= pf.limit || pf.next >= cap {
            leave = pf.t;
        }
        self.mech_free = self.mech_free.max(pf.t);
        self.prefetch = Some(pf);
        leave
    }

    /// Stop read-ahead at `at` (the sector in progress completes).
    pub(super) fn stop_prefetch(&mut self, at: f64) {
        if self.prefetch.is_some() {
            let leave = self.advance_prefetch(at);
            self.mech_free = self.mech_free.max(leave);
            self.prefetch = None;
        }
    }

    fn touch(&mut self, i: usize) {
        self.clock += 1;
        self.segs[i].stamp = self.clock;
    }

    /// Least recently used read segment (segment 0 is reserved for writes
    /// when the drive has a separate write segment).
    fn victim(&self, for_write: bool) -> usize {
        let reserve = self.p.cache.separate_write_segment && self.segs.len() > 1;
        if reserve && for_write {
            return 0;
        }
        let lo = if reserve { 1 } else { 0 };
        (lo..self.segs.len())
            .min_by_key(|&i| (self.segs[i].valid, self.segs[i].stamp))
            .unwrap_or(0)
    }

    /// Data handed to the host on a hit frees its buffer space: the
    /// segment then starts after it (the drives re-read such data from the
    /// media, as the validation traces show).
    fn consume(&mut self, i: usize, upto: u64) {
        if self.p.cache.consume_on_hit {
            let s = &mut self.segs[i];
            s.start = s.start.max(upto).min(s.end);
        }
    }

    /// The segment holding all of `lbn..lbn+n`.
    pub(super) fn find(&self, lbn: u64, n: u64) -> Option<usize> {
        self.segs
            .iter()
            .position(|s| s.valid && s.start <= lbn && lbn + n <= s.end)
    }

    fn invalidate_overlap(&mut self, lbn: u64, n: u64, keep: Option<usize>) {
        for (i, s) in self.segs.iter_mut().enumerate() {
            if Some(i) != keep && s.valid && s.start < lbn + n && lbn < s.end {
                s.valid = false;
            }
        }
    }

    /// The read-ahead in progress, when the data of `lbn..lbn+n` is cached
    /// or on its way into the segment it fills.
    pub(super) fn read_ahead_stream(&self, lbn: u64, n: u64) -> Option<Prefetch> {
        let c = &self.p.cache;
        self.prefetch.filter(|pf| {
            let s = &self.segs[pf.seg];
            // Without "almost read hits", a request whose first block is
            // still being read ahead is not a hit.
            let almost = lbn == pf.next && pf.next < pf.limit;
            s.valid
                && s.start <= lbn
                && lbn <= pf.next
                && lbn + n <= pf.next.max(pf.limit) + c.max_readahead
                && (c.almost_read_hits || !almost)
        })
    }

    /// A full hit on segment `i`: the data crosses the bus from the buffer.
    pub(super) fn read_hit(&mut self, now: f64, i: usize, lbn: u64, n: u64) -> f64 {
        let ow = self.last_write as usize;
        let c = self.p.cache.clone();
        let bus = self.p.bus_read_ms;
        self.touch(i);
        self.last_hit = true;
        self.consume(i, lbn + n);
        let oh = c_over(&self.p.overheads.read_hit, ow);
        // "Read-ahead on idle hit": an idle drive reads ahead again
        // after a full hit.
        let idle = self.prefetch.is_none_or(|pf| pf.next >= pf.limit);
        if c.readahead_on_idle_hit && idle {
            let seg = self.segs[i];
            let limit = self.prefetch_limit(lbn, n, seg.start.max(lbn));
            if limit > seg.end && seg.end >= lbn + n {
                let t = (now + oh).max(self.mech_free);
                self.prefetch = Some(Prefetch {
                    seg: i,
                    next: seg.end,
                    limit,
                    t,
                });
            }
        }
        self.prev_read_end = Some(lbn + n);
        oh + n as f64 * bus + self.p.overheads.read_complete
    }

    /// A read served by read-ahead `pf`, waiting for sectors still to come.
    pub(super) fn read_from_stream(&mut self, now: f64, mut pf: Prefetch, lbn: u64, n: u64) -> f64 {
        let ow = self.last_write as usize;
        let c = self.p.cache.clone();
        let bus = self.p.bus_read_ms;
        // The data is cached or being read ahead: wait for it and keep
        // reading. If read-ahead had already stopped short of the
        // request, the rest is a partial hit: a miss overhead, and the
        // mechanism restarts from now.
        let stopped = pf.next >= pf.limit && lbn + n > pf.next;
        self.last_hit = !stopped;
        let oh = if stopped {
            c_over(&self.p.overheads.read_miss, ow)
        } else {
            c_over(&self.p.overheads.read_hit, ow)
        };
        if stopped {
            pf.t = pf.t.max(now + oh).max(self.mech_free);
        }
        // Read-ahead may push out data before this request (kept when
        // hits do not consume), never the request's own.
        let seg_start = self.segs[pf.seg].start.max(lbn);
        pf.limit = pf.limit.max(self.prefetch_limit(lbn, n, seg_start));
        self.prefetch = Some(pf);
        self.touch(pf.seg);
        // Advance until the request's last sector is in.
        let mut bus_t = now + oh;
        let mut i = lbn;
        while i < lbn + n {
            let pf = self.prefetch.expect("stream");
            if i < pf.next {
                bus_t += bus;
                i += 1;
                continue;
            }
            let ph = self.p.layout.map(pf.next);
            let (_, end) = self.access(pf.t, &ph, false);
            self.head_wrote = false;
            let mut pf = pf;
            pf.t = end;
            pf.next += 1;
            let seg = &mut self.segs[pf.seg];
            seg.end = pf.next;
            if seg.end - seg.start > c.segment_sectors {
                seg.start = seg.end - c.segment_sectors;
            }
            self.prefetch = Some(pf);
            bus_t = bus_t.max(end) + bus;
            i += 1;
        }
        self.mech_free = self.mech_free.max(self.prefetch.map(|p| p.t).unwrap_or(0.0));
        let seg = self.prefetch.expect("stream").seg;
        self.consume(seg, lbn + n);
        self.prev_read_end = Some(lbn + n);
        bus_t - now + self.p.overheads.read_complete
    }

    /// Keep a missed read's data (with the `before`/`after` sectors read
    /// free on its track) in the least recently used segment, and read
    /// ahead from its end once the media read ends at `end`.
    pub(super) fn cache_read(&mut self, lbn: u64, n: u64, before: u64, after: u64, end: f64) {
        if self.segs.is_empty() {
            return;
        }
        let v = self.victim(false);
        self.invalidate_overlap(lbn, n, None);
        let seg_end = (lbn + n + after).min(self.p.layout.capacity());
        let start_lbn = seg_end.saturating_sub(self.p.cache.segment_sectors).max(lbn - before);
        self.segs[v] = Seg {
            start: start_lbn,
            end: seg_end,
            stamp: 0,
            valid: true,
        };
        self.touch(v);
        let limit = self.prefetch_limit(lbn, n, start_lbn);
        if limit > seg_end {
            self.prefetch = Some(Prefetch {
                seg: v,
                next: seg_end,
                limit,
                t: end,
            });
        }
    }

    /// Where read-ahead after a read of `lbn..lbn+n` stops.
    fn prefetch_limit(&self, lbn: u64, n: u64, seg_start: u64) -> u64 {
        let c = &self.p.cache;
        let end = lbn + n;
        let cap_ra = end + c.max_readahead;
        // Without "read-ahead over requested", prefetch must not push the
        // request's own data out of the segment.
        let cap_seg = if c.readahead_over_requested {
            u64::MAX
        } else {
            seg_start + c.segment_sectors
        };
        // First LBN after the track holding `from`.
        let track_end = |from: u64| -> u64 {
            let (ph, run) = self.p.layout.run(from, u64::MAX);
            let mut l = from + run;
            // Slipped sectors can interrupt a track: keep going while the
            // numbering stays on it.
            while l < self.p.layout.capacity() {
                let (q, r) = self.p.layout.run(l, u64::MAX);
                if q.cyl != ph.cyl || q.head != ph.head {
                    break;
                }
                l += r;
            }
            l
        };
        let want = match c.prefetch_mode {
            0 => end,
            1 => track_end(end - 1),
            2 => {
                let cyl = self.p.layout.map(end - 1).cyl;
                let mut l = end;
                while l < cap_ra && l < self.p.layout.capacity() && self.p.layout.map(l).cyl == cyl {
                    l += 1;
                }
                l
            }
            4 => {
                let t = track_end(end - 1);
                let spt = self.p.layout.map(lbn).spt as u64;
                let stream = self.prev_read_end.is_some_and(|e| e <= lbn && e + 2 * spt >= lbn);
                if stream {
                    track_end(t)
                } else if c.readahead_over_requested || c.read_any_free {
                    t
                } else {
                    // Empirical (Atlas III trace): a drive that keeps the
                    // request's data and cannot read on arrival starts
                    // read-ahead only once a sequential stream is seen.
                    end
                }
            }
            _ => u64::MAX,
        };
        want.min(cap_ra).min(cap_seg).max(end)
    }

    /// Immediate report: the write is done once its data is in the buffer;
    /// the media write follows when the mechanism is free.
    pub(super) fn write_back(&mut self, now: f64, lbn: u64, n: u64) -> f64 {
        let ow = self.last_write as usize;
        let c = self.p.cache.clone();
        let bus = self.p.bus_write_ms;
        // Level 1 fast writes only cover writes appending to the
        // previous write's data; others count as misses.
        let appending = self.last_write && self.last_end == lbn;
        let busy = self.mech_free > now || (c.write_back_sequential_only && !appending);
        let oh = if busy {
            c_over(&self.p.overheads.write_miss, ow)
        } else {
            c_over(&self.p.overheads.write_hit, ow)
        };
        self.last_hit = !busy;
        let done = now + oh + n as f64 * bus;
        self.cache_written(lbn, n);
        let start = done.max(self.mech_free);
        self.mech_free = self.media(start, lbn, n, true, |_, _| {});
        self.head_wrote = true;
        done - now + self.p.overheads.write_complete
    }

    /// Written data: kept for later reads when the drive serves read hits
    /// on write data, else any stale copy is dropped.
    pub(super) fn cache_written(&mut self, lbn: u64, n: u64) {
        if self.segs.is_empty() {
            return;
        }
        if self.p.cache.read_hits_on_write_data {
            // Extend a segment that ends where this write starts, else take one.
            let i = self
                .segs
                .iter()
                .position(|s| s.valid && s.end == lbn && s.end - s.start + n <= self.p.cache.segment_sectors)
                .unwrap_or_else(|| self.victim(true));
            self.invalidate_overlap(lbn, n, Some(i));
            let s = &mut self.segs[i];
            if !(s.valid && s.end == lbn) {
                s.start = lbn;
            }
            s.end = lbn + n;
            s.valid = true;
            if s.end - s.start > self.p.cache.segment_sectors {
                s.start = s.end - self.p.cache.segment_sectors;
            }
            self.touch(i);
        } else {
            self.invalidate_overlap(lbn, n, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{read, simple_drive, with_cache};
    use super::CacheParams;
    use crate::device::DeviceModel;

    #[test]
    fn read_ahead_hits_and_consumed_data_misses() {
        let mut d = simple_drive();
        d.p.bus_read_ms = 0.01;
        d.p.overheads.read_hit = [0.1, 0.1];
        d.p.overheads.read_miss = [0.5, 0.5];
        let mut d = with_cache(
            d,
            CacheParams {
                enabled: true,
                segments: 2,
                segment_sectors: 100,
                max_readahead: 50,
                consume_on_hit: true,
                ..CacheParams::off()
            },
        );
        let r = read;
        // Miss at t = 0: 0.5 ms overhead puts the platter at sector 5, so
        // sector 0 comes round at 10.0; read until 10.1, bus 0.01 → 10.11.
        assert!((d.service(0.0, &r(0, 1)) - 10.11).abs() < 1e-9);
        assert!(!d.last_hit());
        // Read-ahead of sectors 1..=50 ran from 10.1 to 15.1: a full hit.
        assert!((d.service(30.0, &r(1, 4)) - (0.1 + 4.0 * 0.01)).abs() < 1e-9);
        assert!(d.last_hit());
        // The hit freed sectors 1..=4: re-reading sector 1 misses. At 40.5
        // the platter is at sector 5; sector 1 is 9.6 ms away → 50.1..50.2.
        assert!((d.service(40.0, &r(1, 1)) - 10.21).abs() < 1e-9);
        assert!(!d.last_hit());
    }

    #[test]
    fn read_ahead_protects_only_the_current_request_when_hits_keep_data() {
        // "Read-ahead over requested" = 0 and hits that do not consume: the
        // segment keeps the data already returned, and read-ahead may push
        // out older data but not the current request's.
        let mut d = simple_drive();
        d.p.bus_read_ms = 0.01;
        d.p.overheads.read_hit = [0.1, 0.1];
        d.p.overheads.read_miss = [0.5, 0.5];
        let mut d = with_cache(
            d,
            CacheParams {
                enabled: true,
                segments: 1,
                segment_sectors: 10,
                max_readahead: 50,
                readahead_over_requested: false,
                consume_on_hit: false,
                prefetch_mode: 3,
                ..CacheParams::off()
            },
        );
        let r = read;
        // Miss on sector 0 at t = 0: 0.5 ms overhead (platter at sector 5),
        // sector 0 at 10.0..10.1, bus 0.01 → 10.11. Read-ahead fills the
        // 10-sector segment: sectors 1..=9, 10.1..11.0.
        assert!((d.service(0.0, &r(0, 1)) - 10.11).abs() < 1e-9);
        // Sectors 8..=11 at t = 30: 8 and 9 are buffered, read-ahead has
        // stopped: miss overhead, bus 30.52; the mechanism restarts at 30.5
        // (sector 5), reads 10 at 31.0..31.1 and 11 by 31.2 → 31.21.
        assert!((d.service(30.0, &r(8, 4)) - 1.21).abs() < 1e-9);
        assert!(!d.last_hit());
        // Read-ahead now protects sectors 8..=11 only and runs to 18 (12..=17
        // by 31.8): sectors 14..=15 at t = 50 are a full hit, 0.1 + 2 × 0.01.
        // Protecting the segment's oldest data would have stopped it at 12
        // (a miss: 1.61 ms).
        assert!((d.service(50.0, &r(14, 2)) - 0.12).abs() < 1e-9);
        assert!(d.last_hit());
        // The data returned stay: re-reading sector 14 hits, 0.1 + 0.01.
        assert!((d.service(60.0, &r(14, 1)) - 0.11).abs() < 1e-9);
        assert!(d.last_hit());
    }
}
