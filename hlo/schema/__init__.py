"""XLA's HloModuleProto schema, as our own .proto files and their committed generated modules.

Why our own copy rather than the frameworks': neither torch_xla nor jaxlib ships Python classes for
HloModuleProto (their schemas live only inside their C++ libraries), and the `hlo` package must not
import a framework anyway. Message, field and enum names and numbers are XLA's, because they are the
binary and protobuf-text wire format; the package is `xla` for the same reason (text dumps and
`Any` type URLs name it). The field list matches what jaxlib 0.10.2 was built with and is a superset
of torch_xla 2.9's except where XLA itself renumbered (see the comments in the .proto files).

Regenerate the modules with ``python tools/gen_proto.py``; the schema tests check that the
committed files equal a fresh build and that live modules from both frameworks decode with no
unknown field.
"""

from hlo.schema import hlo_pb2, xla_data_pb2

__all__ = ["hlo_pb2", "xla_data_pb2"]
