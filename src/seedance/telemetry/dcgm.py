"""Reading a dcgm-exporter scrape: per-GPU and per-MIG-instance profiling fields, pod labels.

dcgm-exporter (NVIDIA) labels every series with ``gpu``, ``UUID``, ``device``, ``Hostname``, and for
a MIG instance ``GPU_I_PROFILE`` and ``GPU_I_ID`` — always with the *parent* GPU's UUID, never the
MIG UUID, so instances are joined on (parent UUID, GPU instance id). With the kubelet pod-resources
integration it adds ``pod``, ``namespace`` and ``container``; those are empty on shared or MIG GPUs
in many set-ups (NVIDIA/dcgm-exporter#188), which is why Seedance attributes from processes itself.
The text is parsed with ``prometheus_client``'s parser.
"""

from __future__ import annotations

from dataclasses import dataclass

from seedance.core.errors import InputError

GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


@dataclass(frozen=True, slots=True)
class DcgmSample:
    """One sample of a dcgm-exporter series."""

    field: str
    gpu: int | None
    uuid: str
    gi_id: int | None
    profile: str | None
    pod: str
    namespace: str
    container: str
    value: float


def parse_dcgm(text: str, *, source: str = "dcgm-exporter") -> list[DcgmSample]:
    """Every sample of a scrape (raises :class:`InputError` on text that is not exposition format)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: list[DcgmSample] = []
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                lab = s.labels
                gi = lab.get("GPU_I_ID")
                gpu = lab.get("gpu")
                out.append(DcgmSample(
                    field=s.name, gpu=int(gpu) if gpu not in (None, "") else None, uuid=lab.get("UUID", ""),
                    gi_id=int(gi) if gi not in (None, "") else None, profile=lab.get("GPU_I_PROFILE") or None,
                    pod=lab.get("pod", ""), namespace=lab.get("namespace", ""), container=lab.get("container", ""),
                    value=float(s.value),
                ))
    except ValueError as exc:
        raise InputError(f"not Prometheus exposition text: {exc}", source=source) from None
    return out


def engine_active(samples: list[DcgmSample]) -> dict[tuple[str, int | None], float]:
    """``{(parent UUID, GPU instance id or None): GR_ENGINE_ACTIVE}`` (``None``: the whole GPU)."""
    return {(s.uuid, s.gi_id): s.value for s in samples if s.field == GR_ENGINE_ACTIVE}
