"""The matmul kind's plan: one producer warpgroup feeding a ring of stages with TMA, consumer
warpgroups of 64-row wgmmas, and the register budget setmaxnreg splits between them."""

from __future__ import annotations

from dataclasses import dataclass

from tmagen.planning import PATTERN_ALIGN, KernelPlan, MapSpec, RegisterBudget, box_layout, box_stride, operand_tile
from tmagen.spec import MatmulKernel, MmaSpec, Spec

REGISTERS_PER_SM = 65536
PRODUCER_REGISTERS = 56  # the producer warpgroup only issues copies (40 made ptxas spill its loop state)
MAX_CONSUMER_REGISTERS = 240
MAX_THREAD_REGISTERS = 255
REGISTER_ALLOCATION_UNIT = 8  # registers per thread: the hardware allots 256 per warp (CUDA occupancy calculator,
# compute capability 9.0); setmaxnreg counts are multiples of 8 too (PTX ISA, setmaxnreg)
REGISTERS_BESIDE_ACCUMULATORS = 32  # addresses, descriptors, loop state, the epilogue (128 + 32 fit in 168: ptxas)
C_STAGING_BUFFERS = 2  # per consumer: one being filled while TMA stores the other
PTX_TYPES = {"bfloat16": "bf16", "float16": "f16"}


@dataclass(frozen=True)
class MatmulPlan:
    """The blocks of the matmul: one producer warpgroup, ``consumers`` warpgroups of 64-row wgmmas."""

    bm: int
    bn: int
    bk: int
    consumers: int
    stages: int
    raster_group: int
    a_stage_bytes: int  # the A boxes of one stage, box stride apart
    b_stage_bytes: int
    c_stride: int  # bytes between the epilogue's C staging buffers
    accumulators: int  # fp32 registers of accumulators per consumer thread
    b_major: str = "k"  # "k": B is [N, K]; "mn": B is [K, N]

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + 1)

    @property
    def rows_per_consumer(self) -> int:
        return self.bm // self.consumers

    @property
    def m_blocks(self) -> int:
        """64-row wgmmas each consumer issues per K step."""
        return self.rows_per_consumer // 64

    @property
    def stage_bytes(self) -> int:
        return self.a_stage_bytes + self.b_stage_bytes

    @property
    def smem_bytes(self) -> int:
        return self.stages * self.stage_bytes + self.consumers * self.c_buffers * self.c_stride + PATTERN_ALIGN

    @property
    def consumer_registers(self) -> int:
        return consumer_registers(self.consumers)

    @property
    def setmaxnreg_consumers(self) -> int:
        """What the consumers ask setmaxnreg for: the register file the producer gives up."""
        return setmaxnreg_consumers(self.consumers)

    @property
    def producer_registers(self) -> int:
        return PRODUCER_REGISTERS

    @property
    def launch_registers(self) -> int:
        """Registers per thread the block must be launched with for the split to balance: what the
        producer warpgroup gives up (down to ``producer_registers``) covers what the consumers take
        (up to ``setmaxnreg_consumers``). setmaxnreg.inc waits until the block's pool has them."""
        need = 128 * (self.producer_registers + self.consumers * self.setmaxnreg_consumers)
        return -(-need // (self.threads * REGISTER_ALLOCATION_UNIT)) * REGISTER_ALLOCATION_UNIT

    @property
    def register_budget(self) -> RegisterBudget:
        """What ptxas's register count must be for this split (checked by `tmagen build --compile`)."""
        split = (f"128 producer threads at {self.producer_registers} and {128 * self.consumers} consumer threads at "
                 f"{self.setmaxnreg_consumers} take {self.threads} threads x {self.launch_registers}")
        return RegisterBudget(self.launch_registers, self.consumer_registers, REGISTER_ALLOCATION_UNIT, split)

    @property
    def c_buffers(self) -> int:
        """C staging buffers per consumer."""
        return C_STAGING_BUFFERS


def setmaxnreg_consumers(consumers: int) -> int:
    """The rest of the register file after the producer's, per consumer thread, in steps of 8."""
    free = (REGISTERS_PER_SM - 128 * PRODUCER_REGISTERS) // (128 * consumers)
    return min(MAX_CONSUMER_REGISTERS, free // 8 * 8)


def consumer_registers(consumers: int) -> int:
    """Registers a consumer thread can count on: what setmaxnreg gives it (the rest of the register
    file, in steps of 8), but no more than ptxas allots every thread of the block under its launch
    bounds, since it compiles the wgmmas within that (a 3-consumer block of 512 threads gets 128:
    'Insufficient registers' for a 64 x 256 accumulator, seen in the reliability campaign)."""
    launch_cap = min(MAX_THREAD_REGISTERS, REGISTERS_PER_SM // (128 * (consumers + 1)) // 8 * 8)
    return min(setmaxnreg_consumers(consumers), launch_cap)


def accumulators(bm: int, bn: int, consumers: int) -> int:
    """fp32 accumulator registers per consumer thread: its rows x BN over 128 threads."""
    return bm // consumers * bn // 128


def maps(spec: Spec) -> list[MapSpec]:
    """a, b and c, A and B read by wgmma (A K-major, B as b_major says)."""
    k = spec.kernel
    assert isinstance(k, MatmulKernel)
    (ia, a), (ib, b), (ic, c) = spec.tensor(k.a), spec.tensor(k.b), spec.tensor(k.c)
    b_mn = b.box[0] if k.b_major == "k" else b.box[1]
    return [MapSpec(role="a", tensor=a, index=ia, mma=MmaSpec(operand="a", major="k", mn_boxes=k.tile[0] // a.box[0])),
            MapSpec(role="b", tensor=b, index=ib,
                    mma=MmaSpec(operand="b", major=k.b_major, mn_boxes=k.tile[1] // b_mn)),
            MapSpec(role="c", tensor=c, index=ic, stores=True)]


def plan(spec: Spec, maps: list[MapSpec]) -> tuple[KernelPlan, ...]:
    k = spec.kernel
    assert isinstance(k, MatmulKernel)
    bm, bn, bk = k.tile
    a_map, b_map, c_map = maps
    a, b = operand_tile(a_map, box_layout(a_map)), operand_tile(b_map, box_layout(b_map))
    assert a is not None and b is not None
    p = MatmulPlan(bm, bn, bk, k.consumers, k.stages, k.raster_group,
                   a_stage_bytes=a.stride * a.mn_boxes * (bk // a.k_per_box),
                   b_stage_bytes=b.stride * b.mn_boxes * (bk // b.k_per_box),
                   c_stride=box_stride(box_layout(c_map)), accumulators=accumulators(bm, bn, k.consumers),
                   b_major=k.b_major)
    return (KernelPlan(f"{spec.name}_matmul", ("a", "b", "c"), p.threads, p.smem_bytes, p.stage_bytes, k.stages,
                       persistent=True, detail=p, barriers=2 * k.stages,  # full and empty
                       registers=p.register_budget),)
