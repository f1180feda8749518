"""Scheduling profiles: one ordered pipeline of typed stages for every driver.

``build_profile(config, state)`` turns a ``kind: SchedulingProfile`` document
(:class:`ProfileConfig`, ``load_profile``) into a :class:`SchedulingProfile`; the simulators, the
tiered A/B, the MIG-pool run, the live control loop and the Kubernetes extender all decide with it.
See ``CONTRIBUTING.md`` (stage API) and ``docs/profiles.md``.
"""

from seedance.profile.build import BuildContext, build_profile
from seedance.profile.config import ProfileConfig, load_profile, parse_profile, profile_from_text, profile_of_policy
from seedance.profile.profile import Admission, SchedulingProfile, Scored
from seedance.profile.stages import (
    ADAPTERS,
    BIND_HOOKS,
    FALLBACKS,
    FILTERS,
    Attempt,
    BindHook,
    Fallback,
    RequestAdapter,
)

__all__ = [
    "ADAPTERS",
    "BIND_HOOKS",
    "FALLBACKS",
    "FILTERS",
    "Admission",
    "Attempt",
    "BindHook",
    "BuildContext",
    "Fallback",
    "ProfileConfig",
    "RequestAdapter",
    "SchedulingProfile",
    "Scored",
    "build_profile",
    "load_profile",
    "parse_profile",
    "profile_from_text",
    "profile_of_policy",
]
