"""Stop conditions and streamed text: what a step's new token adds to a request's output."""

from __future__ import annotations

from reference_server.sequence import FinishReason, Sequence


def finish_reason_for_token(seq: Sequence, token: int, max_model_len: int) -> FinishReason | None:
    """Stop on EOS (unless ignore_eos) or a stop token id; LENGTH at max_tokens or context."""
    params = seq.sampling
    if token in params.stop_token_ids or (not params.ignore_eos and token in params.eos_token_ids):
        return FinishReason.STOP
    if seq.num_output_tokens >= params.max_tokens or seq.num_tokens >= max_model_len:
        return FinishReason.LENGTH
    return None


def append_text(seq: Sequence, text: str, finishing: bool) -> tuple[str, bool]:
    """Add decoded text; return (the text safe to emit now, whether a stop string matched).

    Text that could still be the start of a stop string is held back until it cannot be,
    so a client never sees part of a stop string.
    """
    seq.output_text += text
    stops = seq.sampling.stop
    if stops:
        # Search only the tail that the new text could have completed a stop string in.
        longest = max(len(s) for s in stops)
        start = max(0, len(seq.output_text) - len(text) - longest + 1)
        hits = [i for s in stops if (i := seq.output_text.find(s, start)) >= 0]
        if hits:
            seq.output_text = seq.output_text[:min(hits)]
            return _emit(seq, len(seq.output_text)), True
        if not finishing:
            return _emit(seq, len(seq.output_text) - longest + 1), False
    return _emit(seq, len(seq.output_text)), False


def _emit(seq: Sequence, upto: int) -> str:
    if upto <= seq.num_emitted_chars:
        return ""
    delta = seq.output_text[seq.num_emitted_chars:upto]
    seq.num_emitted_chars = upto
    return delta
