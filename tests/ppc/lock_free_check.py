#!/usr/bin/env python3
"""No 64-bit atomic of libmonitor takes a lock: on a processor without 64-bit atomic
instructions (32-bit PowerPC) GCC turns std::atomic<std::uint64_t> into calls to libatomic
(__atomic_load_8 and the like), which take a lock that a SCHED_IDLE probe could hold, preempted,
while another thread waits for it. The archive must call none of them.

    lock_free_check.py NM ARCHIVE
"""
import re
import subprocess
import sys

nm, archive = sys.argv[1], sys.argv[2]
out = subprocess.run([nm, "-A", archive], check=True, capture_output=True, text=True).stdout
calls = sorted({(m.group(1), m.group(2)) for m in
                re.finditer(r"^\S+?:(\S+):\s+U (__atomic_\w+_(?:8|16))$", out, re.M)})
if calls:
    for obj, sym in calls:
        print(f"FAILED: {obj} calls {sym}, a lock-based atomic (use LockFreeU64)")
    sys.exit(1)
objects = len({line.split(":")[1] for line in out.splitlines() if line.count(":") >= 2})
print(f"{objects} objects of {archive}: no call to a lock-based 64-bit atomic")
