"""Kernel tests run Triton on its CPU interpreter: set before anything imports triton."""

from __future__ import annotations

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
