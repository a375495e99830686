"""Element type names as HLO text spells them (`f32`, `bf16`, `pred`, `token`...), both ways.

Derived from the schema's PrimitiveType enum rather than listed by hand, so a type added to the
schema is readable at once: the text name is the enum name in lower case, except `opaque` for
OPAQUE_TYPE.
"""
from __future__ import annotations

from typing import Dict

from hlo.schema import xla_data_pb2

__all__ = ["TYPE_BY_NAME", "NAME_BY_TYPE", "ARRAY_TYPES", "FLOAT_TYPES", "SIGNED_TYPES", "COMPLEX_TYPES"]

_PT = xla_data_pb2.PrimitiveType
_NOT_TEXT = {"PRIMITIVE_TYPE_INVALID", "TUPLE", "BUFFER"}

TYPE_BY_NAME: Dict[str, int] = {}
for _name, _value in _PT.items():
    if _name in _NOT_TEXT:
        continue
    TYPE_BY_NAME["opaque" if _name == "OPAQUE_TYPE" else _name.lower()] = _value
NAME_BY_TYPE: Dict[int, str] = {v: k for k, v in TYPE_BY_NAME.items()}

#: Types that have dimensions (everything but token and opaque).
ARRAY_TYPES = frozenset(v for k, v in TYPE_BY_NAME.items() if k not in ("token", "opaque"))
COMPLEX_TYPES = frozenset(TYPE_BY_NAME[n] for n in ("c64", "c128") if n in TYPE_BY_NAME)
FLOAT_TYPES = frozenset(
    v for k, v in TYPE_BY_NAME.items() if k.startswith("f") or k == "bf16"
)
SIGNED_TYPES = frozenset(v for k, v in TYPE_BY_NAME.items() if k.startswith("s"))
