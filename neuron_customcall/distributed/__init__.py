"""Emulated NeuronCores of several processes as one world, over torch.distributed.

`GlooCommunicator` is the emulator's Communicator protocol (emulator.collectives.comm) carried by
torch.distributed's gloo backend (TCP): `torchrun`'s rendezvous and environment variables make
the world, so the collectives of a program run by every process meet across processes and hosts.
`run_on_process_group` runs one device's part of a program in each process.
"""
from neuron_customcall.distributed.gloo import GlooCommunicator, run_on_process_group

__all__ = ["GlooCommunicator", "run_on_process_group"]
