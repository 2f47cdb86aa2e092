"""How Java prints what ``kafka-dump-log.sh`` prints: Kafka's dump is Java, and so are its quirks.

* Java ``int``/``long`` arithmetic: :func:`wrap32`, :func:`wrap64` (two's complement
  overflow), :func:`signed8` (a ``byte``);
* ``java.io.File`` on Unix: :func:`java_path` (``toString``: repeated slashes collapsed,
  a trailing one dropped), :func:`java_abs` (``getAbsolutePath``: the working directory
  joined, nothing resolved), :func:`java_parent`, :func:`java_join`;
* ``Long.parseLong`` as Kafka applies it to a file name (:func:`parse_long`);
* ``new String(bytes, UTF_8)`` (:func:`java_utf8`: malformed input replaced by Java's
  rules, which differ from Python's for encoded surrogates);
* Jackson's compact JSON (:func:`jackson`), as Kafka prints KRaft control records.

Pure functions of their arguments (:func:`java_abs` reads the working directory):
safe from any thread.
"""

from __future__ import annotations

import os
import re
from typing import Any

from kafkastore.errors import KafkaStoreError

__all__ = [
    "INT32_MAX",
    "INT64_MAX",
    "jackson",
    "java_abs",
    "java_join",
    "java_parent",
    "java_path",
    "java_utf8",
    "parse_long",
    "signed8",
    "wrap32",
    "wrap64",
]

INT32_MAX = (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


# -- Java's int arithmetic ---------------------------------------------------------------------


def wrap32(n: int) -> int:
    return ((n + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def wrap64(n: int) -> int:
    return ((n + (1 << 63)) & 0xFFFFFFFFFFFFFFFF) - (1 << 63)


def signed8(b: int) -> int:
    return b - 256 if b >= 128 else b


# -- java.io.File and Long.parseLong ------------------------------------------------------------


def java_path(path: str) -> str:
    """``new File(path).toString()`` on Unix: repeated slashes collapsed, a trailing one
    dropped."""
    norm = re.sub("/+", "/", path)
    if len(norm) > 1 and norm.endswith("/"):
        norm = norm[:-1]
    return norm


def java_abs(path: str) -> str:
    """``File.getAbsolutePath`` on Unix: the working directory joined, nothing resolved."""
    if path.startswith("/"):
        return path
    cwd = os.getcwd()
    if not path:
        return cwd
    return cwd + path if cwd == "/" else cwd + "/" + path


def java_parent(path: str) -> str:
    """``getAbsoluteFile().getParent()``."""
    absolute = java_abs(path)
    cut = absolute.rfind("/")
    return absolute[:cut] if cut > 0 else "/"


def java_join(parent: str, child: str) -> str:
    return parent + child if parent == "/" else parent + "/" + child


_LONG = re.compile(r"[+-]?[0-9]+")


def parse_long(text: str, file: str) -> int:
    """Java's ``Long.parseLong``, as Kafka applies it to a file name's first part."""
    if _LONG.fullmatch(text):
        value = int(text)
        if INT64_MIN <= value <= INT64_MAX:
            return value
    raise KafkaStoreError(f"file name does not start with an offset: For input string: "
                          f"\"{text}\"", path=file)


# -- Java's UTF-8 decoding ---------------------------------------------------------------------

_REPL = "\ufffd"


def java_utf8(data: bytes) -> str:
    """``new String(data, StandardCharsets.UTF_8)``: malformed input replaced as Java does.

    Valid UTF-8 decodes the same everywhere. For malformed input Java and Python both
    follow the Unicode "maximal subpart" practice, except that Java turns an encoded
    surrogate (``ED A0 80``) into one U+FFFD where Python makes three; this is a port of
    the JDK's ``String.decodeUTF8_UTF16`` with replacement.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _java_utf8_slow(bytes(data))


def _cont(b: int) -> bool:
    return (b & 0xC0) == 0x80


def _java_utf8_slow(src: bytes) -> str:
    out: list[str] = []
    sp, sl = 0, len(src)
    while sp < sl:
        b1 = src[sp]
        sp += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif (b1 >> 5) == 0b110 and (b1 & 0x1E) != 0:        # C2..DF: 2 bytes
            if sp < sl:
                b2 = src[sp]
                if not _cont(b2):
                    out.append(_REPL)
                else:
                    out.append(chr(((b1 & 0x1F) << 6) | (b2 & 0x3F)))
                    sp += 1
                continue
            out.append(_REPL)
            break
        elif (b1 >> 4) == 0b1110:                               # E0..EF: 3 bytes
            if sp + 1 < sl:
                b2, b3 = src[sp], src[sp + 1]
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) or not _cont(b3):
                    out.append(_REPL)
                    # malformed3: how many bytes the bad sequence spans (lead included)
                    sp += 0 if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not _cont(b2) else 1
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(_REPL if 0xD800 <= c <= 0xDFFF else chr(c))
                    sp += 2
                continue
            if sp < sl and ((b1 == 0xE0 and (src[sp] & 0xE0) == 0x80) or not _cont(src[sp])):
                out.append(_REPL)
                continue
            out.append(_REPL)
            break
        elif (b1 >> 3) == 0b11110:                              # F0..F7: 4 bytes
            if sp + 2 < sl:
                b2, b3, b4 = src[sp], src[sp + 1], src[sp + 2]
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (_cont(b2) and _cont(b3) and _cont(b4)) or not 0x10000 <= uc <= 0x10FFFF:
                    out.append(_REPL)
                    # malformed4
                    if (b1 > 0xF4 or (b1 == 0xF0 and not 0x90 <= b2 <= 0xBF)
                            or (b1 == 0xF4 and (b2 & 0xF0) != 0x80) or not _cont(b2)):
                        pass
                    elif not _cont(b3):
                        sp += 1
                    else:
                        sp += 2
                else:
                    out.append(chr(uc))
                    sp += 3
                continue
            if b1 > 0xF4 or (sp < sl and (
                    (b1 == 0xF0 and not 0x90 <= src[sp] <= 0xBF)
                    or (b1 == 0xF4 and (src[sp] & 0xF0) != 0x80) or not _cont(src[sp]))):
                out.append(_REPL)
                continue
            sp += 1
            out.append(_REPL)
            if sp < sl and not _cont(src[sp]):
                continue
            break
        else:
            out.append(_REPL)
    return "".join(out)


# -- Jackson ----------------------------------------------------------------------------------


def jackson(value: Any) -> str:
    """Jackson's compact JSON (``ObjectNode.toString``): no spaces, non-ASCII kept,
    control characters escaped with upper-case hex."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_jackson_str(k)}:{jackson(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(jackson(v) for v in value) + "]"
    if isinstance(value, str):
        return _jackson_str(value)
    return str(value)


_JACKSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
                    "\f": "\\f", "\r": "\\r"}


def _jackson_str(s: str) -> str:
    parts = []
    for ch in s:
        esc = _JACKSON_ESCAPES.get(ch)
        if esc is not None:
            parts.append(esc)
        elif ord(ch) < 0x20:
            parts.append(f"\\u{ord(ch):04X}")
        else:
            parts.append(ch)
    return '"' + "".join(parts) + '"'
