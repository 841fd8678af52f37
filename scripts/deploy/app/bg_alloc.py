"""A background app of the deployment harness: holds SIZE_MIB of private
anonymous memory, every page written (half random bytes, half zeros, so lz4
in zram compresses it about 2:1, as app heaps do), prints `held`, and stays
alive until killed.

    python bg_alloc.py NAME SIZE_MIB
"""
import os
import signal
import sys

name, mib = sys.argv[1], int(sys.argv[2])
chunk = (os.urandom(2048) + bytes(2048)) * 256  # 1 MiB
held = bytearray(mib << 20)
view = memoryview(held)
for off in range(0, mib << 20, 1 << 20):  # every page written
    view[off:off + (1 << 20)] = chunk
print(f"held {name} {mib} MiB", flush=True)
while True:
    signal.pause()
