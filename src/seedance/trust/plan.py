"""Planned MIG layouts for the drift check: the output of ``seedancectl mig plan -o json|yaml``.

A plan lists GPUs by name (``{"gpus": [{"gpu": "node-7/gpu-0", "layout": ["3g.40gb@0", ...]}]}``;
the planner's own JSON). The audit needs them by the node's ``nvidia-smi`` GPU index:

* with ``--gpu-map NAME=INDEX`` pairs, exactly those;
* else a name ``<node>/gpu-<i>`` (or ``<node>/<i>``) maps to index ``i`` — with ``node`` given,
  only names under that node are taken;
* else a name ending in ``-<i>`` (``a100-80gb-3``, as the planner names unnamed GPUs) maps to ``i``.

Two plan GPUs on one index, or a name that gives no index, is an :class:`InputError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from seedance.core.errors import InputError
from seedance.slicing.mig import Instance

_NODE_GPU = re.compile(r"^(?P<node>.+)/(?:gpu-?)?(?P<i>\d+)$")
_SUFFIX = re.compile(r"-(?P<i>\d+)$")


def parse_plan_document(doc: Any, source: str) -> list[tuple[str, tuple[Instance, ...]]]:
    """``(gpu name, layout)`` of every GPU of a plan document."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("gpus"), list):
        raise InputError(
            "expected a plan with a 'gpus' list (seedancectl mig plan -o json)", source=source, field="gpus"
        )
    out: list[tuple[str, tuple[Instance, ...]]] = []
    for i, g in enumerate(doc["gpus"]):
        if not isinstance(g, Mapping) or not isinstance(g.get("gpu", g.get("name")), str):
            raise InputError("each GPU needs a 'gpu' name", source=source, field=f"gpus[{i}].gpu")
        layout = g.get("layout", [])
        if not isinstance(layout, list) or not all(isinstance(x, str) for x in layout):
            raise InputError("layout must be a list of PROFILE@START", source=source, field=f"gpus[{i}].layout")
        out.append((str(g.get("gpu", g.get("name"))), tuple(Instance.parse(x, source=source) for x in layout)))
    return out


def load_plan(path: Path) -> list[tuple[str, tuple[Instance, ...]]]:
    """Read a plan file (JSON or YAML)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read plan: {exc.strerror}", source=str(path)) from exc
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        from seedance.core.yamldoc import compose

        _, doc = compose(text, source=str(path), what="plan", allow_empty=True)
    return parse_plan_document(doc, str(path))


def planned_by_index(
    gpus: Sequence[tuple[str, tuple[Instance, ...]]],
    *,
    node: str | None = None,
    gpu_map: Mapping[str, int] | None = None,
    source: str = "plan",
) -> dict[int, tuple[Instance, ...]]:
    """Plan GPUs keyed by the node's GPU index (rules in the module docstring)."""
    out: dict[int, tuple[Instance, ...]] = {}
    owner: dict[int, str] = {}
    for name, layout in gpus:
        index: int | None
        if gpu_map is not None:
            if name not in gpu_map:
                continue
            index = gpu_map[name]
        else:
            m = _NODE_GPU.match(name)
            if m:
                if node is not None and m.group("node") != node:
                    continue
                index = int(m.group("i"))
            elif node is not None:
                continue
            else:
                s = _SUFFIX.search(name)
                index = int(s.group("i")) if s else None
        if index is None:
            raise InputError(f"plan GPU {name!r} names no GPU index (use NODE/gpu-I or --gpu-map)", source=source)
        if index in out:
            raise InputError(f"plan GPUs {owner[index]!r} and {name!r} both map to GPU {index}", source=source)
        out[index] = layout
        owner[index] = name
    if gpu_map is not None and set(gpu_map) - set(owner.values()):
        missing = ", ".join(sorted(set(gpu_map) - set(owner.values())))
        raise InputError(f"--gpu-map names GPUs the plan does not have: {missing}", source=source)
    if not out:
        raise InputError("no plan GPU maps to this node" + (f" ({node})" if node else ""), source=source)
    return out
