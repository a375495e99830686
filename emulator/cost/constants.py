"""Every constant of the NeuronCore-v2 (trn1) cost model, in one place, with its source.

Sources: ../shared/reference/nki-api.md ("Hardware", nc_matmul), the public Neuron docs cited in
docs/cost-model.md, and stated assumptions. The GpSimd constants live in emulator/gpsimd/cost.py
(one definition); the clock is taken from there so both models run at the same frequency.
"""
from __future__ import annotations

from emulator.gpsimd.cost import CLOCK_HZ as GPSIMD_CLOCK_HZ
from emulator.machine import GEMM_MOVING_FMAX, GEMM_STATIONARY_FMAX, NUM_PARTITIONS

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
#: (public Trainium architecture page); one core's share of HBM, 410 GB/s, bounds its DMA.
HBM_BYTES_PER_SECOND_PER_CORE: float = 820e9 / 2
DMA_BYTES_PER_CYCLE: float = HBM_BYTES_PER_SECOND_PER_CORE / CLOCK_HZ
#: Fixed latency of one DMA transfer (assumption: about 1 us of descriptor processing).
DMA_FIXED_CYCLES: float = 1400.0

#: Collectives (emulator/cost/neuronlink.py). A trn1 chip holds two NeuronCore-v2 (Trainium
#: architecture page).
CORES_PER_CHIP: int = 2
#: NeuronLink-v2 device-to-device bandwidth of trn1.32xlarge: 384 GiB/s per device (chip) (the
#: trn1 architecture page's instance table, column "NeuronLink-v2 device-to-device
#: (GiB/sec/device)"; trn1n.32xlarge: 768), shared by the ring hops that leave the chip.
NEURONLINK_BYTES_PER_SECOND_PER_CHIP: float = 384 * 2**30
#: Between the two cores of one chip (assumption: no published figure; the data moves by DMA
#: through the chip's HBM, so a core's share of HBM bandwidth bounds it, as for DMA).
INTRA_CHIP_BYTES_PER_SECOND: float = HBM_BYTES_PER_SECOND_PER_CORE
#: Latency of one ring step (hop): "the per-hop latency of Ring/KangaRing is about 1-2 us (HBM
#: load dependent)" (Neuron runtime, intra-node collective communication); the middle, 1.5 us.
HOP_LATENCY_S: float = 1.5e-6
