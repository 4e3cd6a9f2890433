"""`blocklab disk ...`: disk models (DiskSim `.parv` or native `.toml` specs).

The group is the module-level `disk_app`, so other modules can add commands
to it (e.g. `disk_run_cmd.py` adds `disk run`) without editing this file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from blocklab.cli.common import JsonOpt, literal, print_json

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


@disk_app.command("scale")
def scale(
    model: Path = typer.Argument(..., help=literal("A native TOML disk spec ([hdd]), e.g. examples/disks/hsu-smith/ultrastar-73lzx-9.toml.")),
    years: float = typer.Option(..., "--years", help="How many years of disk progress to apply."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="The new spec (default: MODEL's name + `-plus<N>y.toml`, here)."),
    seek_rate: Optional[float] = typer.Option(None, "--seek-rate", help="Annual reduction of seek times (default 0.085)."),
    rpm_rate: Optional[float] = typer.Option(None, "--rpm-rate", help="Annual growth of the RPM (default 0.079)."),
    bpi_rate: Optional[float] = typer.Option(None, "--bpi-rate", help="Annual growth of linear density, sectors per track (default 0.26)."),
    tpi_rate: Optional[float] = typer.Option(None, "--tpi-rate", help="Annual growth of track density, cylinders (default 0.32)."),
    json_out: bool = JsonOpt,
) -> None:
    """Write MODEL scaled N years ahead (Hsu–Smith §5: faster seeks, higher RPM, linear and track density)."""
    from blocklab import _core

    if out is None:
        tag = f"{years:g}".replace(".", "_")
        out = Path(f"{model.stem}-plus{tag}y.toml")
    res = json.loads(_core.disk_scale(str(model), years, str(out), seek_rate, rpm_rate, bpi_rate, tpi_rate))
    if json_out:
        print_json(res)
        return
    b, a, f = res["before"], res["after"], res["factors"]
    print(f"{b['name']} -> {out} ({years:g} years)")
    print(f"  seek x{f['seek']:.3f}, rpm x{f['rpm']:.3f}, linear density x{f['bpi']:.3f}, track density x{f['tpi']:.3f}")
    for k, label, fmt in (("capacity_gb", "capacity (GB)", "{:.1f}"), ("rpm", "RPM", "{:.0f}"),
                          ("average_seek_ms", "average seek (ms)", "{:.2f}"),
                          ("outer_media_mb_s", "outer media rate (MB/s)", "{:.1f}"), ("cylinders", "cylinders", "{}")):
        if b.get(k) is not None:
            print(f"  {label:24} {fmt.format(b[k]):>10} -> {fmt.format(a[k])}")


def register(app: typer.Typer) -> None:
    """Add the `disk` group to the main app (`disk_run_cmd` attaches `run` to it)."""
    app.add_typer(disk_app, name="disk")
