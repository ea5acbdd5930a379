"""A trace's event list as its JSON text cut into pieces, never as one Python object per event.

The `traceEvents` array is split into pieces of about EVENT_PIECE_BYTES at the gaps between two
objects (`}` `,` `{`). A gap found by a regex may lie inside a string or a nested value; the piece
before it then does not decode as a JSON array on its own (it ends inside that string or value),
and the piece is grown until it does, so every accepted split is between two events. Each piece is
decoded once here to count its events (and to keep a few for the trace's window); whoever reads a
range of events decodes just the pieces that hold it. Memory then follows the JSON text and the
events a reader holds at once: 30 M empty events (`{}`, 90 MB) held 1.65 GB as slices.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Sequence
from typing import overload

import msgspec

from tracelake.ingest.limits import EVENT_PIECE_BYTES, TRACE_WINDOW_SAMPLE_EVENTS

_GAP = re.compile(rb"\}\s*,\s*\{")
_RAWS: msgspec.json.Decoder[list[msgspec.Raw]] = msgspec.json.Decoder(list[msgspec.Raw])
_UNDECODABLE = (msgspec.DecodeError, RecursionError)


class NotAnEventArray(ValueError):
    """The text is not a JSON array."""


class EventList(Sequence[msgspec.Raw]):
    """The events of a `traceEvents` array (its Raw JSON, brackets included), read piece by piece."""

    def __init__(self, array: memoryview) -> None:
        if array[:1] != b"[" or array[-1:] != b"]":
            raise NotAnEventArray("not a JSON array")
        self._text: memoryview | None = array[1:-1]
        self._ends: list[int] = []  # byte offset in _text where each piece ends
        self._starts: list[int] = []  # ... and starts
        self._first: list[int] = []  # index of each piece's first event
        self._count = 0
        self._cached: tuple[int, list[msgspec.Raw]] | None = None
        self.window_sample: list[msgspec.Raw] = []  # every k-th event (k a power of two), copied
        self._split()

    def _split(self) -> None:
        text = self._text
        assert text is not None
        stride, start = 1, 0
        while start < len(text):
            end, raws = self._next_piece(text, start)
            self._starts.append(start)
            self._ends.append(end)
            self._first.append(self._count)
            stride = self._sample(raws, stride)
            self._count += len(raws)
            gap = _GAP.match(text, end - 1) if end < len(text) else None
            start = gap.end() - 1 if gap is not None else len(text)

    def _next_piece(self, text: memoryview, start: int) -> tuple[int, list[msgspec.Raw]]:
        """The end of the piece starting at `start` and its events; the piece doubles until it
        ends between two events (or at the end of the array)."""
        size = EVENT_PIECE_BYTES
        while True:
            gap = _GAP.search(text, start + size) if start + size < len(text) else None
            end = gap.start() + 1 if gap is not None else len(text)
            try:
                return end, _RAWS.decode(b"".join((b"[", text[start:end], b"]")))
            except _UNDECODABLE:
                if gap is None:
                    raise
            size *= 2

    def _sample(self, raws: list[msgspec.Raw], stride: int) -> int:
        """Keep every `stride`-th event (by index in the trace), doubling the stride when twice the
        wanted sample is held, so the sample never depends on the trace's length."""
        first = -self._count % stride
        self.window_sample += [msgspec.Raw(bytes(raw)) for raw in raws[first::stride]]  # copied: never pins the piece
        while len(self.window_sample) >= 2 * TRACE_WINDOW_SAMPLE_EVENTS:  # it starts at event 0
            self.window_sample = self.window_sample[::2]
            stride *= 2
        return stride

    def _piece(self, index: int) -> list[msgspec.Raw]:
        if self._cached is not None and self._cached[0] == index:
            return self._cached[1]
        text = self._text
        if text is None:
            raise IndexError("the event list was released")
        raws = _RAWS.decode(b"".join((b"[", text[self._starts[index] : self._ends[index]], b"]")))
        self._cached = (index, raws)
        return raws

    def _range(self, start: int, stop: int) -> list[msgspec.Raw]:
        out: list[msgspec.Raw] = []
        piece = bisect.bisect_right(self._first, start) - 1
        while start < stop and piece < len(self._first):
            raws = self._piece(piece)
            first = self._first[piece]
            out += raws[start - first : stop - first]
            start = first + len(raws)
            piece += 1
        return out

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> msgspec.Raw: ...

    @overload
    def __getitem__(self, index: slice) -> list[msgspec.Raw]: ...

    def __getitem__(self, index: int | slice) -> msgspec.Raw | list[msgspec.Raw]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._count)
            if step == 1:
                return self._range(start, stop)
            return [self[i] for i in range(start, stop, step)]
        if not -self._count <= index < self._count:
            raise IndexError("event index out of range")
        index %= self._count
        return self._range(index, index + 1)[0]

    def __delitem__(self, index: slice) -> None:
        """`del events[:]` releases the JSON text (and with it the trace's bytes)."""
        if index != slice(None):
            raise TypeError("only the whole event list can be deleted")
        self._text, self._cached, self._count = None, None, 0
        self._starts, self._ends, self._first, self.window_sample = [], [], [], []

    def __iter__(self) -> Iterator[msgspec.Raw]:
        for piece in range(len(self._first)):
            yield from self._piece(piece)


def window_sample(events: Sequence[msgspec.Raw]) -> Sequence[msgspec.Raw]:
    """The events a trace's window is estimated from: an EventList's sample, else all of them."""
    return events.window_sample if isinstance(events, EventList) else events
