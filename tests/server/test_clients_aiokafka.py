"""aiokafka against ``kafkastore serve`` (assigned partitions, no group)."""

from __future__ import annotations

import asyncio
import time

import pytest

from conftest import workload, write_transactions

aiokafka = pytest.importorskip("aiokafka", reason="aiokafka is in the test extra")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402
from aiokafka.admin import AIOKafkaAdminClient, NewTopic  # noqa: E402

pytestmark = pytest.mark.timeout(180)
CODECS = (None, "gzip", "snappy", "lz4", "zstd")


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 150))


async def create_topic(bs, topic, partitions=1):
    a = AIOKafkaAdminClient(bootstrap_servers=bs)
    await a.start()
    try:
        await a.create_topics([NewTopic(topic, num_partitions=partitions,
                                        replication_factor=1)])
    finally:
        await a.close()


async def produce(bs, topic, records, timestamps=None, **conf):
    p = AIOKafkaProducer(bootstrap_servers=bs, acks="all", linger_ms=5, **conf)
    await p.start()
    try:
        futs = [await p.send(topic, key=k, value=v, partition=0,
                             timestamp_ms=None if timestamps is None else timestamps[i])
                for i, (k, v) in enumerate(records)]
        return [(await f).offset for f in futs]
    finally:
        await p.stop()


async def consume(bs, topic, offset, n, timeout=60.0, **conf):
    c = AIOKafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", **conf)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        if offset == "end":
            await c.seek_to_end(tp)
        else:
            c.seek(tp, offset)
        return await getmany_n(c, n, timeout)
    finally:
        await c.stop()


async def getmany_n(c, n, timeout):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for recs in (await c.getmany(timeout_ms=500)).values():
            out.extend(recs)
    assert len(out) >= n, f"{len(out)} of {n} records within {timeout} s"
    return out


def kv(recs):
    return [(r.key, r.value) for r in recs]


@pytest.mark.parametrize("codec", CODECS)
def test_produce_each_codec_consume_from_beginning(kafka_server, codec):
    bs = kafka_server.bootstrap_servers
    records = workload(300, prefix=str(codec))

    async def go():
        await create_topic(bs, "t")
        assert await produce(bs, "t", records, compression_type=codec) == list(range(300))
        return await consume(bs, "t", 0, 300)

    assert kv(run(go())) == records


def test_idempotent_producer_and_offsets_for_times(kafka_server):
    bs = kafka_server.bootstrap_servers
    base = int(time.time() * 1000) - 10_000
    stamps = [base + 10 * i for i in range(100)]
    records = workload(100, prefix="ai")

    async def go():
        await create_topic(bs, "idem")
        offsets = await produce(bs, "idem", records, timestamps=stamps,
                                enable_idempotence=True)
        assert offsets == list(range(100))
        c = AIOKafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False)
        await c.start()
        try:
            tp = TopicPartition("idem", 0)
            found = (await c.offsets_for_times({tp: stamps[70]}))[tp]
            assert (found.offset, found.timestamp) == (70, stamps[70])
            c.assign([tp])
            c.seek(tp, found.offset)
            return await getmany_n(c, 30, 60)
        finally:
            await c.stop()

    assert kv(run(go())) == records[70:]


def test_consume_from_end_long_poll(kafka_server):
    bs = kafka_server.bootstrap_servers
    new = workload(2, prefix="new")

    async def go():
        await create_topic(bs, "tail")
        await produce(bs, "tail", workload(5, prefix="old"))
        waiting = asyncio.ensure_future(consume(bs, "tail", "end", 2, timeout=60,
                                                fetch_max_wait_ms=20000))
        await asyncio.sleep(2)     # the consumer parks a 20 s long poll at the end
        t0 = time.monotonic()
        await produce(bs, "tail", new)
        recs = await waiting
        return recs, time.monotonic() - t0

    recs, waited = run(go())
    assert kv(recs) == new and [r.offset for r in recs] == [5, 6]
    assert waited < 15, waited    # woken by the append, not the 20 s wait running out


def test_read_committed(make_server, tmp_path):
    committed, _ = write_transactions(tmp_path / "txnlogs")
    server = make_server(log_dir=tmp_path / "txnlogs")
    recs = run(consume(server.bootstrap_servers, "txn", 0, len(committed),
                       isolation_level="read_committed"))
    assert kv(recs) == committed
