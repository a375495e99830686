"""The opcode spellings HLO text uses (XLA's HloOpcodeString), as stored in HloInstructionProto.opcode.

Checked against jaxlib 0.10.2's parser, which knows exactly these 133; an opcode outside the set is
a parse error, as it is for XLA.
"""
from __future__ import annotations

__all__ = ["OPCODES"]

OPCODES = frozenset((
    'abs', 'acos', 'acosh', 'add', 'add-dependency', 'after-all', 'all-gather',
    'all-gather-done', 'all-gather-start', 'all-reduce', 'all-reduce-done', 'all-reduce-start',
    'all-to-all', 'and', 'asin', 'asinh', 'async-done', 'async-start', 'async-update', 'atan2',
    'atanh', 'batch-norm-grad', 'batch-norm-inference', 'batch-norm-training', 'bitcast',
    'bitcast-convert', 'broadcast', 'call', 'cbrt', 'ceil', 'cholesky', 'clamp',
    'count-leading-zeros', 'collective-broadcast', 'collective-permute',
    'collective-permute-done', 'collective-permute-start', 'compare', 'complex', 'concatenate',
    'conditional', 'constant', 'convert', 'convolution', 'copy', 'copy-done', 'copy-start',
    'cosine', 'cosh', 'custom-call', 'divide', 'domain', 'dot', 'dynamic-reshape',
    'dynamic-slice', 'dynamic-update-slice', 'erf', 'exponential', 'exponential-minus-one',
    'fft', 'floor', 'fusion', 'gather', 'get-dimension-size', 'get-tuple-element', 'imag',
    'infeed', 'iota', 'is-finite', 'log', 'log-plus-one', 'logistic', 'map', 'maximum',
    'minimum', 'mulhi', 'multiply', 'negate', 'not', 'opt-barrier', 'or', 'outfeed', 'pad',
    'parameter', 'partition-id', 'popcnt', 'power', 'ragged-all-to-all', 'ragged-dot', 'real',
    'recv', 'recv-done', 'reduce', 'reduce-precision', 'reduce-scatter', 'reduce-window',
    'remainder', 'replica-id', 'reshape', 'reverse', 'rng', 'rng-bit-generator',
    'rng-get-and-update-state', 'round-nearest-afz', 'round-nearest-even', 'rsqrt',
    'scaled-dot', 'scan', 'scatter', 'select', 'select-and-scatter', 'send', 'send-done',
    'set-dimension-size', 'shift-left', 'shift-right-arithmetic', 'shift-right-logical', 'sign',
    'sine', 'sinh', 'slice', 'sort', 'sqrt', 'stochastic-convert', 'subtract', 'tan', 'tanh',
    'topk', 'transpose', 'triangular-solve', 'tuple', 'while', 'xor',
))
