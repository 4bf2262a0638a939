"""Decoding requests whose per-token bookkeeping is deferred (the offline fast path's state).

While a request decodes, every fast step gives it one token: its computed count is a
constant plus the number of deferred steps, and the only steps where anything else
happens to it are known in advance — the one that fills a KV block (its prefix hash is
indexed; its next token needs a new block) and the one that reaches its length. So
``DeferredDecodes`` keeps, per decoder, that constant and the step of its next event,
and a step costs O(events), not O(batch), its pricing included (the decoders' contexts
are a running sum, ``totals``). A decoder's
tokens and token times reach its ``Request`` only when ``materialize`` is called: at a
block boundary (the hash needs the tokens), at its finish, before an engine step.

NOTE: "step T" here is the T-th deferred step of the current epoch (``len(times)``
after it); ``materialize_all`` starts a new epoch and shifts every figure with it.
"""

from __future__ import annotations

import bisect
from array import array

from engine.kv_cache import cdiv
from engine.request import Request
from engine.sim.runner import pseudo_random_tokens
from engine.sim.step_cost import BatchTotals

_ITEM_BYTES = array("q").itemsize
_MAX_DEFERRED_STEPS = 4096  # NOTE: bounds ``times`` when no block boundary flushes it


def by_seq(decoder: Decoder) -> int:
    """A decoder's place in the running order (a sort key)."""
    return decoder.seq


class Decoder:
    """A decoding request: ``offset + len(times)`` is its computed token count."""

    __slots__ = (
        "drawn",
        "drawn_bytes",
        "drawn_from",
        "end",
        "key",
        "last",
        "offset",
        "request",
        "seq",
        "since",
    )

    def __init__(self, request: Request, key: int, seq: int, now: int, left: int) -> None:
        self.request = request
        self.key = key
        self.seq = seq  # its place in the scheduler's running order
        self.since = now  # its first deferred step not yet on its Request
        self.offset = request.num_computed_tokens - now
        self.end = now + left  # the step that gives it its last token
        # ids drawn ahead (pseudo_random_tokens) from position ``drawn_from`` on, up to
        # ``last`` (the position after its last token)
        self.drawn: list[int] = []
        self.drawn_bytes = b""  # ``drawn`` as the KV cache hashes ids: array("q") bytes
        self.drawn_from = request.num_tokens
        self.last = request.num_tokens + left

    def tokens(self, first_position: int, count: int) -> list[int]:
        """The ids at ``count`` positions from ``first_position`` on (drawn once, up to
        its last token, in one vectorised pass, when first asked for)."""
        start = first_position - self.drawn_from
        if start < 0 or start + count > len(self.drawn):
            num = max(count, self.last - first_position)
            self.drawn = pseudo_random_tokens(self.key, first_position, num)
            self.drawn_bytes = array("q", self.drawn).tobytes()
            self.drawn_from, start = first_position, 0
        return self.drawn[start : start + count]

    def block_bytes(self, index: int, block_size: int) -> bytes:
        """The ids of block ``index`` of its tokens as ``array("q", ids).tobytes()``: those
        on its Request, then drawn ones (a filled block's need not be on it yet)."""
        first, stop = index * block_size, (index + 1) * block_size
        start = first - self.drawn_from
        if start >= 0 and start + block_size <= len(self.drawn):
            # NOTE: positions from ``drawn_from`` on are the Request's output positions: an
            # id on it there is the same draw
            return self.drawn_bytes[start * _ITEM_BYTES : (start + block_size) * _ITEM_BYTES]
        all_token_ids = self.request.all_token_ids
        known = len(all_token_ids)
        if stop <= known:
            ids = all_token_ids[first:stop]
        elif first >= known:
            ids = self.tokens(first, block_size)
        else:
            ids = all_token_ids[first:] + self.tokens(known, stop - known)
        return array("q", ids).tobytes()


class DeferredDecodes:
    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self.decoders: list[Decoder] = []  # running order
        self.times: list[float] = []  # end time of each deferred step
        # decoders whose next token starts a new block (running order once sorted)
        self.needing: list[Decoder] = []
        self._events: dict[int, list[Decoder]] = {}
        self._offset_sum = 0  # sum of the decoders' ``offset``: the batch's contexts

    def clear(self) -> None:
        """Forget every decoder (after ``materialize_all``)."""
        self.decoders, self.needing, self._events = [], [], {}
        self._offset_sum = 0
        self.times.clear()

    @staticmethod
    def holds_its_blocks(request: Request, num_blocks: int, block_size: int) -> bool:
        """True when a decoding request's blocks hold exactly its computed tokens rounded
        up to a block, which the event arithmetic below relies on."""
        return num_blocks == cdiv(request.num_computed_tokens, block_size)

    def track(self, decoder: Decoder) -> None:
        """Add an up-to-date decoder, in running order by ``seq``."""
        if self.decoders and self.decoders[-1].seq > decoder.seq:
            bisect.insort(self.decoders, decoder, key=by_seq)
        else:
            self.decoders.append(decoder)
        self._offset_sum += decoder.offset
        now = len(self.times)
        into_block = (decoder.offset + now) % self.block_size
        if not into_block:
            self.needing.append(decoder)
        self._schedule(decoder, min(decoder.end, now + self.block_size - into_block))

    def totals(self) -> BatchTotals:
        """The decoders' share of the coming step's batch: one new token each, at context
        its computed tokens + 1 (``BatchTotals.of`` their ``BatchItem(1, c)``, from the
        running sum of offsets instead of an item per decoder)."""
        num = len(self.decoders)
        contexts = self._offset_sum + num * (len(self.times) + 1)
        return BatchTotals(num, num, contexts, contexts)

    def advance(self, end_time: float) -> tuple[list[Decoder], list[Decoder]]:
        """Close a step that ended at ``end_time``: the decoders that filled a block and
        those that got their last token, each in running order."""
        self.times.append(end_time)
        now = len(self.times)
        self.needing = []
        events = self._events.pop(now, None)
        if not events:
            return [], []
        events.sort(key=by_seq)
        filled, done = [], []
        block_size, needing, schedule = self.block_size, self.needing, self._events.setdefault
        next_boundary = now + block_size
        for decoder in events:
            if not (decoder.offset + now) % block_size:
                filled.append(decoder)
            end = decoder.end
            if end == now:
                done.append(decoder)
            else:
                needing.append(decoder)  # NOTE: ``_schedule`` inline
                schedule(end if end < next_boundary else next_boundary, []).append(decoder)
        if done:
            finished = {id(d) for d in done}
            self.decoders = [d for d in self.decoders if id(d) not in finished]
            self._offset_sum -= sum(d.offset for d in done)
        return filled, done

    def materialize(self, decoder: Decoder) -> None:
        """Bring the decoder's deferred tokens and token times onto its ``Request``."""
        times = self.times
        num_deferred = len(times) - decoder.since
        if not num_deferred:
            return
        request = decoder.request
        # NOTE: a decode at context n (n tokens known) samples the token at position n
        tokens = decoder.tokens(request.num_tokens, num_deferred)
        request.output_token_ids.extend(tokens)
        request.output_token_counts.update(tokens)
        request.all_token_ids.extend(tokens)
        request.token_times.extend(times[decoder.since :])
        request.num_computed_tokens += num_deferred
        decoder.since = len(times)
        if request.num_computed_tokens != decoder.offset + len(times):
            raise RuntimeError(f"{request.request_id!r}: deferred tokens out of step")

    def materialize_all(self) -> None:
        """Bring every decoder up to date and start a new epoch (``times`` empty)."""
        for decoder in self.decoders:
            self.materialize(decoder)
        shift = len(self.times)
        if not shift:
            return
        for decoder in self.decoders:
            decoder.since -= shift
            decoder.offset += shift
            decoder.end -= shift
        self._offset_sum += shift * len(self.decoders)
        self._events = {step - shift: ds for step, ds in self._events.items()}
        self.times.clear()

    def flush_if_long(self) -> None:
        if len(self.times) > _MAX_DEFERRED_STEPS:
            self.materialize_all()

    def _schedule(self, decoder: Decoder, step: int) -> None:
        self._events.setdefault(step, []).append(decoder)
