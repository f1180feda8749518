"""Where the control plane keeps local files: ``$SEEDANCE_HOME`` or the user data folder.

The CLI's contexts file (``config.yaml``) and the embedded SQLite store used when no context is
set (``local.db``) live here. Tests point ``SEEDANCE_HOME`` at a temporary folder.
"""

from __future__ import annotations

import os
from pathlib import Path

HOME_ENV = "SEEDANCE_HOME"


def home_dir(*, create: bool = True) -> Path:
    """The Seedance home folder (``$SEEDANCE_HOME``, else the platform's user data folder)."""
    env = os.environ.get(HOME_ENV)
    if env:
        path = Path(env)
    else:
        import platformdirs

        path = Path(platformdirs.user_data_dir("seedance", appauthor=False))
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def default_database_url() -> str:
    """SQLite file ``seedance.db`` in the home folder (the server's default store)."""
    return f"sqlite:///{home_dir() / 'seedance.db'}"


def local_database_url() -> str:
    """SQLite file ``local.db`` in the home folder (the CLI's store when no context is set)."""
    return f"sqlite:///{home_dir() / 'local.db'}"
