"""heap_profile_python.py: a Python program whose heap a profiler is asked about while it is
live (tests/dropin/heap_profile_peers.sh). Run with PYTHONMALLOC=malloc, so that every object
comes from malloc, under pagemalloc's heap profiler or jemalloc's; it builds dicts of strings,
lists of tuples, byte arrays and sets, then asks the allocator it runs on for a profile at the
path given (pm_prof_dump, or jemalloc's mallctl("prof.dump")), all of them still live.

    python3 heap_profile_python.py PATH
"""

import ctypes
import random
import sys

rng = random.Random(7)
words = {f"key-{i}-{rng.random()}": "v" * (i % 200) for i in range(60000)}
pairs = [(i, str(i) * 3, float(i)) for i in range(80000)]
buffers = [bytearray(rng.randrange(100, 20000)) for _ in range(3000)]
sets = [set(range(i % 50)) for i in range(8000)]

path = sys.argv[1].encode()
process = ctypes.CDLL(None)
if hasattr(process, "pm_prof_dump"):
    error = process.pm_prof_dump(ctypes.c_char_p(path))
else:
    name = ctypes.c_char_p(path)
    error = process.mallctl(b"prof.dump", None, None, ctypes.byref(name), ctypes.sizeof(name))
if error != 0:
    sys.exit(f"heap_profile_python: the profile was not written (error {error})")
print(len(words), len(pairs), sum(len(b) for b in buffers), sum(len(s) for s in sets))
