"""Shared fixtures and the guards that keep a test run honest.

Environment read here:

KAFKASTORE_EXPECT_BACKEND=cython|python
    stop the session unless ``kafkastore._kernels.BACKEND`` is that backend, so a broken
    build can never pass by silently testing the pure twins only.
KAFKASTORE_REQUIRE_INSTALLED=1
    stop the session if ``kafkastore`` was imported from this source tree instead of an
    installed wheel (scripts/test.sh sets it).
KAFKASTORE_NO_EXTENSIONS=1
    pure mode (read by kafkastore._kernels); here it only decides whether a missing
    compiled kernel is a skip or a failure.
KAFKASTORE_TEST_REAL_SYNC=1
    let fsync, fdatasync and msync reach the disk (see "Device flushes" below; by default
    the suite skips the wait for the device, not the calls).
KAFKASTORE_VECTORS
    directory of the Kafka reference vectors (default: ../shared/vectors, else the copy
    in tests/data/vectors; see tests/_vectors.py).
HYPOTHESIS_PROFILE=default|ci|expensive|mutate

Command-line option added here:

--kernel-tests-only
    deselect the tests marked ``same_python`` (the families in tests/_selection.py
    SAME_PYTHON: their outcome does not depend on the backend). scripts/test.sh passes it
    to the pure-backend run; the deselected tests are counted in pytest's summary ("N
    deselected") and named by family in the terminal summary.
--kernel-impl=cython|python
    of the tests parametrised over both implementations of a kernel (the ``impl``
    fixture, test_column_encode.py's ``enc``), keep the one given and deselect the other.
    .ci/run's sanitizer step keeps ``cython``: ASan and UBSan instrument the compiled
    kernels, and the pure twins' cases run on both backends' ordinary runs.
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
import types
from pathlib import Path

import pytest
from hypothesis import settings

import kafkastore
import kafkastore._kernels as K
from _reliability import FIGURES, TIER
from _selection import same_python_family

REPO = Path(__file__).resolve().parents[1]
SOURCE_PACKAGE = REPO / "kafkastore"

# Kernel modules that exist in both kafkastore._ext and kafkastore._pure; the impl fixture
# exposes each as an attribute (impl.varint, impl.record_batch). Add new kernels here.
KERNELS = ("varint", "record_batch", "index_search", "entry_walk", "offset_map", "murmur2",
           "column_encode")
IMPL_PACKAGES = {"cython": "kafkastore._ext", "python": "kafkastore._pure"}


def env_flag(name: str) -> bool:
    """True unless the variable is unset, empty, "0", "false" or "no" (as kafkastore._kernels
    and setup.py read KAFKASTORE_* switches)."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


PURE_MODE = env_flag("KAFKASTORE_NO_EXTENSIONS")
IMPORTED_FROM = Path(kafkastore.__file__).resolve().parent


# -- device flushes -------------------------------------------------------------------------
# No test here can observe whether an fsync reached the device: nothing pulls the power.
# Crash images are made by tests/_logtools.py's FaultFS from what was written and what was
# fsynced through the seam (kafkastore._fileio), which counts the calls, not the disk; a
# kill -9 leaves the page cache to the next open. A real flush only makes the disk the
# bottleneck (a tenth to a fifth of some modules' time on the CI machine), so in this
# process the calls still happen and still check their argument (a closed descriptor is
# EBADF, an unmapped range ENOMEM) but do not wait for the device, as PostgreSQL's
# regression runs do with fsync=off. Processes the tests start (servers, kill-loop
# children, the CLI) flush for real. KAFKASTORE_TEST_REAL_SYNC=1 turns this off.
def _skip_device_flushes() -> None:
    import mmap

    from kafkastore import _fileio

    def flush_nothing(fd: int) -> None:
        os.fstat(fd)   # what fsync checks before it flushes: an open descriptor

    os.fsync = flush_nothing
    os.fdatasync = flush_nothing
    # msync(MS_ASYNC) checks the range as MS_SYNC does and schedules the write-back
    # (on Linux a no-op: the pages are already in the page cache) without waiting
    _fileio._MS_SYNC = getattr(mmap, "MS_ASYNC", _fileio._MS_SYNC)


if not env_flag("KAFKASTORE_TEST_REAL_SYNC"):
    _skip_device_flushes()


# -- hypothesis profiles ------------------------------------------------------------------
# No deadlines anywhere: CI machines are slow and shared, and a deadline failure there says
# nothing about the code.
settings.register_profile("default", max_examples=100, deadline=None)
settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True, database=None)
settings.register_profile("expensive", max_examples=2000, deadline=None)
# scripts/mutate.py: a mutant's verdict must not depend on the draw, and each mutant reruns
# the tests that reach it, so fewer examples
settings.register_profile("mutate", max_examples=25, deadline=None, derandomize=True,
                          database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# -- session guards -----------------------------------------------------------------------


def pytest_report_header(config: pytest.Config) -> list[str]:
    no_extensions = os.environ.get("KAFKASTORE_NO_EXTENSIONS", "")
    expected = os.environ.get("KAFKASTORE_EXPECT_BACKEND") or "any"
    backend = f"{K.BACKEND} (KAFKASTORE_NO_EXTENSIONS={no_extensions!r}, expected: {expected})"
    return [f"kafkastore backend: {backend}", f"kafkastore imported from: {IMPORTED_FROM}"]


def pytest_sessionstart(session: pytest.Session) -> None:
    expected = os.environ.get("KAFKASTORE_EXPECT_BACKEND")
    if expected and expected != K.BACKEND:
        pytest.exit(
            f"KAFKASTORE_EXPECT_BACKEND={expected} but kafkastore._kernels.BACKEND is"
            f" {K.BACKEND!r} (kafkastore from {IMPORTED_FROM}): the compiled kernels did not"
            " load, or the wrong backend was selected",
            returncode=3,
        )
    if env_flag("KAFKASTORE_REQUIRE_INSTALLED") and IMPORTED_FROM.is_relative_to(SOURCE_PACKAGE):
        pytest.exit(
            f"KAFKASTORE_REQUIRE_INSTALLED=1 but kafkastore was imported from the source tree"
            f" ({IMPORTED_FROM}), not from the installed package: run pytest from outside"
            " the repository (scripts/test.sh does)",
            returncode=3,
        )


# -- which tests the pure backend reruns (tests/_selection.py) -----------------------------

_SAME_PYTHON_DESELECTED = pytest.StashKey[dict]()   # family -> tests deselected

#: Fixtures parametrised over the kernel implementations ("cython", "python").
IMPL_FIXTURES = ("impl", "enc")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kernel-tests-only", action="store_true", default=False,
        help="deselect the tests marked same_python (tests/_selection.py SAME_PYTHON): the pure"
             " backend's run in scripts/test.sh")
    parser.addoption(
        "--kernel-impl", choices=tuple(IMPL_PACKAGES), default=None,
        help="run only this implementation's cases of the tests parametrised over both"
             " (fixtures impl, enc); the other's are deselected (.ci/run's sanitizer step)")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Everything under tests/benchmarks, and any test using pytest-benchmark's fixture, is a
    # benchmark: deselected by the default `-m "not benchmark and not slow"`. tryfirst so the
    # marks exist before pytest's own -m deselection runs.
    benchmarks = Path(__file__).resolve().parent / "benchmarks"
    kernel_tests_only = config.getoption("--kernel-tests-only")
    only_impl = config.getoption("--kernel-impl")
    kept, deselected = [], []
    families: dict[str, int] = {}
    for item in items:
        path = Path(str(item.path)).resolve()
        if path.is_relative_to(benchmarks) or "benchmark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.benchmark)
        params = getattr(getattr(item, "callspec", None), "params", {})
        if only_impl and any(params.get(name, only_impl) != only_impl
                             for name in IMPL_FIXTURES):
            deselected.append(item)
            continue
        family = same_python_family(path)
        if family is not None:
            item.add_marker(pytest.mark.same_python)
            if kernel_tests_only:
                deselected.append(item)
                families[family] = families.get(family, 0) + 1
                continue
        kept.append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
    config.stash[_SAME_PYTHON_DESELECTED] = families
    if hasattr(config, "workerinput"):
        # a pytest-xdist worker: the XDIST_GROUPS units first (every worker sorts alike)
        items.sort(key=lambda item: _xdist_scope(item.nodeid) not in XDIST_GROUPS)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # `scripts/test.sh tests/spark`: every test asked for is same_python, so the pure run
    # has none left. That is the selection working, not "no tests collected".
    if (exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED
            and session.config.stash.get(_SAME_PYTHON_DESELECTED, {})
            and not session.items):
        session.exitstatus = pytest.ExitCode.OK
    # a pytest-xdist worker: what the controller prints travels in workeroutput
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["same_python_deselected"] = session.config.stash.get(
            _SAME_PYTHON_DESELECTED, {})
        workeroutput["reliability_figures"] = dict(FIGURES.counts)


@pytest.hookimpl(optionalhook=True)   # a pytest-xdist hook: defined only with xdist
def pytest_testnodedown(node, error) -> None:
    # The controller of a pytest-xdist run (scripts/test.sh's -n): it collected nothing
    # itself. Every worker collects (and deselects) the same tests; their figures add up.
    out = getattr(node, "workeroutput", {})
    node.config.stash[_SAME_PYTHON_DESELECTED] = out.get("same_python_deselected", {})
    for name, n in out.get("reliability_figures", {}).items():
        FIGURES.add(name, n)


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if hasattr(config, "workeroutput"):
        return   # a pytest-xdist worker: the controller reports
    _report_figures(terminalreporter)
    families = config.stash.get(_SAME_PYTHON_DESELECTED, {})
    if config.getoption("--kernel-tests-only"):
        total = sum(families.values())
        detail = ", ".join(f"{n} {family}" for family, n in sorted(families.items()))
        terminalreporter.write_line(
            f"--kernel-tests-only: {total} same_python tests deselected"
            f"{f' ({detail})' if detail else ''}; they run on the compiled backend"
            " (tests/_selection.py SAME_PYTHON)")


# -- pytest-xdist (scripts/test.sh runs each backend with -n 2) ----------------------------
#: Test directories that one worker runs whole, first: they share session fixtures that are
#: expensive to start twice (one Spark session, a standalone cluster, a Connect server).
XDIST_GROUPS = ("tests/spark/",)


def _xdist_scope(nodeid: str) -> str:
    """The work unit of ``nodeid``: its XDIST_GROUPS directory, else its module (so a
    module's fixtures are built once)."""
    for group in XDIST_GROUPS:
        if nodeid.startswith(group):
            return group
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    # xdist's own --dist loadgroup marks groups by editing item._nodeid, which pytest 9.2
    # no longer reads; a scheduler of our own groups by path instead. The largest unit
    # (the Spark directory) goes out first: the other worker takes the modules meanwhile.
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _xdist_scope(nodeid)

    config.option.loadscopereorder = False   # keep the order pytest_collection_modifyitems set
    return Scheduling(config, log)


def _report_figures(tr) -> None:
    """The reliability harness's figures (tests/_reliability.py): printed, and merged into
    ``KAFKASTORE_FIGURES`` when it names a file. Here, not in tests/reliability/, because a
    pytest-xdist controller loads only this conftest."""
    if not FIGURES.counts:
        return
    tr.section(f"reliability figures (tier {TIER}, backend {K.BACKEND})")
    width = max(len(k) for k in FIGURES.counts)
    for name, n in sorted(FIGURES.counts.items()):
        tr.write_line(f"{name:<{width}}  {n:>12,}")
    path = os.environ.get("KAFKASTORE_FIGURES")
    if path:
        FIGURES.save(path, K.BACKEND)
        tr.write_line(f"(merged into {path})")


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(params=KERNELS)
def kernel_name(request: pytest.FixtureRequest) -> str:
    """Each kernel module name in turn ("varint", "record_batch", ...)."""
    return request.param


@pytest.fixture(params=tuple(IMPL_PACKAGES), ids=tuple(IMPL_PACKAGES))
def impl(request: pytest.FixtureRequest) -> types.SimpleNamespace:
    """The kernel modules of one implementation: ``impl.name`` is "cython" or "python",
    ``impl.varint``, ``impl.record_batch``, ``impl.index_search`` ... the modules themselves.

    The compiled side is skipped only in pure mode (KAFKASTORE_NO_EXTENSIONS set) when the
    extensions are not built; otherwise a failing import fails the test.
    """
    package = IMPL_PACKAGES[request.param]
    modules = {}
    for kernel in KERNELS:
        try:
            modules[kernel] = importlib.import_module(f"{package}.{kernel}")
        except ImportError as exc:
            if request.param == "cython" and PURE_MODE:
                pytest.skip(f"compiled extensions not built ({exc})")
            pytest.fail(f"cannot import {package}.{kernel}: {exc!r}", pytrace=False)
    return types.SimpleNamespace(name=request.param, **modules)


@pytest.fixture
def rb(impl: types.SimpleNamespace) -> types.ModuleType:
    """The record_batch kernel of one implementation, with kafkastore's codecs installed
    as its decompressor."""
    from _helpers import decompress

    impl.record_batch.set_decompressor(decompress)
    return impl.record_batch


@pytest.fixture(autouse=True)
def _fail_on_unraisable_exception():
    """Fail a test during which Python reported an unraisable exception.

    A ``cdef`` function without an exception specification (or declared ``noexcept``)
    cannot propagate an error: Cython reports it through ``sys.unraisablehook``
    ("Exception ignored in ...") and carries on with a wrong result. Catching the hook
    (rather than grepping stderr, as fastavro does) works alongside capsys and capfd.
    The hook is replaced, not chained, so pytest does not report the same error twice.
    """
    seen = []
    previous = sys.unraisablehook

    def hook(unraisable):
        where = getattr(unraisable, "err_msg", None) or "Exception ignored in"
        error = "".join(
            traceback.format_exception(
                unraisable.exc_type, unraisable.exc_value, unraisable.exc_traceback
            )
        )
        seen.append(f"{where}: {unraisable.object!r}\n{error}")

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous
    if seen:
        pytest.fail("unraisable exception(s) during the test:\n" + "\n".join(seen), pytrace=False)


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    """The Kafka reference vectors (see their README.md and tests/_vectors.py)."""
    from _vectors import CONFIGURED, VECTORS

    if VECTORS is None:
        pytest.fail(f"KAFKASTORE_VECTORS={CONFIGURED} holds no MANIFEST.json", pytrace=False)
    return VECTORS


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3 server on 127.0.0.1 (tests/_s3.py); skips where moto[server] is absent."""
    from _s3 import start_s3_server

    server, stop = start_s3_server()
    try:
        yield server
    finally:
        stop()
        from kafkastore import storage

        storage.clear_cache()


@pytest.fixture
def fault_proxy(s3_server):
    """A fault-injecting HTTP proxy on 127.0.0.1 in front of ``s3_server``
    (tests/_faultproxy.py); ``fault_proxy.endpoint`` is its URL."""
    from _faultproxy import start_fault_proxy

    proxy, stop = start_fault_proxy(s3_server.endpoint)
    try:
        yield proxy
    finally:
        stop()
