"""Human labels for result columns and sweep parameters, as a figure shows them.

A sweep's columns are flattened result keys (`layers.0.miss_ratio`,
`response.p99_ms`) and stack keys (`cache.0.size`, `array.disks`). A figure
names them in words with their unit; the raw key stays in the tooltip and the
caption. The table below covers the schema's headline fields (docs/stack.md,
"Results"); any other key gets a label built from its parts.

Each column also has a kind, which decides how its axis is drawn: `ratio`
(a fraction, e.g. a miss ratio, RGR), `share` (a part of a whole, e.g.
utilization), `count`, `time`, or `other`. Ratios, shares and counts are drawn
from 0 (a y axis fitted to 0.34195–0.34230 makes equal things look different).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Label:
    text: str  # "Miss ratio, cache layer 0"
    unit: str  # "fraction of accesses"; "" when the quantity has none
    kind: str  # ratio | share | count | time | other

    def axis(self, wrap: int = 0) -> str:
        """Text and unit; on two lines when longer than `wrap` characters (a y axis
        label must not run past its plot)."""
        if not self.unit:
            return self.text
        one = f"{self.text} ({self.unit})"
        return f"{self.text}\n({self.unit})" if wrap and len(one) > wrap else one


# (pattern on the whole key, label text with {0}, {1} for the groups, unit, kind)
TABLE: tuple[tuple[str, str, str, str], ...] = (
    # cache layers
    (r"layers\.(\d+)\.miss_ratio", "Miss ratio, cache layer {0}", "fraction of accesses", "ratio"),
    (r"layers\.(\d+)\.hits", "Hits, cache layer {0}", "blocks", "count"),
    (r"layers\.(\d+)\.misses", "Misses, cache layer {0}", "blocks", "count"),
    (r"layers\.(\d+)\.accesses", "Accesses, cache layer {0}", "blocks", "count"),
    (r"layers\.(\d+)\.cache_blocks", "Size of cache layer {0}", "blocks", "count"),
    (r"layers\.(\d+)\.dirty_evictions", "Dirty evictions, cache layer {0}", "blocks", "count"),
    (r"layers\.(\d+)\.fetched_blocks", "Blocks fetched below, cache layer {0}", "blocks", "count"),
    # array
    (r"array\.rgr", "RGR: surviving-disk I/O per access", "blocks per block accessed", "ratio"),
    (r"array\.surviving_reads", "Reads on surviving disks", "blocks", "count"),
    (r"array\.surviving_writes", "Writes on surviving disks", "blocks", "count"),
    (r"array\.unreadable_blocks", "Unreadable blocks", "blocks", "count"),
    # timed
    (r"response\.avg_ms", "Mean response time", "ms", "time"),
    (r"response\.p(\d+)_ms", "Response time, {0}th percentile", "ms", "time"),
    (r"response\.max_ms", "Longest response time", "ms", "time"),
    (r"response\.(reads|writes)\.avg_ms", "Mean response time of {0}", "ms", "time"),
    (r"response\.(reads|writes)\.p(\d+)_ms", "Response time of {0}, {1}th percentile", "ms", "time"),
    (r"response\.(reads|writes)\.max_ms", "Longest response time of {0}", "ms", "time"),
    (r"response\.(reads|writes)\.requests", "Requests: {0}", "requests", "count"),
    (r"rebuild\.rebuild_ms", "Rebuild time", "ms", "time"),
    (r"timing\.utilization", "Disk utilization", "share of time busy", "share"),
    (r"timing\.avg_service_ms", "Mean service time", "ms", "time"),
    (r"timing\.mean_outstanding", "Mean requests outstanding", "requests", "other"),
    (r"timing\.max_outstanding", "Most requests outstanding", "requests", "count"),
    (r"timing\.sim_time_ms", "Simulated time", "ms", "time"),
    (r"devices\.(\d+)\.utilization", "Utilization of disk {0}", "share of time busy", "share"),
    (r"devices\.(\d+)\.busy_ms", "Busy time of disk {0}", "ms", "time"),
    (r"devices\.(\d+)\.ops", "Operations on disk {0}", "operations", "count"),
    (r"demerit_ms", "Demerit", "ms", "time"),
    (r"demerit_pct", "Demerit", "% of mean service time", "other"),
    (r"wall_s", "Wall-clock time of the cell", "s", "time"),
    # parameters
    (r"cache\.(\d+)\.size", "Host cache size (layer {0})", "", "other"),
    (r"cache\.(\d+)\.policy", "Replacement policy (layer {0})", "", "other"),
    (r"cache\.(\d+)\.write", "Write policy (layer {0})", "", "other"),
    (r"array\.disks", "Disks in the array", "", "count"),
    (r"array\.raid", "RAID level", "", "other"),
    (r"array\.chunk", "Chunk size", "", "other"),
    (r"array\.failed", "Failed disks", "", "other"),
    (r"array\.rebuild\.max", "Rebuild speed limit", "KB/s", "other"),
    (r"replay\.speedup", "Trace speed-up", "×", "other"),
    (r"ssd\.size", "SSD cache size", "", "other"),
    (r"ssd\.partitioner", "SSD partitioner", "", "other"),
    (r"seed", "Seed", "", "other"),
    (r"trace_label|trace", "Trace", "", "other"),
    (r"case", "Case", "", "other"),
)
_COMPILED = [(re.compile(p), t, u, k) for p, t, u, k in TABLE]

_SUFFIX_UNITS = (("_ms", "ms", "time"), ("_s", "s", "time"), ("_pct", "%", "other"), ("_bytes", "bytes", "count"),
                 ("_blocks", "blocks", "count"))


def label(key: str) -> Label:
    """The label of a column or parameter key."""
    for rx, text, unit, kind in _COMPILED:
        m = rx.fullmatch(key)
        if m:
            return Label(text.format(*m.groups()), unit, kind)
    return _built(key)


def _built(key: str) -> Label:
    """A key outside the table: its parts in words, the unit from its suffix."""
    last = key.rsplit(".", 1)[-1]
    unit, kind = "", "other"
    for suffix, u, k in _SUFFIX_UNITS:
        if last.endswith(suffix):
            last, unit, kind = last[: -len(suffix)], u, k
            break
    if "ratio" in last or last in ("rgr", "hit_rate", "miss_rate"):
        kind = "ratio"
    elif "utilization" in last or "share" in last:
        kind = "share"
    parts = key.split(".")[:-1]
    where = [p for p in parts if not p.isdigit()]
    index = [p for p in parts if p.isdigit()]
    text = last.replace("_", " ")
    text = text[:1].upper() + text[1:]
    if where:
        text += ", " + " ".join(where).replace("_", " ") + (f" {index[0]}" if index else "")
    return Label(text, unit, kind)


def starts_at_zero(key: str) -> bool:
    """Whether the key's axis is drawn from 0 (ratios, shares, counts)."""
    return label(key).kind in ("ratio", "share", "count")


def resolution(key: str, values: list[float]) -> float:
    """The smallest difference the report calls a difference: 0.001 for ratios and
    shares (a tenth of a percentage point), else 0.1 % of the smallest non-zero
    magnitude (response times of 2 ms and 10 s in one figure: 0.002 ms)."""
    if label(key).kind in ("ratio", "share"):
        return 1e-3
    small = min((abs(v) for v in values if v), default=0.0)
    return 1e-3 * small if small > 0 else 1e-12
