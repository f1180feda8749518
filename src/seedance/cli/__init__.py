"""``seedancectl``: the command-line interface."""
