"""The matmul kind's plan: a family of kernels of different tile shapes, each with one producer
warpgroup feeding a ring of stages with TMA and consumer warpgroups of 64-row wgmmas, and the
choice among them (with a split of K) that each launch makes from its M, N and K."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tmagen.dtypes import FP8_NAMES
from tmagen.errors import ModelError
from tmagen.kinds.matmul.dispatch import DISPATCHES, Choice, Dispatch, TileCost, TileShape, table_for
from tmagen.limits import TARGETS
from tmagen.mma import OperandTile
from tmagen.planning import PATTERN_ALIGN, KernelPlan, MapSpec, RegisterBudget, box_layout, box_stride, operand_tile
from tmagen.spec import MatmulKernel, MmaSpec, Spec, TensorSpec

REGISTERS_PER_SM = 65536
PRODUCER_REGISTERS = 56  # the producer warpgroup only issues copies (40 made ptxas spill its loop state)
MAX_CONSUMER_REGISTERS = 240
MAX_THREAD_REGISTERS = 255
REGISTER_ALLOCATION_UNIT = 8  # registers per thread: the hardware allots 256 per warp (CUDA occupancy calculator,
# compute capability 9.0); setmaxnreg counts are multiples of 8 too (PTX ISA, setmaxnreg)
# Addresses, descriptors, loop state, the epilogue (128 + 32 fit in 168: ptxas), and block scales: with
# the consumers' K loop in uniform registers, a stage's scales fit there too. Before it (2026-11-24) ptxas
# spilled 5 to 12 registers' worth of block-scaled 128 x 128 tiles with two sets of partial sums, and 24
# more were counted for them; now (pip nvcc 13.0, 2026-11-28) the block-scaled family of tmagen.ops
# compiles without spills at 32: 128 x 128 with two sets and its promoted sums to R215, 128 x 192 with
# one set to R217 (of 224), 64 x 128 with two sets to R235 (of 240); right on an H200, compute-sanitizer
# clean, and 0.60 to 0.84 of the per-tensor speed at 4096^3 and up (0.56 to 0.76 before).
REGISTERS_BESIDE_ACCUMULATORS = 32
C_STAGING_BUFFERS = 2  # per consumer at least: one being filled while TMA stores the other
# A family tile with fewer stages than this beside two C buffers per consumer takes one buffer, for a
# stage more: 192 x 192 (48 KB a stage) had 3 stages and 3 buffers, now 4 and 1. H100, 2026-11-27,
# interleaved (a scratch probe, bf16, its pairs): 2056^3 38.0 -> 33.9 us, 3000^3 104.2 -> 91.7, 4104^3
# 293 -> 256; the family's measurement (tests/data/hw_h100/matmul_tune.json against the one before)
# had its best 192 x 192 launch 5 to 13% faster on every shape (3000^3 95.6 -> 83.6, 4096^3 213 ->
# 198). The one buffer makes each piece of C wait for the last one's store to leave shared memory.
MIN_RING_STAGES = 4
MAX_FAMILY_STAGES = 12  # deeper rings stop paying once a block has ~100 KB in flight (tmagen tune)
FP8_TYPES = FP8_NAMES  # any pair: wgmma has e4m3 x e5m2 instructions too
DEFAULT_PROMOTE_EVERY = 128  # K between promotions of fp8 partial sums (DeepSeek-V3 technical report, 3.3.2)
SCALE_BLOCK = 128  # block scales: 1 x 128 of A, 128 x 128 of B (DeepSeek-V3 technical report, 3.3.1)

# The tile shapes a family offers beside the spec's own: (BM, BN, consumer warpgroups), the two-
# and one-consumer tiles largest first, then 192 x 192 (kernel 6: added after the others kept
# their indices). Small tiles put more blocks on few rows or columns of C (small M or N); with a
# split of K they fill the GPU where even those are too few.
# 128 x 192 evens out the waves of shapes whose 128 x 256 tiles fill a little over whole waves
# (3072^3: 288 tiles, 2.2 waves on 132 SMs; 384 of 128 x 192, 2.9), and 192 x 192, three consumers
# of 64 rows, those a little over one (2056^3: 153 tiles of 128 x 256, 121 of 192 x 192). Its step
# is about 15% slower than a pair of 128 x 256 tiles' (H200: 207.6 against 177.3 us at 4096^3), so
# the model takes it only where the waves decide.
FAMILY_TILES = ((128, 256, 2), (128, 192, 2), (128, 128, 2), (64, 256, 1), (64, 128, 1), (64, 64, 1), (192, 192, 3))


@dataclass(frozen=True)
class MatmulPlan:
    """One kernel of the family: one producer warpgroup, ``consumers`` warpgroups of 64-row wgmmas
    over a BM x BN tile of C, BK of K per stage."""

    symbol: str
    bm: int
    bn: int
    bk: int
    consumers: int
    stages: int
    raster_group: int
    a_boxes: int  # A boxes side by side along M in a tile
    b_boxes: int  # B boxes side by side along N
    a_stage_bytes: int  # the A boxes of one stage, box stride apart
    b_stage_bytes: int
    c_stride: int  # bytes between the epilogue's C staging buffers
    accumulators: int  # fp32 registers of accumulators per consumer thread (promoted sums included)
    b_major: str = "k"  # "k": B is [N, K]; "mn": B is [K, N]
    a_major: str = "k"  # "k": A is [M, K]; "mn": A is [K, M]
    variant: int = 0  # its index in the family
    instruction_k: int = 16  # K of one wgmma: 16 (16-bit types) or 32 (fp8)
    promote_stages: int = 0  # fp8: stages whose partial sums the tensor core keeps before fp32 takes them; 0: never
    c_buffers: int = C_STAGING_BUFFERS  # C staging buffers per consumer: up to one per piece of its rows
    cluster: int = 1  # CTAs per cluster: tiles one above the other, each CTA loading half of their B boxes
    # (the tile rows the cluster does not divide: side by side, each loading its own)
    b_loads: int = 0  # B's own boxes per stage: what decides its cluster (rule matmul-cluster)
    pipelined: bool = False  # fp8: two sets of partial sums, one stage's promoted while the next one's wgmmas run
    ordered: bool = False  # fp8 block scales, one set: consumers issue each stage's wgmmas in turn (`issue_in_turn`)
    block_scales: bool = False  # fp8: its sums scaled per block as they are promoted (the family's `block_scales`)
    a_map: str = "a"  # the map the producer loads A through: its box is a_load_rows of the tile's rows (`load_rows`)
    b_map: str = "b"
    a_load_rows: int = 0  # M per load of A: its whole BM where its boxes stack (`load_rows`), else its own box's
    b_load_rows: int = 0  # N per load of B: its BN over the cluster's CTAs where its boxes stack, else its own box's

    @property
    def element_bytes(self) -> int:
        """Bytes of an A or B element: one wgmma's K spans 32 bytes of each row."""
        return 32 // self.instruction_k

    @property
    def shape(self) -> TileShape:
        mn_major = "a" * (self.a_major == "mn") + "b" * (self.b_major == "mn")
        return TileShape(self.bm, self.bn, self.bk, self.element_bytes, self.cluster, self.raster_group,
                         self.block_scales, f"mn-{mn_major}" if mn_major else "",
                         fast=self.element_bytes == 1 and self.promote_stages == 0)

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
        return RegisterBudget(self.launch_registers, launch_cap(self.consumers), REGISTER_ALLOCATION_UNIT, split)

    @property
    def partial_floats(self) -> int:
        """fp32 values of one split's partial tile (a split of K leaves them in the workspace)."""
        return self.bm * self.bn


@dataclass(frozen=True)
class MatmulFamily:
    """Every kernel of a matmul spec and how a launch picks one: `choose` (the same arithmetic as
    the C API's), from the measured model in `dispatches`: one table per GPU it was fitted on, each
    launch taking the table of the GPU most like its own (`table_for`)."""

    kernels: tuple[MatmulPlan, ...]
    dispatches: tuple[Dispatch, ...]
    max_splits: int  # splits of K a launch may choose (1: none)
    promote_every: int = 0  # fp8: K between promotions into fp32 registers (0: never, or not fp8)
    block_scales: bool = False  # fp8: A's scales per 1 x 128 block, B's per 128 x 128, applied as sums are promoted
    fp8: bool = False
    stmatrix: bool = False  # the epilogue stores C a 16 x 16 block per stmatrix (16-bit C, boxes of whole 16 columns)
    edge_rows: int = 0  # rows per box of A at M's edge, through the a_rows map (0: A's own boxes there too)
    twins: tuple[int, ...] = ()  # per kernel: the index of its twin in pairs (`tile_clusters`), or -1

    @property
    def b_major(self) -> str:
        return self.kernels[0].b_major

    @property
    def a_major(self) -> str:
        return self.kernels[0].a_major

    @property
    def dispatch(self) -> Dispatch:
        """The first table: the one a launch takes where its GPU is not known."""
        return self.dispatches[0]

    def costs(self, table: int = 0, straddle: bool = False) -> tuple[TileCost, ...]:
        """The model's constants of each kernel in a table (on rows that straddle 32-byte sectors, or
        not), as the C API's choice prints them."""
        return tuple(self.dispatches[table].cost(replace(p.shape, straddle=straddle)) for p in self.kernels)

    def table_for(self, multiprocessors: int, memory_bytes_per_us: int) -> int:
        """The table of the GPU most like one of these multiprocessors and DRAM peak (0: not known)."""
        return table_for(self.dispatches, multiprocessors, memory_bytes_per_us)

    @property
    def pair_min_k_steps(self) -> int:
        """K steps from which a twin in pairs is taken (`pair_pays`)."""
        return PAIR_MIN_K_STEPS

    @property
    def row_sector(self) -> int:
        """Bytes a row must start on a multiple of not to straddle (`rows_straddle`)."""
        return ROW_SECTOR

    def candidates(self, straddle: bool, m: int = 0, k: int = 0, table: int = 0) -> list[int]:
        """The kernels the model chooses among, in order: every kernel but the twins, or, where the
        rows straddle 32-byte sectors (`rows_straddle`), each one's twin in pairs in its place where
        M spans more than one of its tiles and K at least PAIR_MIN_K_STEPS steps (`pair_pays`).
        Where they do not straddle, the twins the table measured on such rows (its ``aligned_pairs``)
        follow, where they pay: after the kernels alone, which the first of equals keeps."""
        twins = self.twins or (-1,) * len(self.kernels)
        kernels = [i for i in range(len(self.kernels)) if i not in twins]
        pays = [i for i in kernels if twins[i] >= 0 and pair_pays(self.kernels[i], m, k)]
        if straddle:
            return [twins[i] if i in pays else i for i in kernels]
        offered = self.aligned_pair(table)
        return kernels + [twins[i] for i in pays if offered[twins[i]]]

    def aligned_pair(self, table: int) -> tuple[bool, ...]:
        """Per kernel: whether the table offers it as a twin on rows that do not straddle (the C
        launcher's ``matmul_costs[table][v].aligned_pair``)."""
        offered = self.dispatches[table].aligned_pairs
        # a block-scaled or MN-major twin is offered where its own key or, as its costs fall back, its base's is
        return tuple(i in self.twins and (p.shape.key in offered or p.shape.base.key in offered)
                     for i, p in enumerate(self.kernels))

    def operand_rows_straddle(self, pointer: int, pitch: int) -> bool:
        """`rows_straddle` of an A or B at ``pointer`` whose rows are ``pitch`` elements apart (the C
        launcher's ``matmul_rows_straddle``)."""
        return rows_straddle(pointer, pitch * self.kernels[0].element_bytes)

    def dense_rows_straddle(self, m: int, n: int, k: int) -> bool:
        """Whether dense A and B (pitch K, or M for an MN-major A and N for an MN-major B) at pointers on
        whole sectors have rows that straddle: what ``NAME_matmul_choice`` assumes."""
        return (self.operand_rows_straddle(0, k if self.a_major == "k" else m)
                or self.operand_rows_straddle(0, k if self.b_major == "k" else n))

    def choose(self, m: int, n: int, k: int, multiprocessors: int, max_splits: int | None = None,
               straddle: bool | None = None, table: int = 0) -> Choice:
        """The model's choice for a launch; ``straddle``: whether A's or B's rows straddle 32-byte
        sectors (None: as dense rows at aligned pointers would); ``table``: which of `dispatches`
        (`table_for` the GPU)."""
        splits = self.max_splits if max_splits is None else min(max_splits, self.max_splits)
        straddle = self.dense_rows_straddle(m, n, k) if straddle is None else straddle
        kernels = self.candidates(straddle, m, k, table)
        choice = self.dispatches[table].choose([replace(self.kernels[i].shape, straddle=straddle) for i in kernels],
                                               m, n, k, multiprocessors, splits)
        variant = kernels[choice.variant]
        return Choice(variant, choice.splits, choice.split_from) if choice.splits > 1 else Choice(variant, 1, 0)

    def groups(self, variant: int, m: int, n: int) -> int:
        """A kernel's groups of tiles covering C: a cluster's tiles (`TileShape.groups`)."""
        return self.kernels[variant].shape.groups(m, n)

    def workspace_bytes(self, choice: Choice, m: int, n: int) -> tuple[int, int]:
        """The global memory a launch with ``choice`` needs: one arrival counter per tile and consumer
        (they must start at zero; the kernel leaves them so) and each split's fp32 partial tile, for
        the tiles of the split groups (from ``split_from`` on).
        Kept apart: another launch's partials must never land on counters."""
        if choice.splits == 1:
            return 0, 0
        p = self.kernels[choice.variant]
        split_tiles = (self.groups(choice.variant, m, n) - choice.split_from) * p.cluster
        return split_tiles * p.consumers * 4, split_tiles * choice.splits * p.partial_floats * 4

    def units(self, choice: Choice, m: int, n: int) -> int:
        """Work units of a launch, each a cluster's: the whole groups, and each split group's splits."""
        groups = self.groups(choice.variant, m, n)
        if choice.splits == 1:
            return groups
        return choice.split_from + (groups - choice.split_from) * choice.splits

    def grid(self, choice: Choice, m: int, n: int, multiprocessors: int) -> int:
        """CTAs of the persistent grid: a cluster per unit, as many as the SMs hold at once."""
        shape = self.kernels[choice.variant].shape
        return min(self.units(choice, m, n), shape.slots(multiprocessors)) * shape.cluster


def is_fp8(k: MatmulKernel, spec: Spec) -> bool:
    names = {t.name: t for t in spec.tensors}
    return k.a in names and names[k.a].dtype in FP8_TYPES


def promote_every(k: MatmulKernel, spec: Spec) -> int:
    """K elements between promotions of the tensor core's partial sums into fp32 registers; 0: none
    (16-bit types need none: their wgmma accumulates in fp32)."""
    if not is_fp8(k, spec):
        return 0
    return DEFAULT_PROMOTE_EVERY if k.promote_every is None else k.promote_every


def setmaxnreg_consumers(consumers: int) -> int:
    """The rest of the register file after the producer's, per consumer thread, in steps of 8."""
    free = (REGISTERS_PER_SM - 128 * PRODUCER_REGISTERS) // (128 * consumers)
    return min(MAX_CONSUMER_REGISTERS, free // 8 * 8)


def launch_cap(consumers: int) -> int:
    """The most registers per thread ptxas can give the block at launch under its launch bounds
    (one block of 128 x (consumers + 1) threads per SM), and no more than the consumers' increase."""
    return min(setmaxnreg_consumers(consumers), MAX_THREAD_REGISTERS,
               REGISTERS_PER_SM // (128 * (consumers + 1)) // REGISTER_ALLOCATION_UNIT * REGISTER_ALLOCATION_UNIT)


def consumer_registers(consumers: int) -> int:
    """Registers a consumer thread can count on in all. With one or two consumers, what setmaxnreg
    gives it (the rest of the register file, in steps of 8): ptxas compiles the code after
    setmaxnreg.inc within that count, beyond what it allots every thread at launch, but only for
    registers other than the wgmma accumulators (`register_shortfall`). With three or more, no more
    than the launch's count: ptxas held a 3-consumer block (512 threads) to 128 ("Insufficient
    registers (128)", C7602, for a 64 x 240 accumulator), though setmaxnreg would have given 152."""
    return setmaxnreg_consumers(consumers) if consumers <= 2 else launch_cap(consumers)


def register_shortfall(bm: int, bn: int, consumers: int, sets: int) -> str | None:
    """Why ``sets`` sets of accumulators (1 plain; 2 or 3 where fp8 sums are promoted: the promoted
    ones, then the tensor core's) of a BM x BN tile do not fit a consumer thread, or None. What ptxas
    did on sm_90a (2026-11-24) with 384-thread blocks, 168 registers at launch and 224 after
    setmaxnreg: the wgmma accumulators and the rest fit within the launch's 168, and the promoted sums
    beside them within 224 (128 x 192 fp8 with promoted sums: registers up to R220, no spills,
    right on an H200; 128 x 128 with two sets of partial sums: no spills), but 192 wgmma
    accumulators (a 16-bit 256 x 192 tile) spilled 3 KB at 168, setmaxnreg notwithstanding."""
    per_set, beside = accumulators(bm, bn, consumers), REGISTERS_BESIDE_ACCUMULATORS
    tensor_sets = sets if sets == 1 else sets - 1
    if per_set * tensor_sets + beside > launch_cap(consumers):
        return (f"its wgmma accumulators ({per_set * tensor_sets}) and about {beside} other registers need "
                f"{per_set * tensor_sets + beside} per consumer thread, more than the {launch_cap(consumers)} "
                "ptxas compiles them within (the launch's count)")
    if per_set * sets + beside > consumer_registers(consumers):
        return (f"its {per_set * sets} accumulators ({per_set} promoted fp32 sums among them) and about {beside} "
                f"other registers need {per_set * sets + beside} per consumer thread, more than the "
                f"{consumer_registers(consumers)} setmaxnreg leaves each")
    return None


def accumulators(bm: int, bn: int, consumers: int, sets: int = 1) -> int:
    """fp32 accumulator registers per consumer thread: its rows x BN over 128 threads, once per set
    (fp8 sums that are promoted: the promoted ones and one or two sets of the tensor core's partial
    ones, `accumulator_sets`)."""
    return bm // consumers * bn // 128 * sets


# Tried on fp8 128 x 192 tiles (H100, 2026-11-28, scratch probe, not kept): each stage as two groups by
# halves of N (m64n96k32) into two sets of 48 partial sums, each half promoted while the other runs,
# in the registers of one set. ptxas kept those wgmmas pipelined only with the loop's exit test at the
# top of its body (in every form without it: C7514, accumulators read in a pipeline stage), and the
# products' errors equalled cuBLASLt's, but it ran 12 to 16% slower than one group and a wait per
# stage: 1163 against 1343 TFLOP/s at 8192^3, 944 against 1098 at 4096^3 (cuBLASLt 1491 and 1333).
def accumulator_sets(bm: int, bn: int, consumers: int, promote_stages: int) -> int:
    """1 without promotion; with it, 3 where they fit and every stage is promoted (pipelined: the
    next stage's wgmmas run into a second set of partial sums while the last one is promoted; on
    an H200 a 128 x 128 fp8 tile with one set kept the tensor pipe 60% busy at 8192^3, waiting for
    each promotion), else 2."""
    if promote_stages == 0:
        return 1
    return 3 if promote_stages == 1 and register_shortfall(bm, bn, consumers, 3) is None else 2


# How block scales reach the consumers, and what was tried (an H200, 2026-11-29; e4m3
# in, bf16 out; each variant and the per-tensor family timed tile by tile in one process, interleaved,
# 15 rounds; scratch probes, not kept; its per-tensor twin ran 0.78 to 0.87 ms at 8192^3 in
# those runs). Each consumer loads its scales from global memory as a stage starts. Under ncu at
# 8192^3 the 128 x 192 tile then ran 1.46 times as long as its per-tensor twin (1.22 against 0.83 ms
# at ncu's clocks), with 1.7 times its instructions: ptxas issues the loads after the stage's wgmmas,
# the promotion stalls on them (long scoreboard), and the consumers spent 15% of their samples at
# the turn barrier and 1% waiting on the tensor cores (per tensor: 40%). The 128 x 128 tile (two sets
# of partial sums) stalled 11% on the product that waits for them. Copied into shared memory by the
# producer warpgroup instead (a slot per stage, or a ring of its own with barriers of its own), the
# 128 x 192 tile ran 5 to 14% faster (8192^3 1.23 -> 1.06 to 1.17 ms, 4096^3 171 -> 142 to 158 us;
# without copying anything at all, a bound, 0.98 ms), but the 128 x 128 tile 1.18 to 1.31 times slower
# (8192^3 1.10 -> 1.30 to 1.43 ms, its pairs 1.13 -> 1.45 to 1.61). What costs it is a second arrival
# on the stage's full barrier: a thread of another warp that only waits for the stage to be free
# and arrives, copying nothing, made it 1.18 times slower (1.100 -> 1.295 ms), its pairs 1.28. The
# producer warp's own lanes loading and storing the scales (one arrival) held the copies up behind
# the loads: 1.55 times slower. The family's table takes the 128 x 128 pairs at every block-scaled
# benchmark shape, so none of these went in. Nor did A's scales laid out M-major (DeepGEMM's layout,
# strides (1, M rounded up to 4)), a stage's BM of them copied by the producer in one bulk copy on the
# stage's own full barrier (no second arrival), measured the same way beside main in one call
# (2026-11-29, ratios to the per-tensor twin): the 128 x 192 tile, with one set of partial sums, went
# from 0.69 to 0.80 (4096^3 and 8192^3), but the pipelined tiles, which have no room for the copies
# and loaded the M-major scales themselves, fell (128 x 128: 0.81 to 0.77 at 4096^3, 0.83 to 0.75 at
# 8192^3; its pairs 0.86 to 0.78 and 0.80), their loads meeting no line L1 already held (prefetching
# them into L1 two or four stages ahead was slower still). The family's best went from 0.81 to 0.77
# at 4096^3 and from 0.77 to 0.79 at 8192^3. Nor did working out each 8 columns' B block at compile
# time (a product of scales per row and block, not a select and two multiplies per 8 columns)
# change any tile's time beyond the noise (2%). Not yet run: the producer warp's lanes copying with
# cp.async (no register waits, no second waiter).
def issue_in_turn(consumers: int, promote_stages: int, sets: int, block_scales: bool) -> bool:
    """Whether the consumers issue each stage's wgmmas in turn, one after the other: two consumers or
    more whose block-scaled fp8 sums are promoted with one set of partial sums. Groups issued at
    once share the tensor cores and end together, and every consumer then multiplies and adds its
    sums while the tensor cores idle; in turn, each ends a group's time before the next, and its
    consumer promotes while the next one's runs. Measured on an H200 under ncu's fixed clocks
    (2026-11-25, scratch probe): block-scaled 128 x 128 tiles in turn took 1411 against 1502 us at
    8192^3, 714 against 744 at 4096 x 4096 x 16384, 195 against 202 at 4096^3. Sums promoted per
    tensor (an add each) gained nothing: 128 x 192 tiles took 966 against 956 us at 8192^3, 565
    against 547 at 4096 x 4096 x 16384. Two other ways were slower or smaller gains there: the odd
    consumers promoting half a stage later (128 x 192 per tensor: 1036 against 1097 TFLOP/s), and
    each stage in two groups by halves of N (block-scaled: 1434 us against in turn's 1411)."""
    return block_scales and promote_stages >= 1 and sets == 2 and consumers >= 2


def maps(spec: Spec) -> list[MapSpec]:
    """a, b and c, A and B read by wgmma (each as a_major and b_major say)."""
    k = spec.kernel
    assert isinstance(k, MatmulKernel)
    (ia, a), (ib, b), (ic, c) = spec.tensor(k.a), spec.tensor(k.b), spec.tensor(k.c)
    a, b = operand_promotion(a), operand_promotion(b)
    a_mn = a.box[0] if k.a_major == "k" else a.box[1]
    b_mn = b.box[0] if k.b_major == "k" else b.box[1]
    found = [MapSpec(role="a", tensor=a, index=ia,
                     mma=MmaSpec(operand="a", major=k.a_major, mn_boxes=k.tile[0] // a_mn)),
             MapSpec(role="b", tensor=b, index=ib,
                     mma=MmaSpec(operand="b", major=k.b_major, mn_boxes=k.tile[1] // b_mn)),
             MapSpec(role="c", tensor=c, index=ic, stores=True)]
    if k.a_major == "k" and edge_rows_apply(a):
        found.append(MapSpec(role="a_rows", tensor=a.model_copy(update={"box": [EDGE_BOX_ROWS, a.box[1]]}), index=ia,
                             derived=f"A in boxes of {EDGE_BOX_ROWS} rows, for the tiles at M's edge"))
    found += load_maps(spec, found)
    return found


def load_maps(spec: Spec, found: list[MapSpec]) -> list[MapSpec]:
    """A again and B again in the boxes each kernel of the family loads its share of a tile in, where
    they are not the operand's own (`operand_loads`): one map per number of rows, named by it (a_128)."""
    k = spec.kernel
    assert isinstance(k, MatmulKernel)
    a_map, b_map, c_map = found[:3]
    try:
        a, b = operand_tile(a_map, box_layout(a_map)), operand_tile(b_map, box_layout(b_map))
    except ModelError:  # a box that cannot be laid out: the TMA rules say why, and no kernel is planned
        return []
    assert a is not None and b is not None
    rows: dict[str, int] = {}
    for bm, bn, _ in family_tiles(k, a, b, c_map.tensor.box[1], promote_every(k, spec) > 0):
        for cluster in tile_clusters(k, bm, b_loads(bn, k.tile[2], b), is_fp8(k, spec)):
            loads = operand_loads(a_map, b_map, a, b, bm, bn, cluster, k.tile[2])
            rows.update({str(loads[f"{x}_map"]): int(loads[f"{x}_load_rows"]) for x in "ab"})
    return [MapSpec(role=name, tensor=m.tensor.model_copy(update={"box": [rows[name], m.tensor.box[1]]}),
                    index=m.index, derived=f"{m.role.upper()} in boxes of {rows[name]} rows, a kernel's share of a "
                    "tile in one copy")
            for m in (a_map, b_map) for name in sorted(rows, key=lambda x: rows[x]) if name.startswith(f"{m.role}_")]


# A kernel loads each K-major operand's share of a tile in one copy where the operand's boxes are
# 128-byte swizzled lines of K, as the family's are: A's BM rows, and B's BN rows split among the CTAs
# of a cluster (each CTA multicasts its share). Rows of such boxes lie one after the other, 128 bytes
# apart, wherever a box ends (the swizzle repeats every 8 rows), so the tile in shared memory and the
# tensor core's descriptors are the same as with the 64-row boxes the family is derived over; only
# the number of copies changes, and TMA moves fewer, larger copies faster. TMA's copies, not the
# tensor cores, bound fp8's 128 x 128 tile (H100, 2026-11-27, e4m3 in, bf16 out, scratch probe):
# under ncu at 8192^3, without promotion, its tensor pipe was 66% busy and 23% of the warps' stall
# samples sat on the consumers' full-barrier wait; cuBLASLt's kernel (m64n144k32 wgmmas) kept its
# pipe 92% busy. Built so, on an H100 (2026-11-28, scratch probe: this build and the one before in
# alternating processes, each interleaved with cuBLAS(Lt), TFLOP/s before -> after):
# - fp8 128 x 128 alone: 1020 -> 1066 at 4096^3, 1116 -> 1158 at 8192^3, 1059 -> 1122 at
#   1024 x 4096 x 14336, 1102 -> 1171 at 2048 x 2048 x 32768; in pairs (B's halves one 64-row box
#   each, as before) -2.7 to +1.5% over 9 shapes.
# - bf16 128 x 128 in pairs: 561 -> 591 at 4096^3, 586 -> 614 at 8192^3, 506 -> 546 at
#   1024 x 4096 x 4096 (8 of 12 shapes 3.7 to 7.9% faster, the rest within 1.1%); 128 x 256 in
#   pairs within 1.1% but for 4104^3, 562 -> 582.
# - tmagen.ops.matmul (the dispatch tables unchanged): bf16 15000^3 680 -> 724 (cuBLAS 732; 709 ->
#   728 in a second call), the 11 other bf16 shapes within 0.6%, the 9 fp8 shapes -0.5 to +1.9%.
# 128 x 256 fp8 tiles without promotion ran at 1.00 to 1.08 of cuBLASLt (1321 to 1444), but promoted
# they need 256 registers per consumer thread.
MAX_BOX_ROWS = 256  # TMA's box dimensions are at most 256 elements (cuTensorMapEncodeTiled)


def load_rows(m: MapSpec, t: OperandTile, share: int, cluster: int, bk: int) -> int:
    """Rows of M or N per copy of an operand whose tile is ``share`` rows, split among ``cluster``
    CTAs: each CTA's whole share (at most a box's 256 rows) where the operand is K-major in boxes
    that stack from 8-row swizzle periods of one 128-byte line of K (as `edge_rows_apply` says of A)
    and lie end to end, else its own boxes'."""
    own = t.mn_per_box
    each, split = divmod(share, cluster)
    stacks = (m.mma is not None and m.mma.major == "k" and t.k_per_box == bk and edge_rows_apply(m.tensor)
              and t.stride == t.mn_per_box * t.span)  # its boxes lie end to end (no smem_offset between)
    if not stacks or split or each % EDGE_BOX_ROWS or each > MAX_BOX_ROWS:
        return own
    return each


def operand_loads(a_map: MapSpec, b_map: MapSpec, a: OperandTile, b: OperandTile, bm: int, bn: int, cluster: int,
                  bk: int) -> dict[str, str | int]:
    """The maps a kernel loads its A and B through and their rows per copy (`load_rows`), as
    `MatmulPlan`'s fields: an operand's own map where it loads its own boxes, else one named by
    the rows (a_128)."""
    fields: dict[str, str | int] = {}
    for m, t, share, ctas in ((a_map, a, bm, 1), (b_map, b, bn, cluster)):
        rows = load_rows(m, t, share, ctas, bk)
        fields[f"{m.role}_load_rows"] = rows
        fields[f"{m.role}_map"] = m.role if rows == t.mn_per_box else f"{m.role}_{rows}"
    return fields


def b_loads(bn: int, bk: int, b: OperandTile) -> int:
    """B boxes of the operand's own in a stage of a tile BN wide: what a cluster's CTAs share."""
    return bn // b.mn_per_box * (bk // b.k_per_box)


def tile_clusters(k: MatmulKernel, bm: int, loads: int, fp8: bool) -> tuple[int, ...]:
    """The clusters a tile runs in: its own (`tile_cluster`), then 2 where it runs alone (its B boxes
    did not split evenly, it is of 64 rows, or it is fp8) and has a twin in pairs: in a spec that
    leaves ``cluster`` to tmagen, where its stage has two B boxes or more to share (rule matmul-cluster)."""
    own = tile_cluster(k, bm, loads, fp8)
    return (own, 2) if k.cluster is None and own == 1 and loads >= 2 else (own,)


OPERAND_L2_PROMOTION = "128B"  # what A and B fetch into L2 where the spec leaves it out (see ROW_SECTOR's note)


def operand_promotion(t: TensorSpec) -> TensorSpec:
    """An operand's tensor with the matmul's L2 promotion where the spec does not name one (a spec
    that says "none" keeps it)."""
    if "l2_promotion" in t.model_fields_set:
        return t
    return t.model_copy(update={"l2_promotion": OPERAND_L2_PROMOTION})


# At M's edge (every tile when M is below a tile, as in LLM decoding), A's rows are loaded in boxes of
# EDGE_BOX_ROWS through a second map of A, only as many boxes as reach below M: a box of 64 rows there
# is filled past M by TMA, and that filling measured slower than reading rows. H200, bf16, 64 x 128
# tiles (scratch probe of 2026-11-25): 1 x 14336 x 4096 took 39.7 us with A's 64-row box and 36.9
# with no A loads at all (a timing probe), 34.6 at M = 64 (no rows past M); cuBLAS 33.3. Built so, on
# an H100 beside the build before it (one call, 2026-11-27: benchmarks/results/h100-2026-11-27-edge-rows-
# before.json and -after.json): 1 x 14336 x 4096 46.6 -> 44.6 us (cuBLAS 43.0), 16 x 14336 x 4096
# 46.1 -> 45.3, tiles of M = 64 or more unchanged.
# A's rows past M in shared memory then keep what was there: only rows of C past M depend on
# them, and those are neither stored nor summed across splits. An MN-major A ([K, M]) runs M along
# each row of its boxes, so no box holds only rows past M: it keeps its own boxes.
# Below a kernel's larger copies (`load_rows`), the edge takes A's own boxes first, then 8-row ones:
# in 8-row boxes alone, the 64 rows of 64 x 14336 x 4096 (bf16, 128 x 128 tiles in pairs, an H100,
# 2026-11-28) ran at 83.5 TFLOP/s, against 117.7 through one 64-row box (118.7 before the larger copies).
EDGE_BOX_ROWS = 8  # one period of the 128-byte swizzle: 8-row boxes stack into a 64-row box's layout


def edge_rows_apply(a: TensorSpec) -> bool:
    """Whether A's boxes stack from 8-row boxes (rows of one 128-byte swizzled line, as the family's)."""
    return (a.swizzle.mode == "128B" and a.box[-1] * a.dt.nbytes == FAMILY_SPAN and a.box[0] > EDGE_BOX_ROWS
            and a.box[0] % EDGE_BOX_ROWS == 0 and a.interleave == "none"
            and all(s == 1 for s in (a.element_strides or [1])))


FAMILY_BOX_ROWS = 64  # the A and B boxes a family is derived over: 64 rows of one 128-byte swizzled line of K
FAMILY_SPAN = 128


def family_tiles(k: MatmulKernel, a: OperandTile, b: OperandTile, c_cols: int,
                 promoted: bool = False) -> list[tuple[int, int, int]]:
    """The spec's tile, then every FAMILY_TILES shape its registers hold, where the family is proven:
    A and B in boxes of 64 rows (of M or N) of one 128-byte swizzled line of K (or N, for an
    MN-major A or B), one box along K per stage (BK = 64 of 16-bit elements, 128 of fp8), as tmagen's
    own specs are. There the tensor core's descriptors do not depend on how many boxes a tile spans, and every
    kernel of the family runs on the GPU suite. Other boxes keep the spec's tile alone: derived
    tiles over them gave wrong products on an H200 (the random campaign of 2026-11-24: 32 B
    boxes of 8 or 16 rows, unswizzled boxes, 96-row boxes with two boxes along K per stage). A
    K-major B's boxes must also lie end to end (an smem_offset leaves a gap after each), as rule
    mma-k-major-boxes-contiguous asks of the spec's own tile: a wgmma reads B's BN rows through one
    descriptor, which steps 8 rows at a time and cannot skip a gap (A's 64-row blocks each have
    their own).
    ``dispatch: "single"``: the spec's tile alone."""
    own = (k.tile[0], k.tile[1], k.consumers)
    proven = all(t.mn_per_box == FAMILY_BOX_ROWS and t.swizzled and t.span == FAMILY_SPAN and t.k_per_box == k.tile[2]
                 for t in (a, b)) and (b.major == "mn" or b.stride == b.mn_per_box * b.span)
    if k.dispatch == "single" or not proven:
        return [own]
    others = [t for t in FAMILY_TILES if t != own and t[1] % c_cols == 0
              and register_shortfall(*t, 2 if promoted else 1) is None]
    return [own, *others]


# fp8 tiles run alone by default. With each CTA's share of B in one copy (`load_rows`) and the
# consumers' K loop in uniform registers, the fp8 128 x 128 tile alone was as fast as its pairs on
# whole-sector rows where M spans more than one tile, and faster where M is within one, whose
# partner in a pair computes nothing: on an H100 (2026-11-28, every kernel at every split,
# tests/data/hw_h100/matmul_tune_fp8.json, which the dispatch tests replay) 0.8% faster (geometric
# mean over 36 shapes of each one's fastest split, -12 to +10%; 4096^3 102 / 106 us, 8192^3 812 /
# 794), and 16 x 14336 x 4096 27.0 / 32.2 us. (Before that loop, alone led by 4%.) Its pairs stay as
# its twin, taken where rows straddle sectors (where they read B through L2 once for two tiles) and
# where the GPU's table offers them, as the H100's does on whole-sector rows. Block-scaled families
# follow; their tile alone was checked on the GPU, not timed.
def tile_cluster(k: MatmulKernel, bm: int, b_loads: int, fp8: bool) -> int:
    """CTAs per cluster for a tile of ``bm`` rows whose stage is ``b_loads`` B boxes: the spec's
    ``cluster`` (a tile with fewer B boxes than CTAs runs alone: rule matmul-cluster refuses that
    for the spec's own tile), or by default pairs for 16-bit tiles of 128 rows or more whose B boxes
    split evenly; a tile whose stage is an odd number of boxes, and every fp8 tile, runs alone, and
    its pair (`tile_clusters`) is a kernel of its own, for rows that straddle and where the GPU's
    table offers it on aligned rows (see the note above). On an H200 (bf16, 128 x 256 tiles), a pair took
    197 us at 4096 x 4096 x 4104, whose rows are not whole 32-byte sectors, where the tile alone took
    242 (cuBLAS 190), and 9.7 ms at 15000^3 against 12.8; on whole-sector rows both took 188 us at
    4096^3 (scratch probe of 2026-11-24, in the note of issue 18)."""
    cluster = k.cluster if k.cluster is not None else 2 if bm >= 128 and not fp8 else 1
    return cluster if b_loads >= cluster and (k.cluster is not None or b_loads % cluster == 0) else 1


# A tile that runs alone (its stage an odd number of B boxes, as 128 x 192 and 192 x 192, or of 64
# rows) keeps doing so where A's and B's rows start on whole 32-byte sectors, and runs as its twin in
# pairs (the B boxes multicast in turns: three are two and one) where they do not: a box row then
# spans one more sector, the loads bound the step, and a pair reads its B once for both. H100,
# 2026-11-27 (tests/data/hw_h100/matmul_pairs.json): 4096 x 4096 x K bf16, 128 x 192 alone / in
# pairs: pitch 16 mod 128 bytes 324 / 245 us, the pointer 16 bytes in 372 / 271; pitch 32 mod 128
# 217 / 217, 64 mod 128 216 / 216, aligned 198 / 201; fp8 the same (16 mod 128: 175 / 129; 32: 122 /
# 124; aligned 118.5 / 120.5). Whole shapes: bf16 2056^3 39.4 / 36.8 (192 x 192), 1000^3 14.1 / 12.4
# and 256 x 4096 x 4104 38.1 / 28.9 (64 x 128); fp8 10000^3 2368 / 1735 (128 x 192; cuBLASLt 1839).
ROW_SECTOR = 32  # bytes: a row whose start is off a multiple of this straddles (see `rows_straddle`)
# What the L2 reads from DRAM decides the large shapes whose rows straddle: A's and B's maps fetch
# whole 128-byte lines where the spec names no l2_promotion (`operand_promotion`), and tmagen.ops's
# bf16 spec (tmagen/ops_specs/bench_matmul_bfloat16.json) walks groups of 16 tile rows. H100,
# 2026-11-27, 15000^3 bf16 under ncu: without promotion 12.7 ms, 28.6 GB read from DRAM, L2 hit rate
# 49% (another run: 10.0 ms, 18.7 GB); 128B 9.7 ms, 19.2 GB, 68%; 128B in groups of 16 9.6 ms, 17.6
# GB, 72%; 256B 12.6 ms, 32.2 GB; cuBLAS 8.9 ms, 12.6 GB, 75%. Over the benchmark's 53 shapes (ratio
# to cuBLAS, interleaved): 128B lifted every straddling shape (2056^3 0.90 -> 0.95, 4096 x 4096 x
# 4104 0.975 -> 0.994, 64 x 14336 x 4096 with rows 4104 apart 0.922 -> 0.969) and left aligned ones
# within noise; groups of 16 then gained 1 to 5% on large ones (4104^3 0.853 -> 0.902, 8192^3 1.042
# -> 1.071) and lost at most 1% (1024 x 4096 x 4096, 8192 x 4096 x 14336). fp8 (128B against none):
# within 0.5%.


def rows_straddle(pointer: int, pitch_bytes: int) -> bool:
    """Whether a matrix's rows start off whole 32-byte sectors: its pointer, or its pitch, is not a
    multiple of ROW_SECTOR (then the twins in pairs of `tile_clusters` are taken)."""
    return pointer % ROW_SECTOR != 0 or pitch_bytes % ROW_SECTOR != 0


# Pairs pay on straddling rows where the loads outweigh what a cluster costs beyond a lone CTA. H100,
# 2026-11-27 (tests/data/hw_h100/matmul_pairs.json), alone / in pairs: M within one tile, whose
# partner computes nothing, 64 x 14336 x 4104 bf16 54.0 / 54.4 us (64 x 128), 53.9 / 62.8 (128 x 192);
# few K steps, fp8 1000 x 1000 x 1008 (8 steps) 9.4 / 9.8 and 264 x 264 x 272 (3) 6.2 / 7.1, where
# bf16 1000^3 (16 steps) took 14.1 / 12.4.
PAIR_MIN_K_STEPS = 16


def pair_pays(p: MatmulPlan, m: int, k: int) -> bool:
    """Whether kernel ``p``'s twin in pairs is taken on straddling rows: M spans more than one of
    its tiles and K at least PAIR_MIN_K_STEPS of its steps."""
    return m > p.bm and -(-k // p.bk) >= PAIR_MIN_K_STEPS


def pieces(bm: int, bn: int, consumers: int, c_map: MapSpec) -> int:
    """C boxes a consumer's rows of a tile are stored in: its 64-row blocks times BN / the box's columns."""
    return bm // consumers // 64 * (bn // c_map.tensor.box[1])


def stages_and_buffers(limit: int, stage: int, consumers: int, c_stride: int, pieces: int,
                       stages: int | None) -> tuple[int, int]:
    """Stages of A and B and C staging buffers per consumer in ``limit`` bytes of shared memory:
    the spec's ``stages`` (its own tile) or as many as fit beside two buffers (up to
    MAX_FAMILY_STAGES), then buffers in what is left, up to one per piece of C. A buffer per piece
    lets a consumer write its whole tile and go on to the next while the stores drain (with fewer,
    it waits for the stores of its own tile). Stages come first: on an H200, 128 x 256 tiles with 3
    stages and a buffer per piece ran 4% faster at K = 128 and 5% slower at K >= 4096 than with 4
    stages and two buffers (bf16; fp8 within 3%)."""
    barriers = 2 * 8 * MAX_FAMILY_STAGES  # the full and empty mbarriers, static shared memory

    def fit_stages(buffers: int) -> int:
        return min(MAX_FAMILY_STAGES, (limit - consumers * buffers * c_stride - PATTERN_ALIGN - barriers) // stage)

    least = C_STAGING_BUFFERS
    if stages is None:
        stages = fit_stages(C_STAGING_BUFFERS)
        if stages < MIN_RING_STAGES and fit_stages(1) > stages:
            stages, least = fit_stages(1), 1
    spare = (limit - stages * stage - PATTERN_ALIGN - barriers) // (consumers * c_stride)
    return stages, max(least, min(pieces, spare))


def plan(spec: Spec, maps: list[MapSpec], smem_limit: int | None = None) -> tuple[KernelPlan, ...]:
    k = spec.kernel
    assert isinstance(k, MatmulKernel)
    bk = k.tile[2]
    a_map, b_map, c_map = maps[:3]
    roles = tuple(m.role for m in maps)
    a, b = operand_tile(a_map, box_layout(a_map)), operand_tile(b_map, box_layout(b_map))
    assert a is not None and b is not None
    c_stride = box_stride(box_layout(c_map))
    limit = smem_limit if smem_limit is not None else TARGETS[spec.target].smem_per_block_optin
    a_step, b_step = a.stride * (bk // a.k_per_box), b.stride * (bk // b.k_per_box)  # one box along MN, BK of K
    every = promote_every(k, spec)
    fp8 = is_fp8(k, spec)
    instruction_k = 32 if fp8 else 16
    plans: list[MatmulPlan] = []
    tiles = family_tiles(k, a, b, c_map.tensor.box[1], every > 0)
    for i, (bm, bn, consumers) in enumerate(tiles):
        a_boxes, b_boxes = bm // a.mn_per_box, bn // b.mn_per_box
        stage = a_step * a_boxes + b_step * b_boxes
        stages, buffers = stages_and_buffers(limit, stage, consumers, c_stride, pieces(bm, bn, consumers, c_map),
                                             k.stages if i == 0 else None)
        if stages < 2:
            continue
        sets = accumulator_sets(bm, bn, consumers, every // bk)
        symbol = f"{spec.name}_matmul" if i == 0 else f"{spec.name}_matmul_{bm}x{bn}"
        loads = b_loads(bn, bk, b)
        cluster = tile_clusters(k, bm, loads, fp8)[0]
        plans.append(MatmulPlan(symbol, bm, bn, bk, consumers, stages, k.raster_group, a_boxes, b_boxes,
                                a_stage_bytes=a_step * a_boxes, b_stage_bytes=b_step * b_boxes, c_stride=c_stride,
                                accumulators=accumulators(bm, bn, consumers, sets), b_major=k.b_major,
                                a_major=k.a_major,
                                variant=len(plans), instruction_k=instruction_k, promote_stages=every // bk,
                                c_buffers=buffers, cluster=cluster, b_loads=loads,
                                pipelined=sets == 3,
                                ordered=issue_in_turn(consumers, every // bk, sets, k.block_scales),
                                block_scales=k.block_scales,
                                **operand_loads(a_map, b_map, a, b, bm, bn, cluster, bk)))
    # the twins in pairs come last, so that the kernels before them keep their indices (``choice=``);
    # only in a family (a spec's own tile alone stays alone, as ``dispatch: "single"`` asks, or as
    # boxes the family is not proven on keep it)
    twins = [-1] * len(plans)
    for p in list(plans) if len(tiles) > 1 else []:
        if len(tile_clusters(k, p.bm, p.b_loads, fp8)) > 1:
            twins[p.variant] = len(plans)
            plans.append(replace(p, symbol=f"{p.symbol}_pairs", variant=len(plans), cluster=2,
                                 **operand_loads(a_map, b_map, a, b, p.bm, p.bn, 2, bk)))
    # `load_maps` enumerates the same tiles and clusters for the maps, which are made before the plan
    unmapped = {name for p in plans for name in (p.a_map, p.b_map)} - set(roles)
    assert not unmapped, f"no map {sorted(unmapped)} among {roles}: load_maps and plan must see the same kernels"
    family = MatmulFamily(tuple(plans), DISPATCHES, max_splits=1 if k.dispatch == "single" else k.max_splits,
                          promote_every=every, block_scales=k.block_scales, fp8=fp8,
                          stmatrix=c_map.tensor.dt.nbytes == 2 and c_map.tensor.box[1] % 16 == 0,
                          edge_rows=EDGE_BOX_ROWS if "a_rows" in roles else 0,
                          twins=tuple(twins + [-1] * (len(plans) - len(twins))))
    # each kernel's maps, in the order of its parameters
    views = [KernelPlan(p.symbol, (p.a_map, p.b_map, "c", *(("a_rows", "a") if family.edge_rows else ())), p.threads,
                        p.smem_bytes, p.stage_bytes, p.stages, persistent=True, detail=p,
                        barriers=2 * p.stages,  # full and empty
                        registers=p.register_budget, dependent_launch=True) for p in plans]
    first = views[0]
    return (KernelPlan(first.symbol, first.maps, first.threads, first.smem_bytes, first.buffer_stride, first.stages,
                       persistent=True, detail=family, barriers=first.barriers, registers=first.registers,
                       variants=tuple(views[1:]), wgmma_n=tuple(sorted({p.bn for p in plans}, reverse=True)),
                       dependent_launch=True),)
