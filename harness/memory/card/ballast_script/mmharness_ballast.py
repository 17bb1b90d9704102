"""Run by Ballast in its own interpreter (needs only torch with CUDA):
allocate device memory until `leave_free` bytes remain free, print one JSON
line on stdout, then hold the memory until stdin closes or it is killed.

argv: leave_free_bytes device_index tolerance_bytes
"""
import json
import os
import sys

import torch

GRANULE = 2 << 20  # the CUDA caching allocator rounds large blocks to 2 MiB


def report(**fields):
    print(json.dumps({"pid": os.getpid(), **fields}), flush=True)


def main():
    leave_free, device, tolerance = (int(a) for a in sys.argv[1:4])
    torch.cuda.set_device(device)
    free, total = torch.cuda.mem_get_info(device)  # the first call creates our context
    if free < leave_free:
        report(ready=False, free=free, total=total,
               error=f"only {free} bytes free, cannot leave {leave_free} free")
        return 2
    blocks = []
    # Round each block down, never up, so free never drops below the target;
    # repeat because the allocator's own bookkeeping takes a little too.
    for _ in range(8):
        free, total = torch.cuda.mem_get_info(device)
        excess = free - leave_free
        if excess <= tolerance:
            break
        blocks.append(torch.empty(excess - excess % GRANULE, dtype=torch.uint8, device=device))
        torch.cuda.synchronize(device)
    free, total = torch.cuda.mem_get_info(device)
    report(ready=True, free=free, total=total, allocated=sum(b.numel() for b in blocks))
    sys.stdin.read()  # hold until the harness closes our stdin or kills us
    return 0


if __name__ == "__main__":
    sys.exit(main())
