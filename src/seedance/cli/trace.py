"""``seedancectl trace``: tools on trace files (``trace scale``: synthetic fleets k times larger)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from seedance.cli.common import dumps


def register(app: typer.Typer) -> None:
    """Add the ``trace`` command group."""
    group = typer.Typer(help="Trace files: scale a node list and a pod list into a larger synthetic fleet.",
                        no_args_is_help=True)

    @group.command("scale")
    def scale(
        out: Annotated[Path, typer.Option(help="Folder for the scaled node list and pod list (created).")],
        factor: Annotated[int, typer.Option(help="Scale factor k (integer >= 1): k times the nodes and the pods.")],
        nodes: Annotated[Path | None, typer.Option(help="Node list CSV (default: the trace's GPU nodes).")] = None,
        pods: Annotated[Path | None, typer.Option(help="Pod list CSV (default: the default trace).")] = None,
        seed: Annotated[int, typer.Option(help="Seed of the copies' time offsets.")] = 0,
        jitter: Annotated[int, typer.Option(help="Largest time offset of a copy, in seconds.")] = 600,
    ) -> None:
        """Write Alibaba-format files with k copies of every node and pod (same mix; docs/scale.md)."""
        from seedance.traces.alibaba import load_nodes, load_pods
        from seedance.traces.paths import DEFAULT_NODES, DEFAULT_PODS, data_file
        from seedance.traces.scale import scale_fleet, write_fleet

        nodes_path = nodes or data_file(DEFAULT_NODES)
        pods_path = pods or data_file(DEFAULT_PODS)
        fleet = scale_fleet(load_nodes(nodes_path), load_pods(pods_path), factor, seed, jitter)
        n_path, p_path = write_fleet(fleet, out, nodes_path.name, pods_path.name)
        typer.echo(dumps({
            "factor": factor, "seed": seed, "jitter_s": jitter,
            "nodes": {"file": str(n_path), "count": len(fleet.nodes.nodes), "gpus": fleet.nodes.total_gpus},
            "pods": {"file": str(p_path), "count": len(fleet.pods), "gpu_milli": fleet.pods.total_gpu_milli},
        }))

    app.add_typer(group, name="trace")
