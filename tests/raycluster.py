"""A Ray cluster of two nodes on this machine, for the tests and the bench.

`ray start --head` and a second `ray start --address` each start their own
raylet (with its object store and workers) under a temporary folder of their
own and on free ports, so that they meet no other Ray of this machine. They are
stopped by their process groups, not by `ray stop`: `ray stop` ends every Ray
process of the user on the machine, other people's included.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"

# Waits, generous for a loaded machine of two cores.
START_TIMEOUT_S = 120
NODES_TIMEOUT_S = 90


class RayUnavailable(Exception):
    """Ray is not installed, or a node did not start here: the reason, in one line."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Prints the alive nodes (id and custom resources) once `want` of them are up.
_NODES = """
import json, logging, sys, time
import ray
ray.init(address=sys.argv[1], logging_level=logging.ERROR, log_to_driver=False)
want, deadline = int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
while True:
    alive = [n for n in ray.nodes() if n["Alive"]]
    if len(alive) >= want or time.monotonic() > deadline:
        break
    time.sleep(0.5)
print(json.dumps({n["NodeID"]: sorted(k for k in n["Resources"] if k.startswith("node_")) for n in alive}))
"""


@dataclass
class Cluster:
    """Two Ray nodes started here: `address` (HOST:PORT of the head's GCS), `nodes`
    (node id -> its custom resources, `node_a` for the head, `node_b` for the other),
    `env` (the environment a driver needs to connect: the cluster's token)."""

    address: str = ""
    nodes: dict[str, list[str]] = field(default_factory=dict)
    root: Path | None = None
    groups: list[int] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def _start(self, name: str, args: list[str]) -> None:
        log = self.root / f"{name}.log"
        # A session of its own: every process the node starts (GCS, raylet, workers,
        # agents) is in this process group unless it leaves it, and is stopped with it.
        with open(log, "w") as out:
            p = subprocess.Popen([str(RAY), "start", *args], stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True, env=self.env)
        self.groups.append(p.pid)
        try:
            rc = p.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        if rc != 0:
            tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-3:]
            raise RayUnavailable(f"`ray start` ({name}) failed ({rc}): " + " | ".join(tail))

    def start(self) -> "Cluster":
        if not RAY.exists():
            raise RayUnavailable(f"no `ray` next to {sys.executable} (pip install 'blocklab[ray]')")
        # Short: Ray's unix socket paths live under it (108 bytes at most).
        self.root = Path(tempfile.mkdtemp(prefix="blr-", dir="/tmp"))
        # Token authentication (Ray's default for a head once a token exists) with a
        # token of this cluster's own: every node and every driver must present it.
        token = self.root / "auth_token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        # Workers started with each job on every node, so that both nodes share a
        # short sweep's cells from its start (a leased worker takes the next queued
        # cell: the node whose worker is up first would run most of them).
        self.env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token",
                        RAY_AUTH_TOKEN_PATH=str(token), RAY_enable_worker_prestart="1")
        self.env.pop("RAY_AUTH_TOKEN", None)
        port = free_port()
        self.address = f"127.0.0.1:{port}"

        def common() -> list[str]:  # fresh ports for each node's agents
            return ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats",
                    f"--dashboard-agent-listen-port={free_port()}", f"--dashboard-agent-grpc-port={free_port()}",
                    f"--runtime-env-agent-port={free_port()}", f"--metrics-export-port={free_port()}"]

        self._start("head", ["--head", f"--port={port}", "--include-dashboard=false",
                             f"--temp-dir={self.root / 'a'}",
                             '--resources={"node_a": 1}', *common()])
        self._start("node-b", [f"--address={self.address}", f"--temp-dir={self.root / 'b'}",
                               '--resources={"node_b": 1}', *common()])
        r = subprocess.run([sys.executable, "-c", _NODES, self.address, "2", str(NODES_TIMEOUT_S)],
                           capture_output=True, text=True, env=self.env, timeout=NODES_TIMEOUT_S + 60)
        if r.returncode != 0:
            raise RayUnavailable(f"the cluster at {self.address} did not answer: "
                                 + " | ".join(r.stderr.strip().splitlines()[-2:]))
        self.nodes = json.loads(r.stdout.strip().splitlines()[-1])
        if len(self.nodes) != 2:
            raise RayUnavailable(f"{len(self.nodes)} node(s) of 2 came up at {self.address}")
        return self

    def stop(self) -> None:
        """Stop every process of both nodes, then remove their folders. Each node's
        processes are in the session its `ray start` began (Ray's workers put
        themselves in process groups of their own, but stay in the session)."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = [p for sid in self.groups for p in _session_pids(sid)]
            for p in pids:
                try:
                    os.kill(p, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 10
            while pids and time.monotonic() < deadline and any(_session_pids(g) for g in self.groups):
                time.sleep(0.2)
        if self.root is not None and not os.environ.get("BLOCKLAB_KEEP_RAY"):
            shutil.rmtree(self.root, ignore_errors=True)


def _session_pids(sid: int) -> list[int]:
    """The live processes (not zombies) of session `sid`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp session ...: comm may hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            out.append(int(d.name))
    return out
