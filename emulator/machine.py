"""Machine-model facts of one NeuronCore-v2 (trn1) that the emulator and the NKI checks rely on.

Every number here comes from ../shared/reference/nki-api.md ("Hardware" and "nl.tile_size"); keep
them in this one module so the checks, the executor and the docs can never disagree.
"""

from __future__ import annotations

import numpy as np

#: The NeuronCore generation whose semantics the emulated core executes: NeuronCore-v2 (NKI's
#: nc_version.gen2), on every platform. NEURON_PLATFORM_TARGET_OVERRIDE=trn2 (emulator/platforms.py)
#: changes the device topology and the collectives' costs, not this (docs/pjrt.md, "trn2").
NC_GENERATION: int = 2
#: Partitions of SBUF and PSUM; the first dimension of an on-chip tile may not exceed it.
NUM_PARTITIONS: int = 128
#: SBUF is 24 MiB = 128 partitions x 192 KiB.
SBUF_BYTES_PER_PARTITION: int = 192 * 1024
#: PSUM is 2 MiB = 128 partitions x 16 KiB, in 8 banks of 2 KiB per partition.
PSUM_BYTES_PER_PARTITION: int = 16 * 1024
PSUM_BANK_BYTES_PER_PARTITION: int = 2 * 1024
PSUM_NUM_BANKS: int = PSUM_BYTES_PER_PARTITION // PSUM_BANK_BYTES_PER_PARTITION
#: A PSUM tile holds at most one bank: 512 fp32 elements per partition.
PSUM_FMAX: int = PSUM_BANK_BYTES_PER_PARTITION // 4
#: TensorE: stationary (weights) free size <= 128, moving free size <= 512.
GEMM_STATIONARY_FMAX: int = 128
GEMM_MOVING_FMAX: int = 512
#: SBUF bytes per partition the compiler keeps for itself (NKI's sbuf.alloc reference: a tile's
#: byte address is below 192 KiB - 16 KiB); the rest is what a kernel may use.
SBUF_RESERVED_BYTES_PER_PARTITION: int = 16 * 1024
SBUF_USABLE_BYTES_PER_PARTITION: int = SBUF_BYTES_PER_PARTITION - SBUF_RESERVED_BYTES_PER_PARTITION
#: bn_stats reads at most 512 elements per partition (nki.isa.bn_stats: nl.tile_size.bn_stats_fmax).
BN_STATS_FMAX: int = 512
#: Byte alignment of a tile's free-dimension address in PSUM (4) and SBUF (1).
PSUM_MIN_ALIGN: int = 4
SBUF_MIN_ALIGN: int = 1
#: nc_transpose limits: TensorE up to 128x128, VectorE up to 32x32.
TENSOR_ENGINE_TRANSPOSE_MAX: int = 128
VECTOR_ENGINE_TRANSPOSE_MAX: int = 32
#: max8 reads 8 to 16384 elements per partition (AWS ISA reference, nki.isa.max8).
MAX8_MIN_FREE: int = 8
MAX8_MAX_FREE: int = 16384

#: The engines of a NeuronCore, by the names the cost model's timelines and the kernel IR's
#: instruction specs use (emulator/cost/engines.py, emulator/kernel_ir/instructions.py).
TENSOR = "tensor"
VECTOR = "vector"
SCALAR = "scalar"
GPSIMD = "gpsimd"
DMA = "dma"
ENGINES: tuple[str, ...] = (TENSOR, VECTOR, SCALAR, GPSIMD, DMA)

#: Memory spaces as the kernel IR names them.
HBM = "hbm"
SHARED_HBM = "shared_hbm"
SBUF = "sbuf"
PSUM = "psum"
ON_CHIP = frozenset({SBUF, PSUM})
MEMORY_SPACES = (HBM, SHARED_HBM, SBUF, PSUM)

CAPACITY_PER_PARTITION: dict[str, int] = {
    SBUF: SBUF_BYTES_PER_PARTITION,
    PSUM: PSUM_BYTES_PER_PARTITION,
}


def uninitialised(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """New on-chip storage as the SDK's CPU simulator gives it: NaN for floating-point dtypes, so
    reads of memory nobody wrote show up in results; zeros for integers and booleans (they have no
    NaN)."""
    dtype = np.dtype(dtype)
    return np.full(shape, uninitialised_value(dtype), dtype=dtype)


def uninitialised_value(dtype: np.dtype) -> float | int:
    """What ``uninitialised`` fills with: NaN for floats, 0 for integers and booleans."""
    return np.nan if _is_float(np.dtype(dtype)) else 0


def _is_float(dtype: np.dtype) -> bool:
    """True for NumPy floats and for the ml_dtypes floats (bfloat16, fp8): user-defined dtypes
    of kind 'V' or 'f'."""
    return dtype.kind == "f" or (dtype.isbuiltin != 1 and dtype.kind == "V")
