"""Which uploaded segments serve which offsets: what the objects alone cannot tell.

Kafka decides which remote segments are live from ``__remote_log_metadata``
(COPY_SEGMENT_FINISHED, not yet deleted); a reader of the objects alone sees every upload:
retried ones (a new segment id for the same offsets), unfinished ones, and the history
with its gaps. :func:`resolve` decides, deterministically, from the objects:

1. **Unfinished uploads are left out.** Aiven's plugin writes the ``.log``, then the
   ``.indexes``, then the manifest; a segment without its manifest was not finished (or is
   being deleted). LocalTieredStorage's fileset needs every file but the transaction
   index. Such a segment is ``dropped`` with the reason ``unfinished upload``.
2. **A segment with no complete batch is left out** (``empty``).
3. **A segment whose offsets lie inside another's is left out.** Equal ranges are a
   retried upload (``duplicate``); the copy kept is the one with the greater last leader
   epoch, then the larger, then the greater segment id (an arbitrary but fixed order).
   A range strictly inside a wider one is ``shadowed``.
4. **Overlaps are cut at offsets, never duplicated.** The segments left, sorted by start
   offset, have strictly increasing starts and ends; each serves ``[its start, the next
   one's start)``, the last one up to its end: where two overlap, the later-starting one
   (the newer leader's data when they differ) wins. The readers filter rows per segment
   (:class:`~kafkastore.log_view.ReadOnlyLog` serves each segment's range only).
5. **Gaps are reported**, never filled: ``(first missing, next present)`` for every
   segment that ends more than one offset before the next starts. Whether a gap is an
   error is the caller's (Spark's ``failOnDataLoss``; ``tiered export`` refuses one
   unless told).

End offsets come from the manifest's ``remoteLogSegmentMetadata`` (which Aiven's plugin
writes and ignores on read) as a hint, and are read from the segment's last batch where
there is no hint, where the hint is impossible, and for every segment a decision rests on
(see :func:`resolve`): a clean chain of segments costs no reads, a wrong hint cannot
drop, cut or hide data. ``kafkastore verify`` checks every hint against the batches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["RemoteSegment", "ResolvedPartition", "resolve", "UNFINISHED", "EMPTY",
           "DUPLICATE", "SHADOWED"]

UNFINISHED = "unfinished upload"
EMPTY = "empty"
DUPLICATE = "duplicate"
SHADOWED = "shadowed"


@dataclass
class RemoteSegment:
    """One uploaded segment as resolution sees it.

    ``objects`` is its :class:`~kafkastore.tiered.listing.SegmentObjects`; ``manifest``
    the parsed manifest (Aiven, complete segments); ``end_offset`` its last offset (None
    until known, or when it holds no complete batch); ``size`` the original segment's
    size in bytes; ``leader_epoch`` the last leader epoch it holds when known.
    """

    objects: object
    manifest: object | None = None
    end_offset: int | None = None
    size: int = 0
    leader_epoch: int = -1
    #: whether ``end_offset`` was read from the batches (else it is the manifest's hint)
    end_verified: bool = False

    @property
    def key(self):
        return self.objects.key

    @property
    def start_offset(self) -> int:
        return self.objects.key.start_offset

    @property
    def segment_id(self) -> str:
        return self.objects.key.segment_id

    @property
    def complete(self) -> bool:
        return self.objects.complete

    def __repr__(self) -> str:
        return (f"RemoteSegment({self.start_offset}-{self.segment_id}, end={self.end_offset}"
                f", size={self.size})")


@dataclass
class ResolvedPartition:
    """The outcome of :func:`resolve` for one partition: ``segments`` serve the offsets
    (sorted by start; each serves ``[start, serves_until[i])``), ``dropped`` are
    ``(segment, reason, detail)`` left out, ``gaps`` the ``(first missing offset, next
    present offset)`` ranges between served segments."""

    segments: list[RemoteSegment] = field(default_factory=list)
    dropped: list[tuple[RemoteSegment, str, str]] = field(default_factory=list)
    gaps: list[tuple[int, int]] = field(default_factory=list)

    @property
    def serves_until(self) -> list[int]:
        """One past the last offset each segment serves."""
        out = []
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1].start_offset if i + 1 < len(self.segments) else None
            end = seg.end_offset + 1
            out.append(end if nxt is None else min(end, nxt))
        return out

    @property
    def start_offset(self) -> int | None:
        return self.segments[0].start_offset if self.segments else None

    @property
    def end_offset(self) -> int | None:
        """One past the last offset served (the remote copy's "log end")."""
        return self.segments[-1].end_offset + 1 if self.segments else None

    @property
    def overlaps(self) -> list[tuple[RemoteSegment, RemoteSegment, int, int]]:
        """``(earlier, later, first, last)``: the offsets ``earlier`` holds that
        ``later`` serves instead."""
        out = []
        for a, b in zip(self.segments, self.segments[1:]):
            if a.end_offset >= b.start_offset:
                out.append((a, b, b.start_offset, a.end_offset))
        return out


def resolve(segments: Sequence[RemoteSegment],
            end_offset_of: Callable[[RemoteSegment], int | None]) -> ResolvedPartition:
    """Resolve one partition's uploads (see the module). ``end_offset_of`` reads a
    segment's real end offset from its batches. A segment's ``end_offset`` on entry is a
    hint (the manifest's): it is read for real where no hint is given or the hint is
    impossible, and for every segment a decision rests on (the ones dropped as
    duplicates or shadowed and the one kept instead, both sides of an overlap or a gap,
    and the last segment, whose end is the copy's), so a wrong hint can never drop,
    cut or hide data."""
    while True:
        out, deciding = _resolve_once(segments, end_offset_of)
        for a, b in zip(out.segments, out.segments[1:]):
            if a.end_offset + 1 != b.start_offset:     # an overlap or a gap
                deciding += [a, b]
        if out.segments:
            deciding.append(out.segments[-1])
        pending = list({id(s): s for s in deciding if not s.end_verified}.values())
        if not pending:
            return out
        for seg in pending:
            seg.end_offset = end_offset_of(seg)
            seg.end_verified = True


def _resolve_once(segments: Sequence[RemoteSegment],
                  end_offset_of: Callable[[RemoteSegment], int | None]
                  ) -> tuple[ResolvedPartition, list[RemoteSegment]]:
    out = ResolvedPartition()
    deciding: list[RemoteSegment] = []
    candidates = []
    for seg in segments:
        if not seg.complete:
            out.dropped.append((seg, UNFINISHED,
                                "missing " + ", ".join(seg.objects.missing)))
            continue
        if not seg.end_verified and (seg.end_offset is None
                                     or seg.end_offset < seg.start_offset):
            seg.end_offset = end_offset_of(seg)
            seg.end_verified = True
        if seg.end_offset is None or seg.end_offset < seg.start_offset:
            out.dropped.append((seg, EMPTY, "no complete batch"))
            continue
        candidates.append(seg)
    # the preferred copy first among equal starts: the widest, then the newest leader,
    # then the largest, then the greatest id
    candidates.sort(key=lambda s: (s.start_offset, -s.end_offset, -s.leader_epoch, -s.size,
                                   _desc(s.segment_id)))
    for seg in candidates:
        if out.segments and seg.end_offset <= out.segments[-1].end_offset:
            # sorted by start, so the last kept one starts at or before this one and,
            # ending at or after it, holds all of its offsets
            keeper = out.segments[-1]
            deciding += [seg, keeper]
            if (keeper.start_offset, keeper.end_offset) == (seg.start_offset,
                                                            seg.end_offset):
                out.dropped.append((seg, DUPLICATE, f"same offsets as {keeper.segment_id}"))
            else:
                out.dropped.append((seg, SHADOWED,
                                    f"offsets {seg.start_offset}..{seg.end_offset} are "
                                    f"served by {keeper.segment_id}"))
            continue
        out.segments.append(seg)
    for a, b in zip(out.segments, out.segments[1:]):
        if a.end_offset + 1 < b.start_offset:
            out.gaps.append((a.end_offset + 1, b.start_offset))
    return out, deciding


def _desc(text: str) -> tuple[int, ...]:
    """A key that sorts strings in descending order."""
    return tuple(-ord(c) for c in text)
