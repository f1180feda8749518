"""CUDA compatibility matrix: compute capability x CUDA toolkit x driver minimums, as a pre-flight check.

A job declares how it was built (:class:`CudaBuild`: toolkit version, the ``sm_XY`` architectures it
carries as SASS, those it carries as PTX). A node has a GPU (compute capability) and a driver. The
job runs there only if all of these hold (NVIDIA's rules, see the sources below):

1. the node's driver is at least the toolkit's minimum (with CUDA minor-version compatibility:
   11.x needs >= 450.80.02, 12.x >= 525.60.13, 13.x >= 580.65.06);
2. the node's driver supports the GPU (Kepler ends with the R470 branch; Ada and Hopper need R520);
3. the binary has code for the GPU: SASS for ``sm_XY`` runs on compute capability ``X.Z`` with
   ``Z >= Y`` (binary compatibility within a major version), PTX for ``compute_XY`` is JIT-compiled
   by the driver on any capability ``>= X.Y``.

A build naming an architecture its toolkit cannot emit is bad input (e.g. ``sm_89`` needs CUDA >= 11.8,
``sm_37`` is gone from CUDA 12.0, ``sm_70`` from CUDA 13.0).

Sources: CUDA Toolkit Release Notes, table "CUDA Toolkit and Corresponding Driver Versions" and the
minor-version compatibility table; CUDA 11.8 release notes (sm_89, sm_90 added); CUDA 12.0 release notes
(Kepler sm_35/sm_37 removed); CUDA 13.0 release notes (offline compilation for sm < 7.5 removed);
NVIDIA data center driver notes (R470 is the last branch supporting Kepler); CUDA C Programming Guide,
"Binary Compatibility" and "PTX Compatibility".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from seedance.core.errors import InputError


def version_tuple(text: str, *, field: str = "version", source: str | None = None) -> tuple[int, ...]:
    """``"11.8"`` -> ``(11, 8)``; ``"525.60.13"`` -> ``(525, 60, 13)``."""
    if not re.fullmatch(r"\d+(\.\d+)*", text.strip()):
        raise InputError(f"not a version number: {text!r}", source=source, field=field)
    return tuple(int(p) for p in text.strip().split("."))


@dataclass(frozen=True, slots=True)
class Toolkit:
    """One CUDA toolkit release: driver minimums and the architectures it can emit."""

    version: tuple[int, int]
    min_driver: tuple[int, ...]
    """Linux driver of the toolkit's GA release."""
    min_driver_compat: tuple[int, ...]
    """Minimum driver under minor-version compatibility (same major line)."""
    arch_min: tuple[int, int]
    arch_max: tuple[int, int]


def _tk(v: str, drv: str, compat: str, lo: str, hi: str) -> Toolkit:
    a, b = (int(x) for x in v.split("."))
    return Toolkit((a, b), version_tuple(drv), version_tuple(compat), _cc(lo), _cc(hi))


def _cc(text: str) -> tuple[int, int]:
    a, b = text.split(".")
    return int(a), int(b)


TOOLKITS: Mapping[tuple[int, int], Toolkit] = MappingProxyType({t.version: t for t in (
    _tk("9.0", "384.81", "384.81", "3.0", "7.0"),
    _tk("10.0", "410.48", "410.48", "3.0", "7.5"),
    _tk("10.2", "440.33", "440.33", "3.0", "7.5"),
    _tk("11.0", "450.51.06", "450.36.06", "3.5", "8.0"),
    _tk("11.1", "455.23", "450.80.02", "3.5", "8.6"),
    _tk("11.2", "460.27.03", "450.80.02", "3.5", "8.6"),
    _tk("11.4", "470.42.01", "450.80.02", "3.5", "8.7"),
    _tk("11.8", "520.61.05", "450.80.02", "3.5", "9.0"),
    _tk("12.0", "525.60.13", "525.60.13", "5.0", "9.0"),
    _tk("12.1", "530.30.02", "525.60.13", "5.0", "9.0"),
    _tk("12.4", "550.54.14", "525.60.13", "5.0", "9.0"),
    _tk("12.8", "570.26", "525.60.13", "5.0", "12.0"),
    _tk("13.0", "580.65.06", "580.65.06", "7.5", "12.1"),
)})
"""Known toolkits (GA driver minimums from the CUDA release notes)."""


@dataclass(frozen=True, slots=True)
class Arch:
    """What a GPU architecture needs from the driver and what its links are."""

    name: str
    min_driver: tuple[int, ...]
    max_driver: tuple[int, ...] | None
    pcie_gen: int
    nvlink_gbs_per_link: float
    """Per NVLink, per direction (GB/s); 0 without NVLink."""


ARCHS: Mapping[int, Arch] = MappingProxyType({
    3: Arch("Kepler", (340,), (470, 999), 3, 0.0),
    6: Arch("Pascal", (367, 48), None, 3, 20.0),  # NVLink 1: 20 GB/s per link per direction (P100 SXM2)
    7: Arch("Volta/Turing", (384, 81), None, 3, 25.0),  # NVLink 2: 25 GB/s per link per direction (V100)
    8: Arch("Ampere/Ada", (450, 36, 6), None, 4, 25.0),  # NVLink 3: 12 links x 25 GB/s (A100)
    9: Arch("Hopper", (520, 61, 5), None, 5, 25.0),  # NVLink 4: 18 links x 25 GB/s (H100)
})
"""By compute-capability major; Ada (8.9) additionally needs R520 (see :func:`min_driver_for`)."""


def min_driver_for(cc: tuple[int, int]) -> tuple[int, ...]:
    """The oldest driver that supports a GPU of capability ``cc``."""
    if cc >= (8, 9):
        return (520, 61, 5)
    if cc >= (8, 6):
        return (455, 23)
    if cc == (7, 5):
        return (410, 48)
    return arch_of(cc).min_driver


def arch_of(cc: tuple[int, int]) -> Arch:
    """The architecture entry of compute capability ``cc``."""
    arch = ARCHS.get(cc[0])
    if arch is None:
        raise InputError(f"unknown compute capability {cc[0]}.{cc[1]}; known majors: "
                         f"{', '.join(str(k) for k in ARCHS)}", field="compute_capability")
    return arch


def toolkit(version: str, *, source: str | None = None) -> Toolkit:
    """The toolkit entry of ``"12.4"``; unknown versions list the known ones."""
    v = version_tuple(version, field="cuda", source=source)
    key = (v[0], v[1] if len(v) > 1 else 0)
    tk = TOOLKITS.get(key)
    if tk is None:
        raise InputError(f"unknown CUDA toolkit {version!r}; known: "
                         f"{', '.join(f'{a}.{b}' for a, b in TOOLKITS)}", source=source, field="cuda")
    return tk


def _arch(text: str, prefix: str, source: str | None) -> tuple[int, int]:
    m = re.fullmatch(prefix + r"_(\d)(\d+)", text.strip())
    if not m:
        raise InputError(f"not a {prefix}_XY architecture: {text!r}", source=source, field=prefix)
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True, slots=True)
class CudaBuild:
    """How a job's binary was built.

    Attributes:
        cuda: Toolkit version, e.g. ``"11.8"``.
        sass: Architectures carried as SASS (``"sm_80"``...).
        ptx: Architectures carried as PTX (``"compute_80"``... or ``"sm_80"``).
    """

    cuda: str
    sass: tuple[tuple[int, int], ...]
    ptx: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, cuda: str, sass: Iterable[str] = (), ptx: Iterable[str] = (), *,
           source: str | None = None) -> CudaBuild:
        """Validate a build; with neither ``sass`` nor ``ptx`` it is a fat binary (SASS for every
        architecture the toolkit emits and PTX of its newest, as framework wheels ship)."""
        tk = toolkit(cuda, source=source)
        s = tuple(_arch(a, "sm", source) for a in sass)
        p = tuple(_arch(a.replace("sm_", "compute_"), "compute", source) for a in ptx)
        for arch in (*s, *p):
            if not tk.arch_min <= arch <= tk.arch_max:
                raise InputError(
                    f"CUDA {cuda} cannot build sm_{arch[0]}{arch[1]} (it emits sm_{tk.arch_min[0]}{tk.arch_min[1]}"
                    f"..sm_{tk.arch_max[0]}{tk.arch_max[1]}; {_needs(arch)})", source=source, field="arch")
        if not s and not p:
            lo = tk.arch_min
            known = [(7, 0), (7, 5), (8, 0), (8, 6), (8, 9), (9, 0), (10, 0), (12, 0), (5, 0), (6, 0), (3, 7)]
            s = tuple(sorted(a for a in known if lo <= a <= tk.arch_max))
            p = (tk.arch_max,)
        return cls(cuda, s, p)

    def describe(self) -> str:
        """``CUDA 11.8, SASS sm_70,sm_80, PTX compute_80``."""
        s = ",".join(f"sm_{a}{b}" for a, b in self.sass) or "none"
        p = ",".join(f"compute_{a}{b}" for a, b in self.ptx) or "none"
        return f"CUDA {self.cuda}, SASS {s}, PTX {p}"


def _needs(arch: tuple[int, int]) -> str:
    able = [v for v, t in TOOLKITS.items() if t.arch_min <= arch <= t.arch_max]
    if not able:
        return "no known toolkit emits it"
    lo, hi = min(able), max(able)
    return f"sm_{arch[0]}{arch[1]} needs CUDA {lo[0]}.{lo[1]}..{hi[0]}.{hi[1]}"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Outcome of the pre-flight check: ``ok``, the reason, and whether the driver JIT-compiles PTX."""

    ok: bool
    reason: str
    jit: bool = False


def check(build: CudaBuild, cc: tuple[int, int], driver: tuple[int, ...]) -> Verdict:
    """Can ``build`` run on a GPU of capability ``cc`` under driver ``driver``?"""
    tk = toolkit(build.cuda)
    arch = arch_of(cc)
    ccs = f"{cc[0]}.{cc[1]}"
    drv = ".".join(str(x) for x in driver)
    if driver < min_driver_for(cc):
        need = ".".join(str(x) for x in min_driver_for(cc))
        return Verdict(False, f"driver {drv} does not support compute capability {ccs} (needs >= {need})")
    if arch.max_driver is not None and driver > arch.max_driver:
        return Verdict(False, f"driver {drv} no longer supports {arch.name} (compute capability {ccs}); "
                              f"last branch R{arch.max_driver[0]}")
    if driver < tk.min_driver_compat:
        need = ".".join(str(x) for x in tk.min_driver_compat)
        return Verdict(False, f"CUDA {build.cuda} needs driver >= {need}, the node has {drv}")
    if any(s[0] == cc[0] and s[1] <= cc[1] for s in build.sass):
        return Verdict(True, f"SASS for compute capability {ccs} ({build.describe()})")
    if any(p <= cc for p in build.ptx):
        return Verdict(True, f"PTX JIT-compiled by the driver for {ccs} ({build.describe()})", jit=True)
    return Verdict(False, f"no code for compute capability {ccs}: {build.describe()} "
                          f"(SASS runs on its major version only, PTX on newer capabilities)")


def newest_driver(cc: tuple[int, int]) -> tuple[int, ...]:
    """The newest driver in the table that still supports ``cc`` (a node's default driver)."""
    arch = arch_of(cc)
    if arch.max_driver is not None:
        return (470, 256, 2)
    return (580, 65, 6)
