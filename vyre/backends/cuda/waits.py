"""Host waits for the device that Ctrl-C can end.

cuStreamSynchronize / cuEventSynchronize block inside the driver: a Ctrl-C waits for the
work (a huge grid runs for seconds). On the main thread outside a deferred section (where
a KeyboardInterrupt would be raised at once, vyre.interrupts.interruptible_here) the wait
asks the driver instead (cuStreamQuery / cuEventQuery): spinning for SPIN_NS, as the
driver's own blocking wait does, then sleeping between asks, each sleep a sixteenth of the
time waited so far (a long wait ends at most ~6% after its work). Elsewhere it is the
driver's blocking call, unchanged. The work goes on after an interrupt; a later wait finds
it. This module must never wait on the host for anything but the handle it is given.
"""

from __future__ import annotations

import time
from typing import Any

from vyre.interrupts import interruptible_here

from . import driver as D

SPIN_NS = 200_000
_MAX_SLEEP_S = 0.01
_now = time.perf_counter_ns


def wait(blocking: Any, query: Any, handle: Any) -> Any:
    """`blocking(handle)`'s status, reached by `query(handle)` polls where Ctrl-C may end
    the wait (module docstring). Returns the driver's status (0 once the work is done)."""
    if not interruptible_here():
        return blocking(handle)[0]
    (err,) = query(handle)
    if int(err) != D.NOT_READY:
        return err
    start = _now()
    while True:
        (err,) = query(handle)
        if int(err) != D.NOT_READY:
            return err
        waited = _now() - start
        if waited > SPIN_NS:
            time.sleep(min((waited >> 4) / 1e9, _MAX_SLEEP_S))
