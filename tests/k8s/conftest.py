"""Fixtures of the Kubernetes tests (builders live in tests/k8s/k8s_docs.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.k8s.k8s_docs import RecordingBinder, make_node, make_pod


@pytest.fixture
def binder() -> RecordingBinder:
    return RecordingBinder()


@pytest.fixture
def node_factory() -> Callable[..., dict[str, Any]]:
    return make_node


@pytest.fixture
def pod_factory() -> Callable[..., dict[str, Any]]:
    return make_pod
