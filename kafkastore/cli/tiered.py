"""The CLI on tiered-storage (KIP-405) copies: ``--tiered`` and ``kafkastore tiered``.

``describe``, ``consume``, ``dump-log`` and ``verify`` take ``--tiered``: the directory
(for ``dump-log``, each file) is then a tiered copy, the objects a RemoteStorageManager
uploaded (Aiven's plugin, or Kafka's LocalTieredStorage: ``--layout``, detected when not
given), read through :func:`~kafkastore.tiered.tiered_storage.open_tiered` as a virtual
log directory (``<topic>-<partition>/<base>.log|.index|.timeindex|.txnindex|.snapshot``),
with ``--key-prefix`` (Aiven's ``storage.key.prefix``), ``--key-ring ID=KEY.pem,...``
(the private keys of encrypted segments) and ``--storage-option`` for the store (these
options are :func:`kafkastore.cli.shared.tiered_options`; :func:`register` adds the
reader that takes a command with ``--tiered``):

``describe``
    The usual table (from the served segments), then per partition every upload: served
    ones (offsets, bytes, chunks, transforms, segment id; the offsets a segment serves
    when the next one cuts it), dropped ones with the reason (unfinished upload,
    duplicate, shadowed, empty, an unreadable manifest) and the gaps. ``--json`` adds
    ``topic_id``, ``layout``, ``uploads``, ``gaps`` and ``needs_key`` to each
    partition's object. An encrypted partition without its key is not resolved: its
    uploads are ``listed`` from the manifests, a note on stderr names the key ids and
    ``--key-ring``, exit code 0.
``consume``
    The served segments' records, as for a log directory (a gap is said on stderr).
``dump-log``
    Each file is ``<copy>/<topic>-<partition>/<name>`` (a served segment's file, as
    ``describe`` lists them) or ``<copy>/.segments/<topic>-<partition>/<segment id>/
    <name>`` (any complete upload): the dump is Kafka's over the original segment, line
    for line what ``kafka-dump-log.sh`` prints for the restored file but for the name.
``verify``
    Per served segment: every chunk of the ``.log`` object detransforms (one line per bad
    chunk naming the object and the chunk), the batches chain (CRCs, offsets increasing
    from the segment's start), the indexes agree with the batches (their sanity check
    and ``kafka-dump-log --verify-index-only``'s checks), the transaction index and
    producer snapshot parse, and the manifest's ``remoteLogSegmentMetadata`` start and
    end offsets are the batches'; every upload's manifest parses. Exit code 1 on any
    problem.

``kafkastore tiered export COPY DEST`` restores partitions to ordinary partition
directories (:mod:`kafkastore.tiered.export`); ``kafkastore tiered upload PARTITION_DIR
DEST`` writes a copy of a partition's rolled segments
(:func:`kafkastore.tiered.upload.upload_partition`; those the copy holds complete are
skipped unless ``--force``); ``kafkastore tiered keygen FILE`` makes an RSA key.

Errors: as :mod:`kafkastore.cli.uri` (a missing copy is ``<uri>: no such tiered copy``,
exit code 2; the store's failures one line each). Thread-safety: one thread.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys

from kafkastore.cli.shared import (
    EXIT_OK,
    CommandLine,
    UsageError,
    cleanup_policies,
    consume_log,
    describe_row,
    one_line,
    open_storage,
    parse_storage_options,
    print_describe,
    print_verified,
    scan_log,
    scan_problem,
    storage_option,
    tiered_options,
)
from kafkastore.errors import KafkaStoreError, MissingKeyError, StorageFileNotFoundError
from kafkastore.partition_metadata import TOPIC_ID_FORMAT, check_topic_id

__all__ = ["register", "check_flags", "run", "open_copy", "describe_tiered",
           "consume_tiered", "verify_tiered", "dump_resolver"]

_SEGMENTS_DIR = ".segments"


# -- options and opening ----------------------------------------------------------------


def register(cli: CommandLine) -> None:
    """``kafkastore tiered export|upload``, and the reader of ``describe``, ``consume``,
    ``dump-log`` and ``verify`` with ``--tiered``."""
    _add_commands(cli)
    cli.add_reader(_read)


def _read(args: argparse.Namespace, command: str):
    """``command`` on a tiered copy when ``--tiered`` says so (:func:`run`); None
    otherwise."""
    return run(args, command) if check_flags(args) else None


def check_flags(args: argparse.Namespace) -> bool:
    """Whether the command reads a tiered copy (``--tiered``); the copy's other options
    without it are a usage error."""
    if args.tiered:
        return True
    if args.layout or args.key_prefix or args.key_ring:
        raise UsageError("--layout, --key-prefix and --key-ring describe a tiered copy: "
                         "add --tiered")
    return False


def _key_ring(spec: str | None):
    if not spec:
        return None
    from kafkastore.tiered.crypto import KeyRing

    try:
        return KeyRing.from_spec(spec)
    except (KafkaStoreError, ValueError, OSError) as exc:
        raise UsageError(f"--key-ring: {getattr(exc, 'message', exc)}") from None


def open_copy(args: argparse.Namespace, uri: str, *, strict: bool = True):
    """The :class:`~kafkastore.tiered.tiered_storage.TieredCopy` at ``uri`` with the
    command's options."""
    from kafkastore.tiered import open_tiered

    options = parse_storage_options(args)
    open_storage(uri, options)   # an unknown option is a usage error, before any listing
    try:
        return open_tiered(uri, layout=args.layout, storage_options=options,
                           key_ring=_key_ring(args.key_ring),
                           key_prefix=args.key_prefix or "", strict=strict)
    except StorageFileNotFoundError:
        raise UsageError(f"{uri}: no such tiered copy") from None


def _partitions(copy, topic: str | None = None, partition: int | None = None):
    return [tp for tp in copy.partitions() if (topic is None or tp.topic == topic)
            and (partition is None or tp.partition == partition)]


def _dir(tp) -> str:
    return f"{tp.topic}-{tp.partition}"


def run(args: argparse.Namespace, command: str):
    """``command`` with ``--tiered``: its exit code (for ``dump-log``, the resolver of
    its files, :func:`dump_resolver`)."""
    if command == "dump-log":
        return dump_resolver(args, [f for f in args.files.split(",") if f])
    return {"describe": describe_tiered, "consume": consume_tiered,
            "verify": verify_tiered}[command](args)


# -- describe ---------------------------------------------------------------------------


def _transforms(seg) -> str:
    m = seg.manifest
    if m is None:
        return "none"
    out = ["zstd"] if m.compression else []
    if m.encryption is not None:
        out.append(f"aes-gcm (key {m.encryption.key_id})")
    return "+".join(out) or "none"


def _upload(copy, given: str, tp, seg, status: str, reason: str | None = None,
            detail: str | None = None, serves_until: int | None = None) -> dict:
    """One upload of a partition as ``describe`` shows it."""
    m = seg.manifest
    base = f"{seg.start_offset:020d}.log"
    if status == "served":
        file = f"{given}/{_dir(tp)}/{base}"
    elif seg.complete:
        file = f"{given}/{_SEGMENTS_DIR}/{_dir(tp)}/{seg.segment_id}/{base}"
    else:
        file = None
    return {"status": status, "segment_id": seg.segment_id,
            "start_offset": seg.start_offset, "end_offset": seg.end_offset,
            "serves_until": serves_until, "bytes": seg.size if seg.complete else None,
            "chunks": len(m.chunk_index) if m is not None else None,
            "transforms": _transforms(seg), "reason": reason, "detail": detail,
            "file": file,
            "objects": sorted(copy.storage.uri(i.path) for i in seg.objects.files.values())}


def _uploads(copy, given: str, tp) -> list[dict]:
    res = copy.resolution(tp)
    out = [_upload(copy, given, tp, seg, "served", serves_until=until)
           for seg, until in zip(res.segments, res.serves_until)]
    out += [_upload(copy, given, tp, seg, "dropped", reason, detail)
            for seg, reason, detail in res.dropped]
    for objs, exc in copy.errors(tp):
        out.append({"status": "dropped", "segment_id": objs.key.segment_id,
                    "start_offset": objs.key.start_offset, "end_offset": None,
                    "serves_until": None, "bytes": None, "chunks": None, "transforms": None,
                    "reason": "unreadable manifest", "detail": str(exc), "file": None,
                    "objects": sorted(copy.storage.uri(i.path) for i in objs.files.values())})
    out.sort(key=lambda u: (u["start_offset"], u["status"] != "served", u["segment_id"]))
    return out


@one_line
def describe_tiered(args: argparse.Namespace) -> int:
    """``describe --tiered``: the table, then every partition's uploads and gaps."""
    from kafkastore.segment import log_file_offset

    given = args.directory.rstrip("/")
    with open_copy(args, args.directory, strict=False) as copy:
        ts = copy.tiered_storage
        parts = _partitions(copy, args.topic)
        policies, note = cleanup_policies(args, sorted({tp.topic for tp in parts}))

        def scan(path):
            with ts.open(path) as reader:
                return scan_log(reader.read, reader.size, validate=False)

        rows = []
        for tp in parts:
            try:
                files = [i for i in ts.list_dir(_dir(tp)) if not i.is_dir]
                segments = sorted((log_file_offset(i.name), i.size, i.path) for i in files
                                  if log_file_offset(i.name) is not None)
                uploads = _uploads(copy, given, tp)
                remote = sum(i.size for seg in copy.uploads(tp)
                             for i in seg.objects.files.values())
                row = describe_row(args, tp, segments, remote, policies, scan,
                                   copy.topic_id(tp.topic))
                row.update({"uploads": uploads, "needs_key": [],
                            "gaps": [list(g) for g in copy.resolution(tp).gaps]})
            except MissingKeyError:
                row = _listed_row(copy, given, tp, policies)
            row.update({"layout": copy.layout})
            rows.append(row)
    print_describe(args, rows, note)
    for row in rows:
        if row["needs_key"]:
            ids = ", ".join(repr(k) for k in row["needs_key"])
            print(f"kafkastore describe: {row['topic']}-{row['partition']}: encrypted with "
                  f"RSA key {ids}, which no --key-ring given holds: uploads listed from their "
                  "manifests only (offsets, sizes, chunks); which of them serve, the "
                  "gaps, the records and timestamps need the key: give --key-ring "
                  "ID=KEY.pem", file=sys.stderr)
    if not args.json:
        for row in rows:
            _print_uploads(row)
    return EXIT_OK


def _listed_row(copy, given: str, tp, policies) -> dict:
    """``describe``'s row of a partition that cannot be resolved without a key (its
    batches are encrypted): what the listing and the manifests tell, every complete
    upload ``listed`` (not served or dropped: deciding that reads batches), offsets from
    the manifests' ``remoteLogSegmentMetadata``, the keys it needs in ``needs_key``."""
    from kafkastore.tiered.resolve import UNFINISHED

    listed = copy.listed_uploads(tp)
    ring = copy.tiered_storage.key_ring
    uploads = []
    for seg in listed:
        if not seg.complete:
            uploads.append(_upload(copy, given, tp, seg, "dropped", UNFINISHED,
                                   "missing " + ", ".join(seg.objects.missing)))
        else:
            uploads.append(_upload(copy, given, tp, seg, "listed"))
    complete = [seg for seg in listed if seg.complete]
    ends = [seg.end_offset + 1 for seg in complete if seg.end_offset is not None]
    start = min((seg.start_offset for seg in complete), default=0)
    policy, source = policies[tp.topic]
    return {"topic": tp.topic, "partition": tp.partition,
            "topic_id": copy.topic_id(tp.topic), "segments": len(complete),
            "log_start_offset": start, "log_end_offset": max(ends, default=start),
            "log_bytes": sum(seg.size for seg in complete),
            "bytes_on_disk": sum(i.size for seg in listed
                                 for i in seg.objects.files.values()),
            "max_timestamp": None, "invalid_tail_bytes": None,
            "cleanup_policy": policy, "cleanup_policy_source": source,
            "gaps": None, "uploads": uploads,
            "needs_key": sorted({seg.manifest.encryption.key_id for seg in complete
                                 if seg.manifest is not None
                                 and seg.manifest.encryption is not None
                                 and seg.manifest.encryption.key_id not in (ring or ())})}


def _print_uploads(row: dict) -> None:
    served = sum(u["status"] == "served" for u in row["uploads"])
    gaps = row["gaps"] or []
    if row["needs_key"]:
        listed = sum(u["status"] == "listed" for u in row["uploads"])
        summary = (f"{listed} listed, {len(row['uploads']) - listed} dropped (not "
                   f"resolved: needs --key-ring for key {', '.join(row['needs_key'])})")
    else:
        summary = (f"{served} served, {len(row['uploads']) - served} dropped, "
                   + (f"{len(gaps)} gap(s)" if gaps else "no gaps"))
    print(f"\n{row['topic']}-{row['partition']}: topic id {row['topic_id']}, {row['layout']} "
          f"layout, {summary}")
    print(f"  {'status':8} {'start':>12} {'end':>12} {'bytes':>12} {'chunks':>7}  "
          f"{'transforms':20} segment id")
    lines = []
    for u in row["uploads"]:
        end = "-" if u["end_offset"] is None else str(u["end_offset"])
        size = "-" if u["bytes"] is None else str(u["bytes"])
        chunks = "-" if u["chunks"] is None else str(u["chunks"])
        text = (f"  {u['status']:8} {u['start_offset']:>12} {end:>12} {size:>12} "
                f"{chunks:>7}  {u['transforms'] or '-':20} {u['segment_id']}")
        if u["reason"]:
            text += f"  {u['reason']}: {u['detail']}"
        elif u["serves_until"] is not None and u["serves_until"] <= (u["end_offset"] or 0):
            text += f"  serves {u['start_offset']}..{u['serves_until'] - 1} (the next " \
                    "segment the rest)"
        lines.append((u["start_offset"], text))
    for lo, hi in gaps:
        lines.append((lo, f"  {'gap':8} {lo:>12} {hi - 1:>12}  {hi - lo} offsets in no "
                          "served segment"))
    for _, text in sorted(lines, key=lambda item: item[0]):
        print(text)


# -- consume ----------------------------------------------------------------------------


@one_line
def consume_tiered(args: argparse.Namespace) -> int:
    """``consume --tiered``: the served segments' records, as for a log directory."""
    with open_copy(args, args.directory) as copy:
        parts = _partitions(copy, args.topic, args.partition)
        if not parts:
            raise UsageError(f"{args.directory}: no partition of topic {args.topic!r}"
                             + ("" if args.partition is None
                                else f" numbered {args.partition}") + " in the tiered copy")
        remaining = args.max_records
        for tp in parts:
            for lo, hi in copy.resolution(tp).gaps:
                print(f"kafkastore consume: {_dir(tp)}: offsets {lo}..{hi - 1} are in no "
                      "segment of the copy (a gap)", file=sys.stderr)
            log = copy.log(tp)
            try:
                remaining = consume_log(args, tp, log, remaining)
            finally:
                log.close()
    return EXIT_OK


# -- dump-log ---------------------------------------------------------------------------


def _split_name(name: str) -> tuple[str, str]:
    """``(copy root, path in the virtual log directory)`` of a ``dump-log`` file."""
    parts = name.rstrip("/").split("/")
    cut = 4 if len(parts) >= 5 and parts[-4] == _SEGMENTS_DIR else 2
    if len(parts) <= cut:
        return ".", "/".join(parts)
    return "/".join(parts[:-cut]) or "/", "/".join(parts[-cut:])


def dump_resolver(args: argparse.Namespace, files: list[str]):
    """``resolve(name) -> (storage, path)`` for ``dump-log --tiered``: each copy named is
    opened once, now (so a missing copy or a bad option is a usage error)."""
    copies = {}
    for f in files:
        root = _split_name(f)[0]
        if root not in copies:
            copies[root] = open_copy(args, root)

    def resolve(name: str):
        root, path = _split_name(name)
        copy = copies.get(root) or copies.setdefault(root, open_copy(args, root))
        return copy.tiered_storage, path

    return resolve


# -- verify -----------------------------------------------------------------------------


def _line(exc, where: str, note: str = "") -> str:
    """A problem line for ``exc``: the object it names (else ``where``), then what."""
    path = getattr(exc, "path", None) or where
    text = getattr(exc, "message", None) or str(exc)
    if text.startswith(path + ": "):
        text = text[len(path) + 2:]
    return f"{path}: {text}{note}"


class _Verifier:
    """The checks of ``verify --tiered`` on one copy; ``problems`` counts the lines."""

    def __init__(self, copy) -> None:
        self.copy = copy
        self.ts = copy.tiered_storage
        self.problems = 0

    def say(self, text: str) -> None:
        self.problems += 1
        print(text)

    def chunks(self, seg) -> bool:
        """Every chunk of an Aiven segment's ``.log`` object detransforms; False if not."""
        from kafkastore.errors import TieredStorageError

        m = seg.manifest
        if m is None:   # LocalTieredStorage: the object is the segment
            return True
        storage = self.copy.storage
        info = seg.objects.files["log"]
        uri = storage.uri(info.path)
        index = m.chunk_index
        if info.size != index.transformed_file_size:
            self.say(f"{uri}: the object has {info.size} bytes; its chunk index says "
                     f"{index.transformed_file_size} ({len(index)} chunks)")
            return False
        if not m.compression and m.encryption is None and index.is_identity:
            return True
        try:
            transform = self.ts.transform(seg)
        except TieredStorageError as exc:
            self.say(_line(exc, uri))
            return False
        ok = True
        chunks = index.chunks()
        with storage.open(info.path, info.size) as reader:
            i = 0
            while i < len(chunks):
                # ranged reads of up to 8 MiB of adjacent chunks
                run = [chunks[i]]
                while i + len(run) < len(chunks) and \
                        sum(c.transformed_size for c in run) < (8 << 20):
                    run.append(chunks[i + len(run)])
                i += len(run)
                start = run[0].transformed_position
                blob = reader.read(start, sum(c.transformed_size for c in run))
                for c in run:
                    part = blob[c.transformed_position - start:
                                c.transformed_position - start + c.transformed_size]
                    try:
                        transform.detransform(part, c, path=uri)
                    except TieredStorageError as exc:
                        ok = False
                        self.say(f"{uri}: chunk {c.id} at position {c.transformed_position}: "
                                 f"{exc.message}")
        return ok

    def segment(self, tp, seg) -> None:
        """The checks of one served segment (see the module)."""
        from kafkastore.errors import TieredStorageError

        if not self.chunks(seg):
            return
        vlog = f"{_dir(tp)}/{seg.start_offset:020d}.log"
        uri = self.ts.uri(vlog)
        try:
            with self.ts.open(vlog) as reader:
                entries, valid, size, error = scan_log(reader.read, reader.size)
        except TieredStorageError as exc:   # a read the scan made
            self.say(_line(exc, uri))
            return

        def where(position: int) -> str:
            m = seg.manifest
            if m is None:   # LocalTieredStorage: no chunks
                return f"position {position}"
            chunk = m.chunk_index.find(position)
            return f"position {position}" + ("" if chunk is None else f" (chunk {chunk.id})")

        if (line := scan_problem(uri, valid, size, error, where(valid))) is not None:
            self.say(line)
        prev = seg.start_offset - 1
        for position, _size, magic, base, last, _ts in entries:
            if magic < 2:
                base = last   # a legacy entry holds its last offset only
            if base <= prev or last < base:
                self.say(f"{uri}: the batch at {where(position)} holds offsets {base}..{last},"
                         f" which do not follow offset {prev}")
            prev = max(prev, last)
        if error is None and valid == size:   # else the batches' end is not known
            self.hints(seg, entries)
        self.indexes(tp, seg)

    def hints(self, seg, entries) -> None:
        """The manifest's remoteLogSegmentMetadata start and end offsets."""
        m = seg.manifest
        if m is None or not entries:
            return
        uri = self.copy.storage.uri(seg.objects.files["rsm-manifest"].path)
        start, end = m.start_offset_hint(), m.end_offset_hint()
        if start is not None and start != seg.start_offset:
            self.say(f"{uri}: remoteLogSegmentMetadata startOffset {start}, but the segment "
                     f"starts at {seg.start_offset}")
        if end is not None and end != entries[-1][4]:
            self.say(f"{uri}: remoteLogSegmentMetadata endOffset {end}, but the batches end "
                     f"at {entries[-1][4]}")

    def indexes(self, tp, seg) -> None:
        """The indexes' sanity checks and agreement with the batches; the transaction
        index and the producer snapshot parse."""
        from kafkastore.dump import DumpOptions, dump_files
        from kafkastore.index import OffsetIndexView, TimeIndexView
        from kafkastore.producer_state import parse_snapshot
        from kafkastore.txn_index import parse_aborted_txns

        prefix = f"{_dir(tp)}/{seg.start_offset:020d}"
        present = []
        for cls, suffix in ((OffsetIndexView, ".index"), (TimeIndexView, ".timeindex")):
            shown = self.ts.uri(prefix + suffix)
            try:
                data = self.ts.read_file(prefix + suffix)
                if data is None:
                    self.say(f"{shown}: missing (recovery rebuilds it)")
                    continue
                cls(data, seg.start_offset, shown, trusted=True).sanity_check(full=True)
                present.append(prefix + suffix)
            except KafkaStoreError as exc:
                self.say(f"{shown}: {exc}")
        for path, parse in ((prefix + ".txnindex", parse_aborted_txns),
                            (f"{_dir(tp)}/{seg.end_offset + 1:020d}.snapshot", parse_snapshot)):
            try:
                data = self.ts.read_file(path)
                if data is not None:
                    parse(data, self.ts.uri(path))
            except KafkaStoreError as exc:
                self.say(f"{self.ts.uri(path)}: {exc}")
        if len(present) < 2:
            return
        # kafka-dump-log --verify-index-only: every entry against the batch it names
        out = io.StringIO()
        dump_files(present, DumpOptions(verify_index_only=True, json=True), out,
                   io.StringIO(), resolve=lambda name: (self.ts, name))
        for line in out.getvalue().splitlines():
            obj = json.loads(line)
            if obj.get("type") == "problem" or obj.get("type") == "error":
                detail = {k: v for k, v in obj.items() if k not in ("type", "file")}
                self.say(f"{self.ts.uri(obj.get('file', prefix))}: index does not agree with "
                         f"the batches: {json.dumps(detail)}")


@one_line
def verify_tiered(args: argparse.Namespace) -> int:
    """``verify --tiered`` (see the module); read-only."""
    if args.repair:
        raise UsageError("--repair rewrites files; a tiered copy is read-only here: "
                         "restore it (kafkastore tiered export) and repair the restored "
                         "directory")
    with open_copy(args, args.directory, strict=False) as copy:
        check = _Verifier(copy)
        parts = _partitions(copy, args.topic)
        for tp in parts:
            try:
                served = copy.resolution(tp).segments
            except KafkaStoreError as exc:   # resolving reads batches: a key, a chunk
                check.say(_line(exc, copy.uri, f" ({_dir(tp)} cannot be resolved)"))
                continue
            for objs, exc in copy.errors(tp):
                check.say(_line(exc, objs.prefix))
            for seg in served:
                check.segment(tp, seg)
    return print_verified(len(parts), check.problems, " of the tiered copy")


# -- kafkastore tiered export | upload ----------------------------------------------------


def _cmd_export(args: argparse.Namespace) -> int:
    from kafkastore.tiered.export import export

    with open_copy(args, args.copy) as copy:
        done = export(copy, args.dest, topic=args.topic, partition=args.partition,
                      allow_gaps=args.allow_gaps, allow_overlap=args.allow_overlap)
    for p in done:
        tp = p.topic_partition
        print(f"{_dir(tp)}: {len(p.segments)} segment(s), offsets {p.log_start_offset}.."
              f"{p.log_end_offset - 1}, {p.bytes} bytes -> {p.path}")
        for lo, hi in p.gaps:
            print(f"{_dir(tp)}: gap: offsets {lo}..{hi - 1} are in no segment")
        for base, at in p.cut:
            print(f"{_dir(tp)}: segment {base} truncated at {at} (it overlapped the next)")
    return EXIT_OK


def _cmd_upload(args: argparse.Namespace) -> int:
    from kafkastore.storage import split_uri
    from kafkastore.tiered.upload import UploadOptions, upload_partition

    spec = args.key_ring
    if args.active_key:
        if not spec:
            raise UsageError("--active-key names a key of --key-ring")
        spec = f"{spec};active={args.active_key}"
    if args.chunk_size is not None and args.chunk_size < 1:
        raise UsageError(f"--chunk-size must be at least 1, not {args.chunk_size}")
    if args.topic_id is not None:
        try:
            check_topic_id(args.topic_id)
        except ValueError:
            raise UsageError(f"--topic-id {args.topic_id!r} is not a topic id: it is "
                             f"{TOPIC_ID_FORMAT}") from None
    try:
        bases = None if args.segments is None else \
            [int(s) for s in args.segments.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--segments expects base offsets, not {args.segments!r}") from None
    kwargs = {"layout": args.layout or "aiven", "key_prefix": args.key_prefix or "",
              "compression": args.compression,
              "compression_heuristic": args.compression_heuristic,
              "key_ring": _key_ring(spec)}
    if args.chunk_size is not None:
        kwargs["chunk_size"] = args.chunk_size
    options = parse_storage_options(args)
    open_storage(args.dest, options)
    # --storage-option: the destination's, and the source's when it is a URI too
    source_options = options if split_uri(args.partition_dir)[0] else None
    done = upload_partition(args.partition_dir, args.dest, options=UploadOptions(**kwargs),
                            storage_options=options, base_offsets=bases,
                            topic_id=args.topic_id, source_storage_options=source_options,
                            force=args.force)
    for seg in done:
        k = seg.key
        what = "already in the copy, skipped" if seg.skipped else \
            f"{len(seg.objects)} objects, {seg.bytes} bytes"
        print(f"{k.topic}-{k.partition}: {k.start_offset:020d}-{k.segment_id}: offsets "
              f"{k.start_offset}..{seg.end_offset}, {what}")
    skipped = sum(seg.skipped for seg in done)
    print(f"uploaded {len(done) - skipped} segment(s) to {args.dest}"
          + (f", skipped {skipped} the copy already holds complete (--force uploads them "
             "again)" if skipped else ""))
    return EXIT_OK


#: The largest key ``tiered keygen`` makes (generation time grows with the cube of it).
_MAX_KEYGEN_BITS = 16384


def _exists(path: str) -> UsageError:
    return UsageError(f"{path} exists: not overwritten (remove it, or name another file)")


def _write_new(path: str, data: bytes) -> None:
    """``data`` to a new file readable by its owner only (0600); an existing file is a
    usage error, never overwritten (a key lost is every copy it encrypted lost)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise _exists(path) from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot create it: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _cmd_keygen(args: argparse.Namespace) -> int:
    from kafkastore.tiered.crypto import RECOMMENDED_KEY_BITS, KeyRing

    if not RECOMMENDED_KEY_BITS <= args.bits <= _MAX_KEYGEN_BITS:
        raise UsageError(f"--bits must be in [{RECOMMENDED_KEY_BITS}, {_MAX_KEYGEN_BITS}], "
                         f"not {args.bits}")
    for path in filter(None, (args.file, args.public_key)):
        if os.path.lexists(path):   # before the key is made: both files or neither
            raise _exists(path)
    ring, pem = KeyRing.generate("new", args.bits)
    _write_new(args.file, pem)
    print(f"wrote a {args.bits}-bit RSA private key (PKCS#8 PEM, mode 0600) to {args.file}")
    if args.public_key:
        _write_new(args.public_key, ring.public_key_pem("new"))
        print(f"wrote its public key (X.509 PEM) to {args.public_key}")
    print(f"use it as --key-ring ID={args.file} (ID: any name without ':'; the manifests "
          "record it)")
    return EXIT_OK


def _add_commands(cli: CommandLine) -> None:
    """``kafkastore tiered export``, ``upload`` and ``keygen``."""
    import textwrap

    fmt = argparse.RawDescriptionHelpFormatter   # the examples keep their lines
    tiered = cli.sub.add_parser(
        "tiered", help="tiered-storage (KIP-405) copies: export one to partition "
        "directories, upload a partition's segments as one, make a key",
        description="Tiered-storage copies. describe, consume, dump-log and verify read "
        "them with --tiered.")
    tsub = tiered.add_subparsers(dest="tiered_command", required=True)
    p = tsub.add_parser(
        "export", help="restore a tiered copy to ordinary partition directories",
        description=textwrap.fill(
            "Restore a tiered copy to DEST/<topic>-<partition> directories that Kafka and "
            "kafkastore open: byte-identical segments and indexes, producer snapshots, "
            "leader epochs, topic id, checkpoints. Refuses a non-empty partition "
            "directory, gaps (--allow-gaps) and overlapping segments (--allow-overlap)."),
        epilog="example:\n  kafkastore tiered export s3://bucket/tiered ./restored "
        "--topic orders --storage-option region=eu-west-1", formatter_class=fmt)
    p.add_argument("copy", help="the tiered copy: a path or URI")
    p.add_argument("dest", help="the log directory to restore into (local)")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--allow-gaps", action="store_true",
                   help="restore a partition with gaps, the segments as they are")
    p.add_argument("--allow-overlap", action="store_true",
                   help="restore overlapping segments, each cut where the next one starts "
                   "(Kafka's truncation: the cut segment is not byte-identical)")
    tiered_options(p, flag=False)
    storage_option(p)
    p.set_defaults(func=_cmd_export)
    p = tsub.add_parser(
        "upload", help="upload a partition's rolled segments as a tiered copy",
        description=textwrap.fill(
            "Write a partition directory's rolled segments (all but the active one, or "
            "--segments) as a RemoteStorageManager would: Aiven's layout (chunked, "
            "optionally zstd and encrypted) or Kafka's LocalTieredStorage."),
        epilog="example:\n  kafkastore tiered upload ./logs/orders-0 s3://bucket/tiered "
        "--compression --key-ring k1=k1.pem --active-key k1", formatter_class=fmt)
    p.add_argument("partition_dir", help="a partition directory (<topic>-<partition>): a "
                   "path or URI")
    p.add_argument("dest", help="where the copy goes: a path or URI")
    p.add_argument("--chunk-size", type=int, help="Aiven chunk.size in bytes")
    p.add_argument("--compression", action="store_true", help="zstd per chunk (Aiven)")
    p.add_argument("--compression-heuristic", action="store_true",
                   help="compress only segments whose batches are not compressed (Aiven)")
    p.add_argument("--active-key", help="the key id of --key-ring that encrypts")
    p.add_argument("--segments", help="comma-separated base offsets of the segments to "
                   "upload (default: every rolled segment)")
    p.add_argument("--topic-id", help="the topic id, a Kafka Uuid: 22 characters of "
                   "URL-safe base64 without padding, as kafka-topics --describe or "
                   "kafkastore describe show it (default: the directory's "
                   "partition.metadata, which kafkastore produce writes)")
    p.add_argument("--force", action="store_true",
                   help="upload every segment again, even those the copy already holds "
                   "complete (same offsets and sizes by their manifest), which are "
                   "skipped by default")
    tiered_options(p, flag=False, writing=True)
    storage_option(p)
    p.set_defaults(func=_cmd_upload)
    p = tsub.add_parser(
        "keygen", help="make an RSA key pair for encrypted tiered copies",
        description=textwrap.fill(
            "Write a new RSA private key as an unencrypted PKCS#8 PEM file (mode 0600), "
            "the form --key-ring and Aiven's plugin read; never overwrites a file. "
            "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 makes the same "
            "kind of file."),
        epilog="example:\n  kafkastore tiered keygen k1.pem --public-key k1.pub.pem\n"
        "  kafkastore tiered upload ./logs/orders-0 s3://bucket/tiered --key-ring "
        "k1=k1.pem", formatter_class=fmt)
    p.add_argument("file", help="the private key file to create")
    p.add_argument("--bits", type=int, default=2048,
                   help="the modulus size (default 2048, at least 2048)")
    p.add_argument("--public-key", help="also write the public key (X.509 PEM) here: "
                   "the plugin's public.key.file")
    p.set_defaults(func=_cmd_keygen)
