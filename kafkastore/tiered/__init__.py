"""Kafka's tiered storage (KIP-405) read and written directly: the remote copy of a topic.

See ``docs/tiered.rst``. The modules (lower never imports higher): ``chunk_index``,
``crypto`` -> ``manifest`` -> ``transform`` -> ``object_keys`` -> ``listing`` /
``resolve`` -> ``chunk_reader`` -> ``tiered_storage`` -> ``object_sink`` -> ``upload``,
``export``.
"""
