"""Workload parameters from job labels: defaults, parsing and range errors."""

from __future__ import annotations

import pytest

from seedance.backends.workloads import JobContext
from seedance.core.errors import InputError


def test_numeric_parameters_parse_default_and_refuse_bad_values() -> None:
    ctx = JobContext(job_id=1, name="j", attempt=0, params={"steps": "7", "lr": "0.5", "empty": "", "bad": "x"})
    assert ctx.int_param("steps", 3, lo=1, hi=10) == 7
    assert ctx.int_param("missing", 3, lo=1, hi=10) == 3 and ctx.int_param("empty", 3, lo=1, hi=10) == 3
    assert ctx.float_param("lr", 0.1, lo=0.0, hi=1.0) == 0.5
    with pytest.raises(InputError, match=r"seedance.io/bad must be an integer, not 'x'"):
        ctx.int_param("bad", 3, lo=1, hi=10)
    with pytest.raises(InputError, match=r"seedance.io/bad must be a number, not 'x'"):
        ctx.float_param("bad", 0.1, lo=0.0, hi=1.0)
    with pytest.raises(InputError, match=r"seedance.io/steps must be in \[1, 5\], not 7"):
        ctx.int_param("steps", 3, lo=1, hi=5)
    with pytest.raises(InputError, match=r"seedance.io/lr must be in \[0.0, 0.25\], not 0.5"):
        ctx.float_param("lr", 0.1, lo=0.0, hi=0.25)
