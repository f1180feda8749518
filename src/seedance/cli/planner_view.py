"""Tables and option parsing for the job planner (used by ``seedancectl costmodel estimate|finetune``)."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from seedance.core.catalog import CATALOG
from seedance.core.errors import InputError


def parse_mfu(items: list[str] | None) -> dict[str, tuple[float, str]]:
    """``["L40S=0.35", ...]`` -> ``{"L40S": (0.35, "given on the command line")}``."""
    out: dict[str, tuple[float, str]] = {}
    for item in items or []:
        name, sep, val = item.partition("=")
        if not sep:
            raise InputError(f"expected GPU=VALUE, got {item!r}", source="--gpu-mfu")
        if name.strip() not in CATALOG:
            raise InputError(f"unknown GPU model {name.strip()!r}; valid names: {', '.join(CATALOG.known_names())}",
                             source="--gpu-mfu")
        try:
            v = float(val)
        except ValueError:
            raise InputError(f"not a number: {val!r}", source="--gpu-mfu") from None
        if not 0 < v <= 1:
            raise InputError(f"MFU must be within (0, 1], got {v}", source="--gpu-mfu")
        out[CATALOG.resolve(name.strip()).name] = (v, "given on the command line")
    return out


def plan_payload(best: Any, opts: list[Any], settings: Any) -> dict[str, Any]:
    """JSON of a plan: the choice and every option."""
    return {"chosen": None if best is None else best.to_json(),
            "options": [o.to_json() for o in opts],
            "options_evaluated": len(opts), "options_feasible": sum(o.feasible for o in opts),
            "mfu": {k: {"mfu": v[0], "source": v[1]} for k, v in settings.mfu.items()},
            "markets": list(settings.markets) + (["commitment-1y", "commitment-3y"] if settings.use_commitments
                                                 else [])}


def plan_table(p: dict[str, Any], title: str) -> Table:
    """Cheapest GPU count of every offer x market, cheapest first; the chosen option marked."""
    best: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for o in p["options"]:
        key = (o["cloud"], o["instance_type"], o["region"], o["market"])
        cur = best.get(key)
        rank = (not o["feasible"], o["expected_cost_usd"])
        if cur is None or rank < (not cur["feasible"], cur["expected_cost_usd"]):
            best[key] = o
    t = Table(title=title)
    for col in ("", "cloud", "instance", "region", "GPU", "GPUs", "market", "MFU", "wall h", "USD/inst-h",
                "expected USD", "note"):
        t.add_column(col, justify="right" if col in ("GPUs", "MFU", "wall h", "USD/inst-h", "expected USD") else "left")
    ch = p["chosen"]
    rows = sorted(best.values(), key=lambda o: (not o["feasible"], o["expected_cost_usd"]))
    for o in rows:
        mark = "*" if ch and all(o[k] == ch[k] for k in ("cloud", "instance_type", "region", "market", "gpus")) else ""
        t.add_row(mark, o["cloud"], o["instance_type"], o["region"], str(o["gpu_model"]), str(o["gpus"]), o["market"],
                  "-" if o["mfu"] != o["mfu"] else f"{o['mfu']:.3f}",
                  "-" if o["wall_hours"] != o["wall_hours"] else f"{o['wall_hours']:.2f}",
                  "-" if o["unit_price_usd_per_hour"] != o["unit_price_usd_per_hour"]
                  else f"{o['unit_price_usd_per_hour']:.4f}",
                  "-" if o["expected_cost_usd"] == float("inf") else f"{o['expected_cost_usd']:.2f}",
                  o["reason"][:70])
    return t


def finetune_tables(r: dict[str, Any]) -> list[Any]:
    """The re-measurement beside the whitepaper's claim, and the lever attribution."""
    t = Table(title="LLaMA-3-8B fine-tune: whitepaper claim vs re-measured with the job planner")
    for col in ("", "before USD", "after USD", "change"):
        t.add_column(col, justify="left" if not col else "right")
    c, m = r["claim"], r["measured"]
    t.add_row("whitepaper §1", f"{c['before_usd']:.2f}", f"{c['after_usd']:.2f}", f"{c['change_pct']:+.1f}%")
    t.add_row("re-measured", f"{m['before_usd']:.2f}", f"{m['after_usd']:.2f}", f"{m['change_pct']:+.1f}%")
    b, ch = r["baseline"], r["chosen"]
    t2 = Table(title="setups")
    for col in ("", "cloud", "instance", "region", "GPUs", "market", "MFU", "wall h", "USD"):
        t2.add_column(col)
    for label, o in (("before", b), ("after", ch)):
        t2.add_row(label, o["cloud"], o["instance_type"], o["region"], str(o["gpus"]), o["market"], f"{o['mfu']:.3f}",
                   f"{o['wall_hours']:.2f}", f"{o['expected_cost_usd']:.2f}")
    t3 = Table(title="what explains the saving (Shapley over the levers)")
    for col in ("lever", "saving USD", "share"):
        t3.add_column(col, justify="left" if col == "lever" else "right")
    for lv in r["levers"]:
        t3.add_row(lv["lever"], f"{lv['saving_usd']:.2f}", f"{lv['share_of_saving']:.1%}")
    j = r["job"]
    note = (f"job: N = {j['params']:.3g}, D = {j['tokens']:.3g} tokens ({j['tokens_note']}), deadline "
            f"{j['deadline_hours']:g} h; {r['options_feasible']} of {r['options_evaluated']} options feasible")
    return [t, t2, t3, note]
