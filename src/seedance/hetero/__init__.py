"""Heterogeneous fleet: throughput matrix, stages, round-based allocation, replay, migration planner, live migration."""
