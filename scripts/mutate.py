"""Mutation testing, one module at a time, against that module's tests (``make mutate``).

    python scripts/mutate.py                     # every module in MODULES, one after another
    python scripts/mutate.py retention txn_index # some of them
    python scripts/mutate.py --list              # the module -> files and tests map

Each module runs mutmut in its own work directory, ``build/mutate/<module>/``: a
``pyproject.toml`` made there (the project's pytest settings and a ``[tool.mutmut]``
naming the module's source files and test files) and links to ``kafkastore/`` and
``tests/``. mutmut copies both into ``mutants/`` there, mutates only the module's files and
runs, for each mutant, the tests that call the mutated function, stopping at the first
failure. The pure backend only (``KAFKASTORE_NO_EXTENSIONS=1``): the Cython kernels are
not mutated, and their pure twins are what the Python code calls. Hypothesis runs the
``mutate`` profile (derandomized, fewer examples), so a mutant's verdict is repeatable.

A survivor is either killed by a new test or recorded as equivalent, with the reason, in
``docs/mutation.rst`` and in :data:`EQUIVALENT` below. The run prints the counts per module
and writes each module's survivors with their diffs to ``build/mutate/<module>/survivors.txt``
and every verdict to ``build/mutate/<module>.json`` (``--recheck`` then runs only the
survivors again, after tests were added). It exits 1 when a survivor is not in
:data:`EQUIVALENT`. mutmut names a mutant by its function and a number, so editing a
function renumbers its mutants: re-check the equivalents of a changed function (the diff
of each is in ``survivors.txt``).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mutate"


@dataclass(frozen=True)
class Target:
    files: tuple[str, ...]
    tests: tuple[str, ...]
    #: mutmut mutant-name globs restricting the run to some functions (all when empty)
    functions: tuple[str, ...] = field(default=())
    #: test ids left out of the per-mutant runs (a sweep too slow to run for each mutant)
    deselect: tuple[str, ...] = field(default=())


#: module -> its source files and every test file that exercises it (fast ones: the
#: power-loss and kill-loop sweeps, the CLI and the tiered tests reach these modules only
#: through the tests listed here).
MODULES: dict[str, Target] = {
    "retention": Target(
        ("kafkastore/retention.py",),
        ("tests/test_retention.py", "tests/test_time_boundaries.py",
         "tests/test_unified_log_txn.py", "tests/test_mutation_kills.py")),
    "txn_index": Target(
        ("kafkastore/txn_index.py",),
        ("tests/test_txn_index.py", "tests/test_transactions.py",
         "tests/test_unified_log_txn.py", "tests/test_dump_txn_snapshot.py",
         "tests/test_log_view.py", "tests/test_spark_plan.py",
         "tests/test_mutation_kills.py")),
    "validator": Target(
        ("kafkastore/validator.py",),
        ("tests/test_validator.py", "tests/test_log_compat.py", "tests/test_time_boundaries.py",
         "tests/test_write_refusals.py", "tests/test_mutation_kills.py",
         "tests/test_validator_mutation_kills.py")),
    "producer_state": Target(
        ("kafkastore/producer_state.py",),
        ("tests/test_producer_state.py", "tests/test_unified_log_txn.py",
         "tests/test_transactions.py", "tests/test_time_boundaries.py",
         "tests/test_kafka_exact_state.py", "tests/test_mutation_kills.py",
         "tests/test_mutation_kills_producer_state.py"),
        # the functions that decide: the sequence, epoch and coordinator-epoch checks, the
        # duplicate lookup, the transaction bookkeeping behind the LSO, expiry, whether an
        # open skips the load, which snapshots are strays and the Java HashMap order of a
        # snapshot's entries (the table that grows and never shrinks). The snapshot file's
        # encoding is pinned by byte-exact vector tests instead; the plumbing that applies
        # an append's checks (update, analyze, apply, record_updates, complete_txns) and the
        # snapshot loading (905 mutants with these, over an hour on the shared machine) are
        # not mutated.
        tuple(f"kafkastore.producer_state.{f}__mutmut_*" for f in (
            "x_decrement_sequence", "x_skips_producer_state_load",
            "x_stray_snapshot_offsets", "x__java_hashmap_capacity", "x__java_hashmap_order",
            "xǁProducerStateManagerǁ_put_producer",
            "xǁProducerStateEntryǁmaybe_update_producer_epoch",
            "xǁProducerStateEntryǁ_add_batch_metadata",
            "xǁProducerStateEntryǁfind_duplicate_batch",
            "xǁProducerAppendInfoǁ_check_producer_epoch",
            "xǁProducerAppendInfoǁ_check_sequence",
            "xǁProducerAppendInfoǁappend", "xǁProducerAppendInfoǁappend_data_batch",
            "xǁProducerAppendInfoǁappend_end_txn_marker",
            "xǁProducerStateManagerǁ_is_expired",
            "xǁProducerStateManagerǁremove_expired_producers",
            "xǁProducerStateManagerǁlast_stable_offset",
            "xǁProducerStateManagerǁcomplete_txn",
            "xǁProducerStateManagerǁ_refresh_first_unstable",
            "xǁProducerStateManagerǁduplicate_of",
            "xǁProducerStateManagerǁ_current"))),
    "cleaner": Target(
        ("kafkastore/cleaner_round.py", "kafkastore/cleaner.py"),
        ("tests/test_cleaner.py", "tests/test_time_boundaries.py",
         "tests/test_transactions.py", "tests/test_mutation_kills.py",
         "tests/test_mutation_kills_cleaner.py"),
        # what a round keeps and drops (the batch retention, the delete horizon, the
        # transaction tracking); the round's plumbing and the manager's scheduling are
        # exercised by the reliability sweeps, too slow to run per mutant
        ("kafkastore.cleaner_round.xǁCleanerǁ_filter_batch*",
         "kafkastore.cleaner_round.xǁCleanerǁ_rebuild*",
         "kafkastore.cleaner_round.xǁCleanerǁclean*",
         "kafkastore.cleaner_round.xǁ_TxnTrackerǁ*"),
        # the crash sweep is 66 of the 73 seconds every surviving mutant of these functions
        # costs (over an hour for the module); it checks the swap's crash safety, which
        # these functions do not decide
        deselect=("tests/test_cleaner.py::test_a_crash_at_any_step_leaves_the_old_or_the_new_log",)),
    "log_append": Target(
        ("kafkastore/log_append.py", "kafkastore/log.py"),
        ("tests/test_log.py", "tests/test_validator.py", "tests/test_transactions.py",
         "tests/test_unified_log_txn.py", "tests/test_write_refusals.py",
         "tests/test_time_boundaries.py", "tests/test_kafka_exact_append.py",
         "tests/test_kafka_exact_truncate.py", "tests/test_kafka_exact_state.py",
         "tests/test_mutation_kills.py", "tests/test_mutation_kills_log_append.py"),
        # the functions that decide, within the append path: the order of the append
        # (_append_set: the producer state before the log end), the duplicate handling
        # (_analyze_producers, _duplicate_info), the roll decision (_maybe_roll,
        # _check_segment_size) and the first unstable offset behind the LSO reads
        # (_first_unstable: mutmut 3 does not mutate a decorated function, so the
        # last_stable_offset / first_unstable_offset properties are reached through it).
        # The whole path (append, append_batches, the leader and follower appends,
        # log_append.py: 1108 mutants) would take hours on the shared machine
        tuple(f"kafkastore.log.xǁLogǁ{f}__mutmut_*" for f in (
            "_append_set", "_analyze_producers", "_duplicate_info", "_maybe_roll",
            "_check_segment_size", "_first_unstable")),
        # the reader-thread race (8 s, and its verdict depends on the scheduler) and the
        # index rebuilds after a crash (open, not append) cost most of a survivor's run
        deselect=(
            "tests/test_kafka_exact_append.py::"
            "test_a_reader_thread_never_sees_the_lso_past_an_open_transaction",
            "tests/test_log.py::test_index_rebuild",
            "tests/test_log.py::test_corrupt_index_rebuild",
            "tests/test_log.py::test_bad_index_after_a_clean_shutdown_is_rebuilt_on_first_use")),
}

_FAST_PATH = ("turns the interval fast path of AbortedTransactionFilter off; the consumer's "
              "state machine it falls back to gives the same ranges (test_transactions "
              "checks that both agree)")
_INT64 = ("numpy's default integer is int64 on the 64-bit platforms kafkastore runs on, and "
          "the input is already int64")
_NOFOLLOW = ("changes only getattr's default, used where os has no O_NOFOLLOW (not on the "
             "POSIX platforms the tests run on)")
_LAST_CACHE = ("_last_known only caches the file's last offset: False makes the next append "
               "read it again from the file, which gives the same value")
_MARKER = ("an interval ends at its ABORT marker's offset, never the base offset of a data "
           "batch, so the bound is never met with equality")
_DEAD_TAIL = ("the branch is dead: the torn tail after the whole entries is shorter than one "
              "entry, so the entry written there always covers it and the file is never longer")
_FALSY = "None and False are both falsy where the flag is read"

_TIEBREAK = ("_seq only breaks ties between aborted transactions with the same first offset "
             "in the tracker's heap, and no two transactions start at the same offset")
_CR = "kafkastore.cleaner_round."

#: mutant name -> why no test can tell it from the original (docs/mutation.rst groups
#: them). Only the equivalent: a survivor a test could kill gets the test instead.
EQUIVALENT: dict[str, str] = {
    **{f"kafkastore.txn_index.xǁAbortedTransactionFilterǁ__init____mutmut_{n}": _FAST_PATH
       for n in (2, 3, 7, 8, 15, 16, 21, 24, 25, 30, 32)},
    **{f"kafkastore.txn_index.xǁAbortedTransactionFilterǁ__init____mutmut_{n}": _INT64
       for n in (35, 37)},
    **{f"kafkastore.txn_index.xǁAbortedTransactionFilterǁaborted_ranges__mutmut_{n}": _INT64
       for n in (3, 5)},
    "kafkastore.txn_index.x__aborted_by_intervals__mutmut_63":
        "the interval pre-selection only narrows the loop; the exact test inside it decides",
    "kafkastore.txn_index.x__aborted_by_intervals__mutmut_67": _MARKER,
    "kafkastore.txn_index.x__aborted_by_intervals__mutmut_75": _MARKER,
    **{f"kafkastore.txn_index.xǁTransactionIndexǁ__init____mutmut_{n}": _FALSY
       for n in (4, 6)},
    "kafkastore.txn_index.xǁTransactionIndexǁ__init____mutmut_3":
        "_last_offset is read only after _size_and_last replaced it (_last_known is False)",
    **{f"kafkastore.txn_index.xǁTransactionIndexǁ_ftruncate__mutmut_{n}": _NOFOLLOW
       for n in (10, 13, 16)},
    **{f"kafkastore.txn_index.xǁTransactionIndexǁappend__mutmut_{n}": _NOFOLLOW
       for n in (16, 19, 22)},
    **{f"kafkastore.txn_index.xǁTransactionIndexǁappend__mutmut_{n}": _DEAD_TAIL
       for n in (30, 31, 32, 33, 34, 35, 36)},
    "kafkastore.txn_index.xǁTransactionIndexǁ_read__mutmut_5":
        "4 bytes are a partial entry, which every reader of the file ignores, as no file",
    "kafkastore.txn_index.xǁTransactionIndexǁ_size_and_last__mutmut_8":
        "parsing the empty prefix gives the same empty list",
    **{f"kafkastore.txn_index.xǁTransactionIndexǁ_size_and_last__mutmut_{n}": _LAST_CACHE
       for n in (18, 19)},
    "kafkastore.txn_index.xǁTransactionIndexǁtruncate_to__mutmut_12": _LAST_CACHE,
    "kafkastore.txn_index.xǁTransactionIndexǁreset__mutmut_5": _LAST_CACHE,
    "kafkastore.txn_index.xǁTransactionIndexǁdelete_if_exists__mutmut_2": _LAST_CACHE,
    "kafkastore.txn_index.xǁTransactionIndexǁdelete_if_exists__mutmut_3":
        "the file is deleted: the flush that finds it dirty finds no file and clears the flag",
    **{f"kafkastore.txn_index.xǁTransactionIndexǁflush__mutmut_{n}":
       "no file to sync: the next flush finds none again" for n in (8, 9)},
    "kafkastore.txn_index.xǁTransactionIndexǁflush__mutmut_12": _FALSY,
    **{f"kafkastore.producer_state.xǁProducerStateManagerǁ_put_producer__mutmut_{n}":
       "the guard only saves a call: _java_hashmap_capacity makes the same 3/4 check and "
       "returns the table unchanged below it" for n in (3, 4, 5, 7)},
    **{f"kafkastore.producer_state.xǁProducerStateManagerǁ_put_producer__mutmut_{n}":
       "the guard passes only when one put took the size past 3/4 of the table (so of every "
       "smaller power of two too): one doubling, which counting from the table, from 16 or "
       "from the table taken as the size all give" for n in (11, 12)},
    "kafkastore.producer_state.x__java_hashmap_capacity__mutmut_2":
        "the table is a power of two of at least 16: 3/4 of it is a whole number",
    "kafkastore.producer_state.x_stray_snapshot_offsets__mutmut_11":
        "a stray is at no segment base, so the largest stray never equals the largest base",
    "kafkastore.producer_state.xǁProducerStateManagerǁduplicate_of__mutmut_3":
        "no caller passes shadow: log.py looks for a retry in the state before the request, "
        "as Kafka's analyzeAndValidateProducerState does (producerStateManager.lastEntry)",
    **{f"kafkastore.validator.xǁLogValidatorǁ_check_window__mutmut_{n}":
       "the comparison only picks the shortcut for a batch wholly inside the window; "
       "otherwise check_timestamp_window checks every record exactly" for n in (2, 3, 4, 5)},
    **{f"kafkastore.validator.xǁLogValidatorǁ_validate_legacy__mutmut_{n}":
       "the entries' CRCs were checked by the caller's scan; validating again finds nothing"
       for n in (11, 13, 16)},
    "kafkastore.validator.xǁLogValidatorǁ_validate_legacy__mutmut_56": _FALSY,
    "kafkastore.validator.xǁLogValidatorǁ_validate_v2__mutmut_121":
        "BASE_OFFSET_OFFSET is 0: pos - 0 is pos + 0",
    **{f"kafkastore.validator.xǁLogValidatorǁ_rebuild__mutmut_{n}":
       "on a LogAppendTime topic the rows already carry now as every record's timestamp, "
       "so the rebuilt batch's max timestamp is now either way" for n in (19, 38)},
    "kafkastore.validator.xǁLogValidatorǁ_validate_v2__mutmut_71":
        "a header timestamp of -1 in a producer's LogAppendTime batch is refused on the "
        "next line, before min_ts is read",
    "kafkastore.validator.x_codec_level__mutmut_3":
        "-1 instead of None: every caller hands the level to the gzip compressor, which "
        "takes None as -1 (zlib's Z_DEFAULT_COMPRESSION, Deflater's default)",
    "kafkastore.validator.x_codec_level__mutmut_7":
        "only -1 reaches the test, and zlib takes -1 as its default level, as None does",
    "kafkastore.validator.xǁLogValidatorǁ_check_legacy_record__mutmut_8":
        "check_timestamp_window skips -1 itself",
    _CR + "xǁCleanerǁ_rebuild__mutmut_19":
        "-2 instead of -1 for a CreateTime batch: select_records takes any negative "
        "log_append_time as none",
    _CR + "xǁ_TxnTrackerǁon_control_batch__mutmut_3":
        "an empty control batch carries no delete horizon (Kafka's writeEmptyHeader and "
        "the RETAIN_EMPTY header drop it), so its records are never discarded by horizon; "
        "with no record DELETE and DELETE_EMPTY both drop it, and marker_for_empty_txn is "
        "read only when records are kept",
    _CR + "xǁCleanerǁ_filter_batch__mutmut_15":
        "_control_type of a control batch without records is None itself",
    _CR + "xǁCleanerǁ_filter_batch__mutmut_45":
        "the log's producer state never holds producer id -1: the lookup finds nothing",
    _CR + "xǁCleanerǁ_filter_batch__mutmut_62":
        "a batch whose records are discarded keeps none and is not RETAIN_EMPTY, so the "
        "general path drops it too, with the same counts",
    _CR + "xǁCleanerǁ_filter_batch__mutmut_63":
        "DELETE_EMPTY is only ever told apart from DELETE and RETAIN_EMPTY; None is neither",
    _CR + "xǁCleanerǁ_filter_batch__mutmut_129":
        "the log is read only in the error of records that do not decompress, and a control "
        "batch reaching this line holds records, which _control_type (control_marker) "
        "decompressed whole first: one that does not decompress raised there",
    _CR + "xǁCleanerǁ_filter_batch__mutmut_76":
        "with no record kept, the tombstone count (needs_horizon) is read only by the "
        "branches for kept records",
    **{f"{_CR}xǁ_TxnTrackerǁ{f}": _TIEBREAK for f in (
        "__init____mutmut_5", "add_aborted__mutmut_1", "add_aborted__mutmut_2",
        "add_aborted__mutmut_3")},
    _CR + "xǁCleanerǁclean__mutmut_23":
        "with no clean part, a legacy horizon of 1 instead of 0: a segment's modification "
        "time is always later than both",
    **{f"kafkastore.log.xǁLogǁ_analyze_producers__mutmut_{n}":
       "an empty shadow for a single produce: analyze then records the state that produce "
       "leaves in it, but nothing reads the shadow after the one call (it is local to "
       "_analyze_producers), and the lookup falls back to the state, as with None"
       for n in (4, 5)},
    **{f"kafkastore.validator.xǁLogValidatorǁvalidate__mutmut_{n}":
       "the default of origin is never used: every caller passes it" for n in (1, 2)},
}


def _pytest_section() -> str:
    """The project's ``[tool.pytest.ini_options]``, verbatim."""
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r"^\[tool\.pytest\.ini_options\]\n(?:(?!^\[).*\n)*", text, re.M)
    if m is None:
        raise SystemExit("pyproject.toml has no [tool.pytest.ini_options]")
    return m.group(0)


def _toml_list(items) -> str:
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def _deselect_args(test_ids) -> list[str]:
    return [arg for test_id in test_ids for arg in ("--deselect", test_id)]


def _prepare(name: str, target: Target) -> Path:
    work = WORK / name
    if work.exists():
        shutil.rmtree(work)   # a fresh run: no verdict cached from other code
    work.mkdir(parents=True)
    for link in ("kafkastore", "tests"):
        (work / link).symlink_to(ROOT / link)
    (work / "pyproject.toml").write_text(
        _pytest_section() + "\n[tool.mutmut]\n"
        'source_paths = ["kafkastore"]\n'
        f"only_mutate = {_toml_list(target.files)}\n"
        f"pytest_add_cli_args_test_selection = {_toml_list(target.tests)}\n"
        "pytest_add_cli_args = "
        f"{_toml_list(('-p', 'no:cacheprovider', *_deselect_args(target.deselect)))}\n"
        "use_git_change_detection = false\n"
        "track_dependencies = false\n")
    return work


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)   # mutants/ must be the kafkastore the tests import
    env.update(KAFKASTORE_NO_EXTENSIONS="1", KAFKASTORE_EXPECT_BACKEND="python",
               HYPOTHESIS_PROFILE="mutate")
    return env


_SPINNER = re.compile("[\u2800-\u28ff]")


def _mutmut(work: Path, *args: str, capture: bool = False) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "mutmut", *args]
    if capture:
        return subprocess.run(cmd, cwd=work, env=_env(), text=True, capture_output=True,
                              check=False)
    # mutmut redraws a spinner without line breaks: keep only each line's last state
    with subprocess.Popen(cmd, cwd=work, env=_env(), text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT) as proc:
        for line in proc.stdout:
            print(_SPINNER.split(line)[-1].rstrip(), flush=True)
    return subprocess.CompletedProcess(cmd, proc.returncode)


def _statuses(work: Path, target: Target) -> dict[str, str]:
    """mutant name -> mutmut's verdict, for the mutants of ``target`` in ``work``."""
    listing = _mutmut(work, "results", "--all", "true", capture=True).stdout
    statuses: dict[str, str] = {}
    for line in listing.splitlines():
        m = re.match(r"\s+(\S+): (.+)$", line)
        if m:
            statuses[m.group(1)] = m.group(2).strip()
    if target.functions:   # mutmut lists every mutant of the file; count the selection
        statuses = {k: v for k, v in statuses.items()
                    if any(fnmatch.fnmatch(k, g) for g in target.functions)}
    return statuses


def run_module(name: str, max_children: int, recheck: bool = False) -> dict[str, int]:
    """One module's run; with ``recheck``, only the survivors of the last run are run
    again (after tests were added), the other verdicts kept."""
    target = MODULES[name]
    results = WORK / f"{name}.json"
    previous: dict[str, str] = {}
    if recheck:
        if not results.exists():
            raise SystemExit(f"--recheck: no earlier run of {name} ({results})")
        previous = json.loads(results.read_text())
    work = _prepare(name, target)
    selection = sorted(k for k, v in previous.items() if v == "survived") if recheck \
        else list(target.functions)
    print(f"== {name}: {', '.join(target.files)} against {len(target.tests)} test files"
          + (f", rechecking {len(selection)} survivors" if recheck else ""), flush=True)
    if recheck and not selection:
        statuses = previous
    else:
        _mutmut(work, "run", "--max-children", str(max_children), *selection)
        statuses = _statuses(work, target)
        if recheck:
            statuses = {**previous, **{k: statuses[k] for k in selection if k in statuses}}
    results.write_text(json.dumps(statuses, indent=0, sort_keys=True))
    survivors = sorted(k for k, v in statuses.items() if v == "survived")
    with open(work / "survivors.txt", "w") as out:
        for mutant in survivors:
            reason = EQUIVALENT.get(mutant)
            out.write(f"# equivalent: {reason}\n" if reason else "# NOT EXPLAINED\n")
            out.write(_mutmut(work, "show", mutant, capture=True).stdout + "\n")
    counts = {"mutants": len(statuses),
              "killed": sum(v == "killed" for v in statuses.values()),
              "equivalent": sum(m in EQUIVALENT for m in survivors),
              "survived": sum(m not in EQUIVALENT for m in survivors)}
    counts["other"] = counts["mutants"] - counts["killed"] - len(survivors)
    others = sorted({v for v in statuses.values() if v not in ("killed", "survived")})
    print(f"== {name}: " + ", ".join(f"{k} {v}" for k, v in counts.items())
          + (f" (other: {', '.join(others)})" if others else "")
          + f"; survivors in {work / 'survivors.txt'}", flush=True)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"some of: {', '.join(MODULES)}")
    parser.add_argument("--max-children", type=int, default=1,
                        help="mutants run at once (default 1: the machine is shared)")
    parser.add_argument("--list", action="store_true", help="print the map and stop")
    parser.add_argument("--recheck", action="store_true",
                        help="run only the last run's survivors again (after adding tests)")
    args = parser.parse_args(argv)
    names = args.modules or list(MODULES)
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(MODULES)}")
    if args.list:
        for n in names:
            t = MODULES[n]
            print(f"{n}: {' '.join(t.files)}\n    tests: {' '.join(t.tests)}"
                  + (f"\n    functions: {' '.join(t.functions)}" if t.functions else ""))
        return 0
    table = {n: run_module(n, args.max_children, args.recheck) for n in names}
    print("\nmodule          mutants  killed  equivalent  survived  other")
    for n, c in table.items():
        print(f"{n:<15} {c['mutants']:>7} {c['killed']:>7} {c['equivalent']:>11} "
              f"{c['survived']:>9} {c['other']:>6}")
    return 1 if any(c["survived"] for c in table.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
