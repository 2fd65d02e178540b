#!/usr/bin/env bash
# Nsight Compute counters of copy/transpose variants and their Triton peers (issue 10):
#   scripts/probe/movement_ncu.sh OUTFILE TARGET...   (targets: see movement_sweep.ncu_targets)
set -u
out=$1; shift
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sector_hit_rate.pct,lts__t_requests_srcunit_tex.sum,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,launch__grid_size,launch__registers_per_thread,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg
ncu --clock-control none --csv --metrics "$metrics" --kernel-name "regex:^(t_|c_|transpose_kernel|copy_kernel)" \
  python3 scripts/probe/movement_sweep.py /tmp/ncu ncu-targets "$@" > "$out" 2> "$out.err"
python3 - "$out" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head, body = rows[0], rows[1:]
ki, mi, vi = head.index("Kernel Name"), head.index("Metric Name"), head.index("Metric Value")
ii = head.index("ID")
table = collections.OrderedDict()
for r in body:
    table.setdefault((r[ii], r[ki]), {})[r[mi]] = r[vi]
for (i, k), m in table.items():
    print(i, k)
    for name, v in m.items():
        print(f"   {name:60s} {v}")
PY
