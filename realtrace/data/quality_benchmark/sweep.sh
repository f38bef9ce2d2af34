#!/bin/bash
# issue 29 claims 6-8 sweep; stages in priority order, serial
cd /work/wt/i28a
export KV_QUALITY_CACHE=/work/qcache
PY=/work/wt/i28a/.venv/bin/python
O=/work/sweep29
POL=H2O,TOVA,StreamingLLM,FIFO
PRE=SnapKV,AdaKV,Knorm,ExpectedAttention
EASY=needle-400-d10,needle-400-d50,kv-24-12,needle-600-d90,kv-40-1
HARD=shift-16-d0,shift-16-d50,shift-24-d50
stage() {  # name, args...
  n=$1; shift
  echo "$(date -u +%FT%TZ) start $n load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/log
  /usr/bin/time -v -o $O/$n.time $PY -m paper_check quality --all --policies $POL --presses $PRE \
     --workers 1 --threads 1 --json --out $O/$n "$@" > $O/$n.stdout 2> $O/$n.stderr
  echo "$(date -u +%FT%TZ) end $n rc $? load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O/log
}
stage easy --budgets 64,128 --prompts $EASY --steps
stage hard --budgets 64,128 --prompts $HARD --opt-top 32
stage long --budgets 128 --prompts needle-1200-d50 --steps
stage easy_K32 --budgets 32 --prompts $EASY
