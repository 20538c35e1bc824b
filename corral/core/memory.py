"""Large, long-lived data kept away from the cyclic garbage collector.

A full collection visits every container object the process holds.  A
Placement snapshot of 100,000 providers, with the summaries rendered from
it, is a few million of them: each full collection then stalls every
thread for 70 ms or more, whichever request happens to trigger it, while
none of those objects can ever be part of a garbage cycle (snapshots are
built once and never modified).

:func:`settle` collects once, then moves every object alive into the
collector's permanent generation (``gc.freeze``): later collections look
only at what was made since.  Frozen objects are still freed by reference
counting when dropped.  It is called only after rare, large builds (a
whole snapshot read, a first full set of summaries), so its own cost, one
full collection, is paid once per build.
"""

from __future__ import annotations

import gc
import threading

# Builds of fewer objects than this are not worth a full collection.
LARGE = 10_000

_lock = threading.Lock()


def settle(size: int, large: int = LARGE) -> bool:
    """Collect and freeze what is alive now when ``size`` (the number of
    things just built) is at least ``large``; True when it did."""
    if size < large:
        return False
    with _lock:
        gc.collect()
        gc.freeze()
    return True
