"""``realtrace.model.keep_freed_memory`` (issue 30): after it, a large block freed and allocated again is served
from memory the process already has (no page faults), where the default glibc allocator maps it afresh -- the
system time that was a fifth of the quality sweeps' CPU.  Each case runs in its own process (the setting is
per process and cannot be undone)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

SCRIPT = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from realtrace.model import keep_freed_memory
    assert keep_freed_memory()
def touch():
    a = np.ones(8 * 2**20)  # 64 MB: above glibc's largest mmap threshold (32 MB)
    return float(a[::512].sum())
touch()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
touch()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults_of_a_reallocation(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_a_freed_block_is_reused_without_page_faults():
    default, kept = faults_of_a_reallocation("default"), faults_of_a_reallocation("keep")
    assert default >= 32, f"the default allocator faulted only {default} pages in again: the control sees nothing"
    assert kept <= default // 16, (default, kept)
