"""Ctrl-C over a demo's life: it stops the start, then the run, never the shutdown."""

import asyncio
import os
import signal

import pytest

from monitor.stack.signals import Interrupts


def test_before_the_run_the_first_signal_interrupts_the_start():
    interrupts = Interrupts()
    with interrupts.installed(), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0)  # a point where Python runs the handler
    assert interrupts.exit_status == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored


def test_a_second_signal_and_any_while_stopping_are_only_noted():
    noted = []
    interrupts = Interrupts(lambda: noted.append(1))
    with interrupts.installed():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 0)
        os.kill(os.getpid(), signal.SIGINT)  # while the start unwinds: no second raise
        signal.sigtimedwait([], 0)
        interrupts.stopping = True
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0)
    assert noted == [1, 1]
    assert interrupts.exit_status == 130  # the first signal decides


def test_during_the_run_a_signal_sets_the_stop_event():
    interrupts = Interrupts()

    async def run() -> None:
        stop = asyncio.Event()
        interrupts.attach(asyncio.get_running_loop(), stop)
        os.kill(os.getpid(), signal.SIGINT)
        await asyncio.wait_for(stop.wait(), 5)
        interrupts.detach()

    with interrupts.installed():
        asyncio.run(run())
    assert interrupts.exit_status == 130


def test_a_signal_whose_interrupt_was_swallowed_still_stops_the_start_and_the_run():
    # logging's at-fork hook (run by every subprocess start) ignores exceptions: the
    # KeyboardInterrupt raised there is lost, but the signal is noted and acted on later.
    interrupts = Interrupts()
    with interrupts.installed():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            signal.sigtimedwait([], 0)
        except KeyboardInterrupt:
            pass  # swallowed, as in the hook
        with pytest.raises(KeyboardInterrupt):
            interrupts.raise_if_received()

        async def run() -> bool:
            stop = asyncio.Event()
            interrupts.attach(asyncio.get_running_loop(), stop)
            return stop.is_set()

        assert asyncio.run(run())
    assert interrupts.exit_status == 128 + signal.SIGTERM
