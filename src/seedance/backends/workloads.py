"""What a dispatched job runs: workloads registered by name, chosen and tuned by the job's labels.

A job picks its workload with the label ``seedance.io/workload`` (default ``torch-train``) and tunes
it with ``seedance.io/<param>`` labels (``steps``, ``hold``, ``fail-at``, ``step-seconds``,
``seconds``). A workload is a function ``(JobContext) -> dict`` (its result, kept by the backend);
what it prints is the job's log (``seedancectl logs``). It runs inside the backend's worker (a
Ray task), with ``CUDA_VISIBLE_DEVICES`` set to the GPUs of Seedance's decision and
``SEEDANCE_GPU_SHARE`` to its share of each.

* ``torch-train``: a few steps of a small PyTorch regression model (CPU, or the visible GPU with
  its memory capped to the job's share), printing the loss of every step. ``checkpoint-at: N`` stops
  after step N and returns the real state dict (model, optimiser, step, losses) as ``checkpoint``
  bytes; a run given ``JobContext.resume_state`` continues from it (live migration).
* ``sleep``: waits ``seconds``, printing a line per second.

``hold: "true"`` makes either wait, after its work, until the backend releases it (a test and
debugging aid: a job stays on its GPUs, e.g. while its node is killed); ``fail-at: N`` raises at
step N (an injected failure).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from seedance.core.errors import InputError
from seedance.core.registry import Registry

N = TypeVar("N", int, float)

LABEL_PREFIX = "seedance.io/"
WORKLOAD_LABEL = LABEL_PREFIX + "workload"
DEFAULT_WORKLOAD = "torch-train"


class Channel(Protocol):
    """What a workload may ask its supervisor (implemented by the Ray task's log channel)."""

    def released(self) -> bool:
        """The backend released a held job."""
        ...

    def stopping(self) -> bool:
        """The backend gave the run up (cancelled): stop early."""
        ...


class _Free:
    """A channel for runs outside a backend: always released, never stopping."""

    def released(self) -> bool:
        return True

    def stopping(self) -> bool:
        return False


@dataclass(slots=True)
class JobContext:
    """What a workload knows about its job and run."""

    job_id: int
    name: str
    attempt: int
    params: Mapping[str, str] = field(default_factory=dict)
    gpu_indices: tuple[int, ...] = ()
    gpu_share: float = 0.0
    channel: Channel = field(default_factory=_Free)
    resume_state: bytes | None = None
    """A checkpoint (``torch.save`` bytes) a migrated or restarted run resumes from (``torch-train``)."""

    def int_param(self, key: str, default: int, *, lo: int, hi: int) -> int:
        """An integer parameter in ``[lo, hi]``; bad input raises ``InputError``."""
        return self._number(key, default, lo, hi, int, "an integer")

    def float_param(self, key: str, default: float, *, lo: float, hi: float) -> float:
        """A float parameter in ``[lo, hi]``."""
        return self._number(key, default, lo, hi, float, "a number")

    def _number(self, key: str, default: N, lo: N, hi: N, parse: Callable[[str], N], what: str) -> N:
        raw = self.params.get(key)
        if raw is None or raw == "":
            return default
        try:
            value = parse(raw)
        except ValueError:
            raise InputError(f"{LABEL_PREFIX}{key} must be {what}, not {raw!r}", field=key) from None
        if not lo <= value <= hi:
            raise InputError(f"{LABEL_PREFIX}{key} must be in [{lo}, {hi}], not {value}", field=key)
        return value

    def flag(self, key: str) -> bool:
        """A boolean parameter (``true``/``1``/``yes``)."""
        return self.params.get(key, "").lower() in ("true", "1", "yes")

    def hold(self, poll_s: float = 0.1) -> None:
        """Wait until the backend releases the job (or gives it up)."""
        while not (self.channel.released() or self.channel.stopping()):
            time.sleep(poll_s)


Workload = Callable[[JobContext], dict[str, Any]]
WORKLOADS: Registry[Workload] = Registry("workload")


def workload_of(labels: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The workload name and its parameters from a job's labels (``seedance.io/...``)."""
    name = labels.get(WORKLOAD_LABEL) or DEFAULT_WORKLOAD
    params = {k[len(LABEL_PREFIX):]: v for k, v in labels.items() if k.startswith(LABEL_PREFIX) and k != WORKLOAD_LABEL}
    return name, params


@WORKLOADS.register("torch-train", aliases=("train",))
def torch_train(ctx: JobContext) -> dict[str, Any]:
    """A few Adam steps of a 16-32-1 MLP on a fixed synthetic regression (seeded by the job id)."""
    import os

    import torch

    steps = ctx.int_param("steps", 20, lo=1, hi=100_000)
    fail_at = ctx.int_param("fail-at", 0, lo=0, hi=100_000)
    step_s = ctx.float_param("step-seconds", 0.0, lo=0.0, hi=3600.0)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(ctx.job_id)
    device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if device.type == "cuda" and 0 < ctx.gpu_share < 1:
        torch.cuda.set_per_process_memory_fraction(ctx.gpu_share)
    print(f"job {ctx.name} (id {ctx.job_id}) attempt {ctx.attempt}: torch {torch.__version__} on {device}, "
          f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '')}, GPU share {ctx.gpu_share:g}",
          flush=True)
    x = torch.randn(512, 16, generator=gen)
    y = x @ torch.randn(16, 1, generator=gen) + 0.05 * torch.randn(512, 1, generator=gen)
    x, y = x.to(device), y.to(device)
    torch.manual_seed(ctx.job_id)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses: list[float] = []
    checkpoint_at = ctx.int_param("checkpoint-at", 0, lo=0, hi=100_000)
    first = 1
    resumed_at = 0.0
    if ctx.resume_state is not None:
        import io

        state = torch.load(io.BytesIO(ctx.resume_state), map_location=device, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        losses = [float(v) for v in state["losses"]]
        first = int(state["step"]) + 1
        resumed_at = time.time()
        print(f"resumed from step {first - 1}", flush=True)
    for step in range(first, steps + 1):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        losses.append(float(loss.item()))
        print(f"step {step}/{steps} loss {losses[-1]:.5f}", flush=True)
        if step == fail_at:
            raise RuntimeError(f"injected failure at step {step}")
        if ctx.channel.stopping():
            print("stopping: the backend gave this run up", flush=True)
            break
        if step == checkpoint_at and step < steps:
            import io

            checkpointed_at = time.time()
            buf = io.BytesIO()
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step,
                        "losses": losses}, buf)
            print(f"checkpointed at step {step} ({buf.tell()} bytes)", flush=True)
            return {"steps": len(losses), "losses": losses, "checkpoint": buf.getvalue(), "stopped_at": step,
                    "checkpointed_at_unix": checkpointed_at, "device": str(device)}
        if step_s:
            time.sleep(step_s)
    if ctx.flag("hold"):
        print("holding until released", flush=True)
        ctx.hold()
        print("released", flush=True)
    return {"steps": len(losses), "first_loss": losses[0], "final_loss": losses[-1], "device": str(device),
            "losses": losses, **({"resumed_at_unix": resumed_at} if resumed_at else {})}


@WORKLOADS.register("sleep")
def sleep(ctx: JobContext) -> dict[str, Any]:
    """Wait ``seconds`` (default 1), a line per second."""
    seconds = ctx.float_param("seconds", 1.0, lo=0.0, hi=7 * 86400.0)
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0 and not ctx.channel.stopping():
        print(f"sleeping, {left:.0f} s left", flush=True)
        time.sleep(min(1.0, left))
    if ctx.flag("hold"):
        ctx.hold()
    return {"seconds": seconds}
