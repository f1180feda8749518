"""The control plane's store: models, the ``Database`` handle and Alembic migrations."""
