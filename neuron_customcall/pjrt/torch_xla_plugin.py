"""torch_xla's device plugin for ``PJRT_DEVICE=NEURON`` (``torch_xla.plugins`` entry point).

torch_xla loads every ``torch_xla.plugins`` entry point while it is imported, registers each under
its upper-cased name, and on the first use of a device asks that device's plugin for its PJRT
library (``library_path``). torch_xla ships a ``neuron`` entry point of its own, whose
``library_path`` imports ``libneuronxla`` (the SDK's) before it even looks at
``NEURON_LIBRARY_PATH``, so it fails on any host without the real SDK; and the order in which two
entry points of one name load is the order of directories on ``sys.path``, which we do not
control. So this module, when loaded, also rebinds ``torch_xla._internal.neuron.NeuronPlugin`` to
ours: whichever of the two entry points loads last, the plugin registered for NEURON is ours.

Loading it costs nothing on other devices: it imports nothing beyond what torch_xla has already
imported at that point; the plugin library is found (and built if needed) only when torch_xla
starts the NEURON client. A framework adapter module: it may import torch_xla.

Several processes (docs/pjrt.md, "Several processes"): under torchrun, ``library_path`` (and
``configure_multiprocess``, which torch_xla's ``xla://`` rendezvous calls) writes what torch_xla's
own Neuron set-up writes (world.configure_torchrun: one core per local rank, index RANK); for
``xmp.spawn``, ``physical_chip_count`` starts one process per core and ``configure_multiprocess``
gives each child its index and core.

Starting the NEURON client also imports the torch_xla adapter (``neuron_customcall.torch_xla``),
which gives every C++ op (loaded before or after) its XLA kernel: an HLO custom-call in the step's
graph. Without it an unmodified script that loads its ops with ``custom_op.load`` and never imports
the adapter ran each op through torch_xla's CPU fallback: a graph execution, a device-to-host and a
host-to-device transfer per call (the main job: five executions a step instead of one).
"""
from __future__ import annotations

import os
import socket

import torch_xla._internal.neuron as _torch_xla_neuron
from torch_xla.experimental import plugins


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NeuronPlugin(plugins.DevicePlugin):
    """The emulated NeuronCores of neuron_customcall.pjrt as torch_xla's NEURON device."""

    def library_path(self) -> str:
        """``NEURON_LIBRARY_PATH`` when set (torch_xla's own variable), else our plugin library.
        Called as the client starts: under torchrun, the world's variables are written first."""
        import neuron_customcall.torch_xla  # noqa: F401  (XLA kernels of C++ and NKI ops; see above)

        from neuron_customcall.pjrt import world

        world.configure_torchrun()
        override = os.environ.get("NEURON_LIBRARY_PATH")
        if override:
            return override
        from neuron_customcall.pjrt import library_path

        return library_path()

    def configure_single_process(self) -> None:
        """One process drives every NeuronCore the plugin lists: nothing to set."""

    def physical_chip_count(self) -> int:
        """The processes ``xmp.spawn`` starts (in its parent): one per NeuronCore
        (``NEURONCORE_NUM_DEVICES``, else the visible cores), described to the children by
        NEURON_PJRT_PROCESSES_NUM_DEVICES; their collectives meet at NEURON_RT_ROOT_COMM_ID
        (localhost and a free port unless set)."""
        from neuron_customcall.pjrt import devices

        count = os.environ.get("NEURONCORE_NUM_DEVICES", "").strip()
        n = int(count) if count else len(devices.visible_cores())
        os.environ["NEURON_PJRT_PROCESSES_NUM_DEVICES"] = ",".join(["1"] * n)
        os.environ.setdefault("NEURON_RT_ROOT_COMM_ID", f"localhost:{_free_port()}")
        return n

    def configure_multiprocess(self, local_rank: int, local_world_size: int) -> None:
        """In each ``xmp.spawn`` child: its index and its one core. torch_xla calls this under
        torchrun too (``init_process_group("xla", init_method="xla://")``), where the index is
        the global RANK, not the local one: that case is configure_torchrun's."""
        from neuron_customcall.pjrt import world

        if os.environ.get("TORCHELASTIC_RUN_ID"):
            world.configure_torchrun()
            return
        os.environ["NEURON_PJRT_PROCESS_INDEX"] = str(local_rank)
        world.one_core_each(os.environ, local_rank, local_world_size)


_torch_xla_neuron.NeuronPlugin = NeuronPlugin
