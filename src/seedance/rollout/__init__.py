"""Progressive delivery of cost actions: OpenFeature flags (flagd file provider), canaries, SLI breakers.

``config`` holds the canary settings (whitepaper thresholds by default), ``flags`` validates flagd
flag files and writes a flag's canary / promoted / rolled-back states, ``evaluator`` is the
OpenFeature client, ``sli`` turns Prometheus scrapes into windowed P95 and 5xx share, ``canary`` is
the controller, ``metrics`` its Prometheus counters, ``events`` where it records what it did,
``demo`` a service with fault injection and a load generator, ``measure`` the external timing.
"""
