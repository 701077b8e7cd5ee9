"""Timing read from SSE bytes, whatever way the network cuts them."""

from __future__ import annotations

import json

import pytest

from monitor.gateway.measure import RequestTiming, SseSplitter, StreamMeter, chunk_tokens


def sse(body: object) -> bytes:
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def content(text: str) -> bytes:
    return sse({"choices": [{"index": 0, "delta": {"content": text}}]})


STREAM = (sse({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})  # no token
          + sse({"choices": [{"index": 0, "delta": {"reasoning": "hmm"}}]})
          + content("a") + content("b")
          + sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}})
          + b"data: [DONE]\n\n")


@pytest.mark.parametrize("piece", [1, 7, 64, len(STREAM)],
                         ids=["byte-by-byte", "7-bytes", "64-bytes", "whole"])
def test_events_are_whole_however_the_bytes_arrive(piece: int):
    splitter = SseSplitter()
    events = [e for i in range(0, len(STREAM), piece) for e in splitter.feed(STREAM[i:i + piece])]
    assert len(events) == 6 and b"".join(events) == STREAM and splitter.rest() == b""


def test_crlf_events_are_split_too():
    assert SseSplitter().feed(b"data: 1\r\n\r\ndata: 2\r\n\r\n") == [b"data: 1\r\n\r\n",
                                                                    b"data: 2\r\n\r\n"]


def test_a_meter_times_token_chunks_and_cuts_only_the_usage_chunk():
    timing = RequestTiming(arrived_at=10.0)
    meter = StreamMeter(timing, strip_usage=True)
    events = SseSplitter().feed(STREAM)
    forwarded = b"".join(meter.feed(event, now) for event, now in
                         zip(events, [10.1, 10.2, 10.5, 10.6, 10.7, 10.7]))
    assert forwarded == STREAM.replace(events[4], b"")
    assert timing.ttft == pytest.approx(0.2)  # the reasoning chunk; the role chunk has none
    assert timing.ttfc == pytest.approx(0.5)
    assert timing.gaps == pytest.approx([0.3, 0.1])
    assert (timing.prompt_tokens, timing.num_output_tokens, timing.done) == (3, 3, True)


def test_tpot_is_e2e_less_ttft_over_the_tokens_after_the_first():
    timing = RequestTiming(arrived_at=0.0, first_token_at=0.5, finished_at=2.5,
                           num_token_chunks=5, completion_tokens=5)
    assert timing.tpot == pytest.approx(0.5)  # (2.5 - 0.5) / (5 - 1), worked by hand


@pytest.mark.parametrize(("choice", "expected"), [
    ({"delta": {"content": "x"}}, (True, True)),
    ({"delta": {"reasoning_content": "x"}}, (True, False)),
    ({"delta": {"tool_calls": [{"index": 0}]}}, (True, False)),
    ({"delta": {"role": "assistant", "content": ""}}, (False, False)),
    ({"text": "x"}, (True, True)),
    ({"text": ""}, (False, False)),
], ids=["content", "reasoning", "tool-call", "empty-delta", "completion-text", "empty-text"])
def test_which_chunks_carry_tokens(choice: dict[str, object], expected: tuple[bool, bool]):
    assert chunk_tokens({"choices": [choice]}) == expected
