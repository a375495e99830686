"""Several emulated NeuronCores: which device a thread runs as (context), how devices exchange
arrays (comm: the Communicator protocol; local: devices as threads), who takes part in a
collective (groups: XLA's group modes) and how a program runs on many devices (run)."""
from __future__ import annotations

from emulator.collectives.comm import CollectiveError, CollectiveTimeout, Communicator, SoloCommunicator
from emulator.collectives.context import DeviceContext, current, running_as
from emulator.collectives.local import ThreadCommunicator
from emulator.collectives.run import run_devices

__all__ = ["CollectiveError", "CollectiveTimeout", "Communicator", "DeviceContext", "SoloCommunicator",
           "ThreadCommunicator", "current", "run_devices", "running_as"]
