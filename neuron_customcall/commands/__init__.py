"""Subcommands of the `neuron-customcall` command line, one module each; importing this package
registers them all."""
from neuron_customcall.commands import cache_cmd, compile_cmd, hlo_cmd, inspect_cmd, profile_cmd, run_cmd  # noqa: F401
