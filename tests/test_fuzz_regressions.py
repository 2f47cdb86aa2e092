"""Replay of the fuzzers' findings and corpus samples (issue 8, reliability.md §5.3).

Every file under ``tests/data/fuzz/<target>/`` goes through the same target function the
atheris fuzzers run (``tests/_fuzz_targets.py``): ``crash-*`` files are inputs that once
broke kafkastore (each fixed, see the commit that added it), ``corpus-*`` files are inputs
the fuzzer found interesting (they reach deep paths cheaply). The minimized corpus of the
long runs, ``fuzz/corpus/<target>.zip``, and a handful of the generated seeds replay too. A
target passes when kafkastore decodes the input or refuses it with a
:class:`~kafkastore.errors.KafkaStoreError`; any other exception fails the test.

The suite runs once per backend (scripts/test.sh), so each input is replayed on the
compiled kernels and on the pure twins. Adding a crash input: see fuzz/README.md.
"""

from __future__ import annotations

import random
import zipfile
from pathlib import Path

import pytest
from _fuzz_targets import TARGETS, Provider, _build_structured, seeds

from kafkastore import records

DATA = Path(__file__).resolve().parent / "data" / "fuzz"


def _saved():
    out = []
    if DATA.is_dir():
        for target_dir in sorted(DATA.iterdir()):
            if target_dir.is_dir():
                for f in sorted(target_dir.iterdir()):
                    if f.is_file() and not f.name.startswith("."):
                        out.append(pytest.param(target_dir.name, f,
                                                id=f"{target_dir.name}/{f.name[:20]}"))
    return out


SAVED = _saved()


@pytest.mark.skipif(not SAVED, reason="no saved fuzz inputs under tests/data/fuzz")
@pytest.mark.parametrize(("target", "path"), SAVED or [pytest.param(None, None, id="none")])
def test_saved_input_replays_cleanly(target, path):
    assert target in TARGETS, f"tests/data/fuzz/{target}/ names no target in _fuzz_targets"
    TARGETS[target](path.read_bytes())


CORPUS = Path(__file__).resolve().parent.parent / "fuzz" / "corpus"


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_committed_corpus_replays_cleanly(target):
    """fuzz/corpus/<target>.zip: the minimized corpus of the long runs (fuzz/run.py
    --merge-into). It reaches the deep paths of each decoder, so replaying it is a cheap
    regression run of everything the fuzzers ever covered, on this backend."""
    archive = CORPUS / f"{target}.zip"
    if not archive.is_file():
        pytest.skip(f"no committed corpus for {target} (fuzz/corpus/{target}.zip)")
    with zipfile.ZipFile(archive) as z:
        names = sorted(z.namelist())
        assert names, archive
        for name in names:
            try:
                TARGETS[target](z.read(name))
            except Exception as err:  # name the input; the cause stays chained
                raise AssertionError(f"fuzz/corpus/{target}.zip:{name}: {err!r}") from err


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_seeds_replay_cleanly(target):
    found = seeds(target)
    assert found, target
    for data in found[:6]:
        TARGETS[target](data)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_targets_take_any_short_input(target):
    """Empty and tiny inputs are legal fuzzer inputs for every target."""
    for data in (b"", b"\0", b"\xff", bytes(range(17)), b"\xff" * 70):
        TARGETS[target](data)


def test_structured_target_gets_past_the_crc_check():
    """The point of the structure-aware target: most of what it builds passes the CRC
    check (so the fuzzer's effort goes into the parsers behind it), and with no
    mutation it is a batch that decodes."""
    rnd = random.Random(8)
    valid = total = 0
    for _ in range(200):
        buf = _build_structured(rnd.randbytes(rnd.randrange(8, 200)))
        scan = records.scan_batches(buf, validate=True)
        total += 1
        if len(scan.position) and scan.position[0] == 0:
            valid += 1
    assert valid >= total // 3, (valid, total)
    # magic 2, no codec, no record, no mutation; the input's unused bytes (zeros) follow
    plain = _build_structured(b"\0" * 64)
    scan = records.scan_batches(plain, validate=True)
    assert scan.position.tolist() == [0] and scan.valid_bytes == 61
    assert records.read_batch(plain, 0).is_valid()


def test_provider_is_deterministic_and_exhaustion_safe():
    p = Provider(b"\x01\x02")
    assert p.uint(1) == 1 and p.range(0, 9) == 2 and p.uint(4) == 0 and p.bytes(5) == b""
    assert Provider(b"\xff\xff").int(2) == -1
