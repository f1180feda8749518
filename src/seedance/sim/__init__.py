"""Trace-driven simulation: a discrete-event engine and the inflation and replay experiments."""
