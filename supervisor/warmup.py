"""What every pkletd process runs, run once before the fork server is forked, so that
what running it builds lives in the pages every process shares.

CPython 3.11 rewrites a function's bytecode in place the first times it runs (after 8
calls it is quickened, then specialised), and some modules build caches on first use;
done in each worker, both copy the pages they touch. Every process logs and speaks the
bus: logging a line (through a handler on ``/dev/null``, so no log gets a line of this)
and encoding and decoding a message, each ``RUNS`` times, and the type hints of every
message kind (the codec's cache), done here, are shared by the parent, the fork server
and every worker. Measured in ``docs/performance.md`` (Memory).
"""

from __future__ import annotations

from pkletd.ipc.bus import codec
from pkletd.ipc.bus.messages import Heartbeat
from pkletd.supervisor import logs

RUNS = 20  # comfortably past 3.11's quickening (8 calls) and its specialisation


def run() -> None:
    logs.warm(RUNS)
    codec.cache_hints()
    for seq in range(RUNS):
        codec.decode(codec.encode(Heartbeat("warmup"), "warmup", seq, 0.0))
