"""HTTP API: routes that only call services; dependencies; error mapping; middleware."""
