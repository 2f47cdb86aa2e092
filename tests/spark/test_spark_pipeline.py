"""docs/examples/spark_pipeline.py, the documented pipeline, run end to end."""

from __future__ import annotations

import importlib.util
import json
import os
from collections import defaultdict

from _logtools import topic_records

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "examples",
                       "spark_pipeline.py")


def test_example_pipeline(spark, tmp_path):
    spec = importlib.util.spec_from_file_location("spark_pipeline", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    root = str(tmp_path / "logs")
    top = module.main(root, spark)
    # recompute the aggregation from the files, without Spark
    sums = defaultdict(float)
    counts = defaultdict(int)
    n = 0
    for recs in topic_records(root, "orders").values():
        for r in recs:
            o = json.loads(r.value)
            assert r.key.decode() == o["customer"]
            window = r.timestamp // 60_000
            sums[(o["customer"], window)] += o["amount"]
            counts[(o["customer"], window)] += 1
            n += 1
    assert n == 30_000
    best = sorted(sums.items(), key=lambda kv: (-round(kv[1], 2), kv[0]))[:5]
    assert [(r.customer, round(r.total, 2), r.orders) for r in top] == [
        (c, round(total, 2), counts[(c, w)]) for (c, w), total in best]
    stats = sum(len(recs) for recs in topic_records(root, "order-stats").values())
    assert stats == len(sums)
