"""A GPU made small, for the device machine's checks of the out-of-memory policy: torch's own allocator refuses
what goes beyond a limit, so the halving meets CUDA's real error and its real freeing of memory, not a stand-in.

Loaded by the tests that need it; they skip where no CUDA GPU is visible (CI).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
import torch

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the device machine's check)")


def peak_bytes(run: Callable[[], object]) -> int:
    """The most memory ``run`` held on the GPU beyond what was held before it."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    run()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


@contextmanager
def memory_limit(extra: int) -> Iterator[None]:
    """Let this process's CUDA allocator reserve only ``extra`` bytes beyond what it holds now; torch raises its
    OutOfMemoryError above that."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, (torch.cuda.memory_reserved() + extra) / total))
    try:
        yield
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        torch.cuda.empty_cache()
