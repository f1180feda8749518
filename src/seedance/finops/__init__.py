"""FinOps ledger: OpenCost-style allocation in which every dollar is attributed.

Usage samples (from the node sampler, or a replay of a trace) are accumulated per node and ledger
window (:mod:`.ingest`), priced (:mod:`.prices`: catalog list prices, a price book file, or a
cluster's own contract normalised as OpenCost does) and written to the store's ledger, replacing
the node-window (:mod:`.ledger`). Queries (:mod:`.allocation`) aggregate by any property or cost
tag, keep idle as its own ``__idle__`` line or share it, distribute shared namespaces and
overhead, and answer in OpenCost's idiom; :mod:`.explain` decomposes a change between two windows.
"""
