"""Names of the functions an ELF64 shared object defines, read from its .dynsym section.

The compute function of an op is registered by name only (``m.def(..., "relu_forward")``), so the
emulator looks its mangled symbol up in the built library itself; reading the symbol table avoids
any parsing of the user's C++ and works on library bytes as well as on files.
"""

from __future__ import annotations

import struct

_SHT_DYNSYM = 11
_STT_FUNC = 2
_SYM_SIZE = 24


def defined_functions(image: bytes) -> list[str]:
    """Returns the names of the defined function symbols in a little-endian ELF64 image."""
    if image[:4] != b"\x7fELF" or image[4] != 2 or image[5] != 1:
        raise ValueError("not a little-endian ELF64 shared object")
    shoff, = struct.unpack_from("<Q", image, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", image, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", image, shoff + k * shentsize) for k in range(shnum)
    ]
    names: list[str] = []
    for sh in sections:
        if sh[1] != _SHT_DYNSYM:
            continue
        strtab = sections[sh[6]]
        str_off = strtab[4]
        for pos in range(sh[4], sh[4] + sh[5], _SYM_SIZE):
            st_name, st_info, _other, st_shndx = struct.unpack_from("<IBBH", image, pos)
            if st_shndx == 0 or (st_info & 0xF) != _STT_FUNC:
                continue
            end = image.index(b"\0", str_off + st_name)
            names.append(image[str_off + st_name : end].decode("ascii", "replace"))
    return names


def symbols_for(function: str, names: list[str]) -> list[str]:
    """The symbols that can be the free function `function`: its Itanium-mangled forms
    (``_Z<len><name><params>``) or an ``extern "C"`` definition."""
    prefix = f"_Z{len(function)}{function}"
    return [n for n in names if n == function or (n.startswith(prefix) and len(n) > len(prefix))]
