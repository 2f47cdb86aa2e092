"""kcat (librdkafka's command-line client, Debian's package) against ``kafkastore serve``.

Skipped where ``kcat`` is not on PATH (CI does not install it)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from conftest import workload

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = [pytest.mark.skipif(KCAT is None, reason="kcat is not on PATH (apt-get install "
                                 "kcat)"), pytest.mark.timeout(180)]


def kcat(bs, *args, stdin=None):
    done = subprocess.run([KCAT, "-b", bs, *args], input=stdin, capture_output=True,
                          timeout=90)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done.stdout


def test_metadata_lists_topics_and_partitions(make_server):
    server = make_server(config={"num.partitions": 3})
    bs = server.bootstrap_servers
    # auto.create.topics.enable (on by default): producing creates the topic
    kcat(bs, "-P", "-t", "auto", "-p", "0", stdin=b"x\n")
    md = json.loads(kcat(bs, "-L", "-J"))
    [broker] = md["brokers"]
    assert broker["name"] == f"127.0.0.1:{server.port}"
    topics = {t["topic"]: t for t in md["topics"]}
    assert sorted(p["partition"] for p in topics["auto"]["partitions"]) == [0, 1, 2]
    for p in topics["auto"]["partitions"]:
        assert p["leader"] == broker["id"] and p["replicas"] == [{"id": broker["id"]}]
    text = kcat(bs, "-L").decode()
    assert 'topic "auto" with 3 partitions' in text


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_each_codec(kafka_server, codec):
    bs = kafka_server.bootstrap_servers
    records = workload(200, prefix=codec)
    lines = b"".join(k + b"\t" + v + b"\n" for k, v in records)
    kcat(bs, "-P", "-t", "k", "-p", "0", "-K", "\t", "-z", codec,
         "-X", "enable.idempotence=true", stdin=lines)
    out = kcat(bs, "-C", "-t", "k", "-p", "0", "-o", "beginning", "-e", "-J")
    got = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [(m["key"].encode(), m["payload"].encode()) for m in got] == records
    assert [m["offset"] for m in got] == list(range(200))
