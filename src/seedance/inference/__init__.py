"""LLM serving: task-profile batching (whitepaper §2.1), simulated and executed for real.

Layout: ``model`` (shapes, KV bytes per token), ``trace`` (Azure trace loader), ``perf``
(iteration times from measured profiles), ``memory`` (KV budget, block allocator), ``profiles``
(request profiles, decode-length predictor), ``batchers/`` (registered batching policies),
``routing`` (routers), ``sim`` (the serving simulator), ``metrics``, ``capacity``,
``experiment`` (fair comparisons), ``report`` (HTML), ``executor`` (a real PyTorch model; imports
torch, so nothing here imports it).
"""
