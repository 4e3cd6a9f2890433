"""`blocklab disk ...`: disk models (DiskSim `.parv` or native `.toml` specs).

The group is the module-level `disk_app`, so other modules can add commands
to it (e.g. `disk_run_cmd.py` adds `disk run`) without editing this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from blocklab.cli.common import JsonOpt, print_json

disk_app = typer.Typer(help="Disk models: validate against real-drive measurements, run traces in time.",
                       no_args_is_help=True)


@disk_app.command("validate")
def validate(
    model: Path = typer.Argument(..., help="Disk model: a DiskSim .parv file or a native .toml spec."),
    trace: Path = typer.Option(..., "--trace", help="Validation trace: `R|W Hit|Miss blkno bcount measured_us think_us`."),
    responses: Optional[Path] = typer.Option(None, "--responses", help="Write one simulated service time (ms) per line, in trace order."),
    json_out: bool = JsonOpt,
) -> None:
    """Replay a real drive's measured trace and report the demerit figure (Ruemmler & Wilkes)."""
    from blocklab import _core

    res = json.loads(_core.disk_validate(str(model), str(trace), str(responses) if responses else None))
    out = {k: res[k] for k in ("demerit_ms", "demerit_pct", "mean_measured_ms", "mean_simulated_ms")}
    out["requests"] = res["requests"]
    if json_out:
        print_json(out)
    else:
        print(f"{model.name}: {out['requests']} requests, demerit {out['demerit_ms']:.3f} ms "
              f"({out['demerit_pct']:.1f}% of the mean), mean measured {out['mean_measured_ms']:.3f} ms, "
              f"simulated {out['mean_simulated_ms']:.3f} ms")


def register(app: typer.Typer) -> None:
    """Add the `disk` group to the main app (`disk_run_cmd` attaches `run` to it)."""
    app.add_typer(disk_app, name="disk")
