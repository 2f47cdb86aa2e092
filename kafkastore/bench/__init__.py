"""Benchmark workloads and the ``kafkastore bench`` suite.

:mod:`kafkastore.bench.workload` (the record-batch workload and the implementations that
encode, decode and scan it: kafkastore, aiokafka's Cython codec, kafka-python),
:mod:`kafkastore.bench.log` (append, read, recovery and their baselines),
:mod:`kafkastore.bench.index` (offset-index lookups and the numpy peer),
:mod:`kafkastore.bench.cleaner` (compaction and the naive compactor) and
:mod:`kafkastore.bench.suite` (:func:`~kafkastore.bench.suite.run_suite`, which runs
them side by side). The asv suite in ``asv_bench/`` and the pytest-benchmark tests use
the same modules, so every tool measures the same thing.

The peers are imported only when a workload asks for them; a missing one raises
``NotImplementedError`` (asv's skip), which the suite reports as "skipped".
"""
