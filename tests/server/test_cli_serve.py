"""``kafkastore serve`` as a process: the listening line, requests over its port,
SIGTERM -> exit 0 with the logs closed cleanly; the refusals of the command line."""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys

import pytest

pytest.importorskip("kafkastore.server.protocol",
                    reason="the codec (kafkastore.server.protocol) is not on this branch yet")

from _wire import request  # noqa: E402

from kafkastore.log import Log  # noqa: E402

_LINE = re.compile(r"kafkastore serve: listening on 127\.0\.0\.1:(\d+) \(log dir (.*)\)\n")


def _serve(*argv):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-m", "kafkastore", "serve", *map(str, argv)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_answers_then_sigterm_exits_0_with_a_clean_log_dir(tmp_path, sig):
    import socket

    logs = tmp_path / "logs"
    props = tmp_path / "server.properties"
    props.write_text("# a broker's file\nnum.partitions: 2\nlog.segment.bytes=\\\n  100000\n"
                     "some.unknown.key=1\n")
    proc = _serve(logs, "--listen", "127.0.0.1:0", "--config-file", props,
                  "--config", "node.id=3")
    try:
        line = proc.stdout.readline()
        m = _LINE.fullmatch(line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        port = int(m[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            meta = request(sock, 3, 12, {"topics": [{"name": "t", "topic_id": b"\0" * 16}],
                                         "allow_auto_topic_creation": True})
            assert meta["brokers"] == [{"node_id": 3, "host": "127.0.0.1", "port": port,
                                        "rack": None}]
            assert len(meta["topics"][0]["partitions"]) == 2     # num.partitions from the file
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err and "some.unknown.key" in err
    assert (logs / ".kafka_cleanshutdown").exists()
    assert "node.id=3" in (logs / "meta.properties").read_text()
    # the directory the server wrote opens as a log (the topic id it advertised is there)
    log = Log.open(logs / "t-1")
    try:
        assert log.log_end_offset == 0
        assert base64.urlsafe_b64decode(log.topic_id + "==") == meta["topics"][0]["topic_id"]
    finally:
        log.close()


def test_serve_refuses_a_non_loopback_address(tmp_path):
    proc = _serve(tmp_path, "--listen", "0.0.0.0:0")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == ""
    assert "Refusing to listen on 0.0.0.0" in err and "--allow-non-loopback" in err
    assert "Traceback" not in err


def test_serve_refuses_a_bad_listen_and_a_bad_config(tmp_path):
    proc = _serve(tmp_path, "--listen", "nope")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--listen expects HOST:PORT" in err
    proc = _serve(tmp_path, "--listen", "127.0.0.1:0", "--config", "log.segment.bytes=5")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "segment.bytes" in err and "Traceback" not in err
