#!/usr/bin/env python
"""The encryption of encrypted tiered copies alone, in one process, as a ratio table.

The cases are :func:`kafkastore.bench.tiered.crypto_cases` (no copy, no files):

* the RSA-OAEP unwrap of a 32-byte data key, SHA3-512 for the label hash and MGF1 (how
  Aiven's plugin wraps it, ``RSA/NONE/OAEPWithSHA3-512AndMGF1Padding`` read by
  BouncyCastle), by kafkastore's ``KeyRing.unwrap`` beside pycryptodome's ``PKCS1_OAEP``
  and ``cryptography``'s OAEP (skipped, with the reason, where OpenSSL refuses SHA-3 in
  OAEP), with 2048- and 4096-bit keys;
* one chunk's AES-GCM decryption (``IV || ciphertext || tag``) by the segment transform
  beside ``cryptography``'s AESGCM alone and pycryptodome's AES MODE_GCM, 4 MiB (the
  plugin's default chunk) and 64 KiB chunks.

Best of ``--reps`` rounds, the sides alternating in each round; a sub-millisecond call
is repeated to 50 ms a round. Ratio = peer time / kafkastore time (above 1 kafkastore is
faster). Each side's first answer is checked before it is timed.

Usage: ``python asv_bench/compare_crypto.py [--reps R] [--markdown out.md]``; about 20 s
on 2 CPUs (most of it making the 4096-bit key).
"""

from __future__ import annotations

import argparse
import sys

from kafkastore.bench import tiered
from kafkastore.bench.suite import _calibrated, compare, environment, format_table


def _versions() -> str:
    out = []
    try:
        import cryptography
        from cryptography.hazmat.backends.openssl import backend

        out.append(f"cryptography {cryptography.__version__} "
                   f"({backend.openssl_version_text()})")
    except ImportError:
        out.append("cryptography absent")
    try:
        import Crypto

        out.append(f"pycryptodome {Crypto.__version__}")
    except ImportError:
        out.append("pycryptodome absent")
    return "; ".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--markdown", help="also write the report to this file")
    args = p.parse_args(argv)

    rows = []
    for case in tiered.crypto_cases(_calibrated):
        print(f"  {case.variant}", file=sys.stderr)
        rows.extend(compare("crypto", case.variant, case.ours(), case.peers, case.count,
                            case.unit, args.reps))
    env = environment()
    text = "\n".join([
        "# Encryption of tiered copies: kafkastore beside its peers",
        "",
        "; ".join(f"{k} {v}" for k, v in env.items()) + "; " + _versions(),
        "",
        format_table(rows, markdown=True),
    ])
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
