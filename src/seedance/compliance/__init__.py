"""Compliance rules as code: policy documents checked against GDPR and GB/T 22239-2019 clauses.

``document`` parses a policy with key positions and suppressions, ``rule`` holds the rule interface
and registry (rules in ``rules/``, one module each), ``facts`` the running control plane's evidence,
``engine`` runs the rules into a report, ``sarif`` writes SARIF 2.1.0 and ``table`` the terminal view.
"""
