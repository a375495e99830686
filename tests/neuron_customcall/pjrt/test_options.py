"""The compile-options reader against jaxlib's own CompileOptions serializer, and the device list."""
from __future__ import annotations

import numpy as np
import pytest

from neuron_customcall.pjrt import devices, options


def _jaxlib_options(**kw):
    from jax._src.lib import xla_client as xc

    o = xc.CompileOptions()
    for k, v in kw.items():
        setattr(o, k, v)
    return xc, o


def test_defaults():
    _, o = _jaxlib_options()
    got = options.parse(o.SerializeAsString())
    assert (got.num_replicas, got.num_partitions, got.device_ids) == (1, 1, [0])
    assert not got.parameter_is_tupled_arguments and got.argument_layouts == []


def test_replicas_partitions_and_device_assignment():
    xc, o = _jaxlib_options(num_replicas=2, num_partitions=3)
    o.device_assignment = xc.DeviceAssignment.create(np.array([[5, 1, 2], [3, 4, 0]]))
    got = options.parse(o.SerializeAsString())
    assert (got.num_replicas, got.num_partitions) == (2, 3)
    assert got.device_assignment == [[5, 1, 2], [3, 4, 0]]
    assert got.device_ids == [5, 1, 2, 3, 4, 0]


def test_one_device_assignment_names_the_device():
    xc, o = _jaxlib_options()
    o.device_assignment = xc.DeviceAssignment.create(np.array([[1]]))
    assert options.parse(o.SerializeAsString()).device_ids == [1]


def test_argument_layouts():
    xc, o = _jaxlib_options(parameter_is_tupled_arguments=True)
    o.argument_layouts = [xc.Shape.array_shape(np.dtype(np.float32), (2, 3), (1, 0)),
                          xc.Shape.array_shape(np.dtype(np.float32), (2, 3), (0, 1))]
    got = options.parse(o.SerializeAsString())
    assert got.parameter_is_tupled_arguments
    assert [options.is_default_layout(s) for s in got.argument_layouts] == [True, False]
    assert list(got.argument_layouts[1].dimensions) == [2, 3]


@pytest.mark.parametrize("data", [b"\x18", b"\x1a\x05\x20", b"\x0f"])
def test_malformed_options_are_a_clear_error(data):
    with pytest.raises(options.OptionsFormatError):
        options.parse(data)


@pytest.mark.parametrize("env, cores", [
    ({}, [0, 1]),
    ({"NEURON_RT_NUM_CORES": "4"}, [0, 1, 2, 3]),
    ({"NEURON_RT_VISIBLE_CORES": "3"}, [3]),
    ({"NEURON_RT_VISIBLE_CORES": "0-1,4,6-7", "NEURON_RT_NUM_CORES": "9"}, [0, 1, 4, 6, 7]),
])
def test_visible_cores(env, cores):
    assert devices.visible_cores(env) == cores


@pytest.mark.parametrize("env", [{"NEURON_RT_VISIBLE_CORES": "a"}, {"NEURON_RT_VISIBLE_CORES": "3-1"},
                                 {"NEURON_RT_VISIBLE_CORES": "1,1"}, {"NEURON_RT_NUM_CORES": "0"},
                                 {"NEURON_RT_NUM_CORES": "two"}])
def test_bad_core_settings_are_named(env):
    with pytest.raises(devices.DeviceConfigError, match=next(iter(env))):
        devices.visible_cores(env)
