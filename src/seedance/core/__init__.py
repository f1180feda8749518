"""Pure domain model: GPU catalog, resource requests, cluster state, decisions, lifecycles.

Nothing here does I/O; numpy is the only heavy dependency.
"""
