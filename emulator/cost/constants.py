"""Every constant of the NeuronCore-v2 (trn1) cost model, in one place, with its source.

Sources: ../shared/reference/nki-api.md ("Hardware", nc_matmul), the public Neuron docs cited in
docs/cost-model.md, and stated assumptions. The GpSimd constants live in emulator/gpsimd/cost.py
(one definition); the clock is taken from there so both models run at the same frequency.
"""
from __future__ import annotations

from emulator.gpsimd.cost import CLOCK_HZ as GPSIMD_CLOCK_HZ
from emulator.machine import GEMM_MOVING_FMAX, GEMM_STATIONARY_FMAX, NUM_PARTITIONS
from emulator.platforms import PLATFORMS

#: The chip whose core the engines' costs model: trn1's NeuronCore-v2.
_CORE_CHIP = PLATFORMS["trn1"]

#: Engine clock. The public docs give no frequency; 1.4 GHz is the assumption shared with the
#: GpSimd model (emulator/gpsimd/cost.py).
CLOCK_HZ: float = GPSIMD_CLOCK_HZ

#: TensorE: 128x128 systolic array; contraction (K) on the partitions, stationary free <= 128,
#: moving free <= 512 (nki-api.md "Hardware", emulator/machine.py).
TENSOR_PARTITIONS: int = NUM_PARTITIONS
STATIONARY_FMAX: int = GEMM_STATIONARY_FMAX
MOVING_FMAX: int = GEMM_MOVING_FMAX
#: nc_matmul costs max(min(MATMUL_MIN_STATIONARY, N_stationary), N_moving) cycles (nki-api.md).
MATMUL_MIN_STATIONARY: int = 64
#: ... four times that for fp32 inputs (nki-api.md).
FP32_MATMUL_FACTOR: int = 4

#: VectorE and ScalarE process one element per partition lane per cycle: 128 elements a cycle
#: (assumption from the 128-partition layout; the published 2.3 / 2.9 FP32 TFLOPS are peaks).
VECTOR_ELEMENTS_PER_CYCLE: float = float(NUM_PARTITIONS)
SCALAR_ELEMENTS_PER_CYCLE: float = float(NUM_PARTITIONS)
#: Fixed cost of issuing one compute-engine instruction (assumption: pipeline fill / semaphores).
INSTRUCTION_OVERHEAD_CYCLES: float = 64.0

#: DMA: a trn1 chip (2 NeuronCore-v2) has 820 GB/s of HBM bandwidth and 1 TB/s of DMA bandwidth
#: (public Trainium architecture page; emulator/platforms.py holds the chip's facts); one core's
#: share of HBM, 410 GB/s, bounds its DMA. The core is a NeuronCore-v2 on every platform (the
#: platform option changes topology and collectives, not the core: docs/cost-model.md).
HBM_BYTES_PER_SECOND_PER_CORE: float = (_CORE_CHIP.hbm_bytes_per_second_per_chip
                                        / _CORE_CHIP.physical_cores_per_chip)
DMA_BYTES_PER_CYCLE: float = HBM_BYTES_PER_SECOND_PER_CORE / CLOCK_HZ
#: Fixed latency of one DMA transfer (assumption: about 1 us of descriptor processing).
DMA_FIXED_CYCLES: float = 1400.0

#: Collectives (emulator/cost/neuronlink.py): cores per chip, HBM, DMA and NeuronLink rates are
#: the selected platform's (emulator/platforms.py). Latency of one ring step (hop): "the per-hop
#: latency of Ring/KangaRing is about 1-2 us (HBM load dependent)" (Neuron runtime, intra-node
#: collective communication); the middle, 1.5 us, on every platform.
HOP_LATENCY_S: float = 1.5e-6
