"""The plugin library itself, loaded with ctypes in a fresh process: its version, a complete
function table, and the error a framework gets from a call we do not support."""
from __future__ import annotations

from textwrap import dedent

from tests.neuron_customcall.pjrt._proc import run_json

LOAD = """
import ctypes
from neuron_customcall.pjrt import library_path
lib = ctypes.CDLL(library_path())
lib.GetPjrtApi.restype = ctypes.c_void_p
api = lib.GetPjrtApi()
words = (ctypes.c_uint64 * 120).from_address(api)
"""


def test_version_and_complete_table():
    got = run_json(LOAD + dedent("""
        version = (ctypes.c_int * 2).from_address(api + 16 + 16)
        report(struct_size=words[0], version_size=words[2], major=version[0], minor=version[1],
               null_slots=[k for k in range(115) if words[5 + k] == 0])
    """), platforms="cpu")
    # PJRT C API 0.75: the newest minor torch_xla 2.9 (built at 0.75) and jaxlib 0.10 (0.112, with
    # compatibility down to 0.29) both accept; 115 functions after a 40-byte header.
    assert got == {"struct_size": 960, "version_size": 24, "major": 0, "minor": 75, "null_slots": []}


def test_unsupported_call_is_an_error_naming_it():
    got = run_json(LOAD + dedent("""
        FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
        slot = lambda k: FN(words[5 + k])
        TOPOLOGY_CREATE, ERROR_MESSAGE, ERROR_GETCODE, ERROR_DESTROY = 82, 1, 2, 0
        args = (ctypes.c_uint64 * 8)()
        args[0] = 56
        err = slot(TOPOLOGY_CREATE)(ctypes.addressof(args))
        msg = (ctypes.c_uint64 * 5)(40, 0, err, 0, 0)
        slot(ERROR_MESSAGE)(ctypes.addressof(msg))
        text = ctypes.string_at(msg[3], msg[4]).decode()
        code = (ctypes.c_uint64 * 4)(32, 0, err, 0)
        slot(ERROR_GETCODE)(ctypes.addressof(code))
        slot(ERROR_DESTROY)(ctypes.addressof((ctypes.c_uint64 * 3)(24, 0, err)))
        report(text=text, code=int(code[3] & 0xffffffff))
    """), platforms="cpu")
    assert got == {"text": "neuron: PJRT_TopologyDescription_Create is not supported by the neuron PJRT plugin",
                   "code": 12}  # UNIMPLEMENTED
