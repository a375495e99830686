"""Subcommands of the `neuron-customcall` command line, one module each; importing this package
registers them all."""
from neuron_customcall.commands import hlo_cmd  # noqa: F401
