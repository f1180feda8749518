"""The control plane: an API service that runs the scheduling core live over a stored cluster.

Contract: importing ``seedance.control`` (or ``seedance.control.paths``) imports nothing heavy.
FastAPI, SQLAlchemy and prometheus-client are imported by the submodules that need them
(``app``, ``db``, ``services``, ``api``), which only the ``serve`` and job commands load.

Layout (allowed imports point downwards):

* ``settings``, ``paths``: configuration (pydantic-settings) and where local data lives;
* ``db``: SQLAlchemy models, the ``Database`` handle, Alembic migrations;
* ``services``: keyword-only functions taking the session explicitly, plus the scheduling loop;
* ``api``: FastAPI routes that only call services; ``app.create_app`` wires everything;
* ``dispatch``, ``costing``: plug-in interfaces (backends that run placed jobs, cost scores);
* ``client``: what the CLI talks to, a remote server or the local embedded store.
"""
