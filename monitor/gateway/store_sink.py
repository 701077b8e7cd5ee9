"""Per-request events into the store, off the request path.

The proxy calls the sink as each request finishes; the sink turns the event into a row and
puts it on a bounded queue (never waits). A writer thread takes rows off in batches (up to
``max_batch``, or whatever came within ``flush_seconds``) and appends each batch in one
transaction. A full queue (a store slower than the traffic, or down) drops the row and counts
it on ``inferwatch_gateway_events_dropped_total``: the proxy is never slowed by its storage,
and the good/total counters, kept apart, stay exact.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from prometheus_client import CollectorRegistry, Counter

from monitor.gateway.events import RequestEvent
from monitor.store.request_events import RequestEventRow

log = logging.getLogger(__name__)

BatchWriter = Callable[[Sequence[RequestEventRow]], None]


def event_row(event: RequestEvent, wall_now: float, perf_now: float) -> RequestEventRow:
    """The row of a finished event; ``wall_now``/``perf_now`` read together place its
    arrival (a perf_counter time) on the wall clock."""
    timing = event.timing
    engine = timing.engine_metrics
    return RequestEventRow(
        at=wall_now - (perf_now - timing.arrived_at), model=event.model, tenant=event.tenant,
        slo_class=event.slo_class.name, outcome=event.outcome, status=event.status,
        good=event.good, ttft_seconds=timing.ttft, first_content_seconds=timing.ttfc,
        tpot_seconds=timing.tpot, max_itl_seconds=max(timing.gaps, default=None),
        e2e_seconds=timing.e2e, prompt_tokens=timing.prompt_tokens,
        output_tokens=timing.num_output_tokens if timing.num_token_chunks
        or timing.completion_tokens is not None else None,
        target_ttft_seconds=event.slo_class.ttft_seconds,
        target_itl_seconds=event.slo_class.itl_seconds,
        engine_queue_seconds=_ms(engine.get("queue_time_ms")),
        engine_ttft_seconds=_ms(engine.get("time_to_first_token_ms")))


def _ms(value: float | None) -> float | None:
    return None if value is None else value / 1000


class StoreSink:
    """An ``EventSink``: ``start()`` it before traffic, ``close()`` it after (drains)."""

    def __init__(self, write: BatchWriter, registry: CollectorRegistry, *,
                 max_queue: int = 10_000, max_batch: int = 500,
                 flush_seconds: float = 1.0) -> None:
        if max_queue < 1 or max_batch < 1 or not flush_seconds > 0:
            raise ValueError("max_queue and max_batch must be >= 1, flush_seconds > 0")
        self._write = write
        self._queue: queue.Queue[RequestEventRow | None] = queue.Queue(max_queue)
        self.max_batch = max_batch
        self.flush_seconds = flush_seconds
        self.dropped = Counter("inferwatch_gateway_events_dropped",
                               "Request events not stored: the store's queue was full",
                               registry=registry)
        self.stored = Counter("inferwatch_gateway_events_stored",
                              "Request events written to the store", registry=registry)
        self.failed = Counter("inferwatch_gateway_events_write_failed",
                              "Request events lost to a failed write to the store",
                              registry=registry)
        self._thread = threading.Thread(target=self._run, name="gateway-store-sink",
                                        daemon=True)

    def __call__(self, event: RequestEvent) -> None:
        try:
            self._queue.put_nowait(event_row(event, time.time(), time.perf_counter()))
        except queue.Full:
            self.dropped.inc()

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout_seconds: float = 10.0) -> None:
        """Write what is queued, then stop the writer."""
        if not self._thread.is_alive():
            return
        self._queue.put(None)  # the stop mark; waits only while the writer drains a full queue
        self._thread.join(timeout_seconds)

    def _run(self) -> None:
        stopping = False
        while not stopping:
            batch, stopping = self._next_batch()
            if batch:
                self._flush(batch)

    def _next_batch(self) -> tuple[list[RequestEventRow], bool]:
        """Rows until the batch is full, ``flush_seconds`` passed, or the stop mark."""
        batch: list[RequestEventRow] = []
        deadline = time.monotonic() + self.flush_seconds
        while len(batch) < self.max_batch:
            try:
                item = self._queue.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                break
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    def _flush(self, batch: list[RequestEventRow]) -> None:
        try:
            self._write(batch)
        except Exception:  # a store outage must not end the writer: later batches may land
            log.exception("cannot store %d request events", len(batch))
            self.failed.inc(len(batch))
        else:
            self.stored.inc(len(batch))
