"""Control-plane services: keyword-only functions taking the session (and the caller) explicitly.

Routes and the CLI's local mode call these and nothing else; every authorisation check lives
here, so both paths enforce the same rules.
"""
