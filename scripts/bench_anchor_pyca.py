#!/usr/bin/env python3
"""Anchors for the post-quantum benchmarks: the same operations through pyca/cryptography 50.0.2
(OpenSSL 4.0 inside), timed here and printed as JSON {name: microseconds per operation}.

Each figure is the best of `rounds` timeit runs of about `seconds` each, matching how `bench` times
the Swift side. Python's call overhead (a few hundred ns) is included in every figure.

Usage: bench_anchor_pyca.py [--seconds S] [--rounds N] [--only NAME[,NAME...]]
"""
import argparse
import hashlib
import json
import os
import timeit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import mldsa, mlkem, x25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def shake256(data, length):
    h = hashes.Hash(hashes.SHAKE256(digest_size=length))
    h.update(data)
    return h.finalize()


def sha3_256(data):
    h = hashes.Hash(hashes.SHA3_256())
    h.update(data)
    return h.finalize()


X_LABEL = bytes.fromhex("5c2e2f2f5e5c")


def xwing_keygen(seed):
    e = shake256(seed, 96)
    m = mlkem.MLKEM768PrivateKey.from_seed_bytes(e[:64])
    x = x25519.X25519PrivateKey.from_private_bytes(e[64:96])
    return m.public_key().public_bytes_raw() + x.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def xwing_encaps(pk_m, pk_x_bytes):
    ss_m, ct_m = pk_m.encapsulate()
    eph = x25519.X25519PrivateKey.generate()
    ct_x = eph.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    ss_x = eph.exchange(x25519.X25519PublicKey.from_public_bytes(pk_x_bytes))
    return sha3_256(ss_m + ss_x + ct_x + pk_x_bytes + X_LABEL), ct_m + ct_x


def xwing_decaps(m, x, pk_x, ct):
    # A loaded X-Wing key (both component keys expanded, as ours keeps them): both decapsulations and
    # the combiner.
    ss_m = m.decapsulate(ct[:1088])
    ss_x = x.exchange(x25519.X25519PublicKey.from_public_bytes(ct[1088:]))
    return sha3_256(ss_m + ss_x + ct[1088:] + pk_x + X_LABEL)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="")
    args = parser.parse_args()

    seed64 = os.urandom(64)
    kem = mlkem.MLKEM768PrivateKey.from_seed_bytes(seed64)
    kem_public = kem.public_key()
    _, kem_ct = kem_public.encapsulate()
    dsa = mldsa.MLDSA65PrivateKey.from_seed_bytes(os.urandom(32))
    message = os.urandom(64)
    signature = dsa.sign(message, b"ctx")
    dsa_public = dsa.public_key()
    dsa_public_bytes = dsa_public.public_bytes_raw()
    xseed = os.urandom(32)
    xpk = xwing_keygen(xseed)
    xpk_m = mlkem.MLKEM768PublicKey.from_public_bytes(xpk[:1184])
    xpk_x = xpk[1184:]
    _, xct = xwing_encaps(xpk_m, xpk_x)
    xe = shake256(xseed, 96)
    xsk_m = mlkem.MLKEM768PrivateKey.from_seed_bytes(xe[:64])
    xsk_x = x25519.X25519PrivateKey.from_private_bytes(xe[64:96])
    megabyte = os.urandom(1 << 20)

    operations = {
        "mlkem768.keygen": lambda: mlkem.MLKEM768PrivateKey.from_seed_bytes(seed64).public_key().public_bytes_raw(),
        "mlkem768.encaps": lambda: kem_public.encapsulate(),
        "mlkem768.decaps": lambda: kem.decapsulate(kem_ct),
        "mldsa65.keygen": lambda: mldsa.MLDSA65PrivateKey.from_seed_bytes(seed64[:32]).public_key().public_bytes_raw(),
        "mldsa65.sign": lambda: dsa.sign(message, b"ctx"),
        "mldsa65.verify": lambda: dsa_public.verify(signature, message, b"ctx"),
        "mldsa65.verify+decode": lambda: mldsa.MLDSA65PublicKey.from_public_bytes(dsa_public_bytes).verify(
            signature, message, b"ctx"
        ),
        "xwing.keygen": lambda: xwing_keygen(xseed),
        "xwing.encaps": lambda: xwing_encaps(xpk_m, xpk_x),
        "xwing.decaps": lambda: xwing_decaps(xsk_m, xsk_x, xpk_x, xct),
        "shake256.1MiB": lambda: shake256(megabyte, 32),
        "sha3-256.1MiB": lambda: sha3_256(megabyte),
    }
    only = set(filter(None, args.only.split(",")))
    results = {}
    for name, operation in operations.items():
        if only and name not in only:
            continue
        timer = timeit.Timer(operation)
        number, _ = timer.autorange()
        number = max(1, int(number * args.seconds / 0.2))
        best = min(timer.repeat(repeat=args.rounds, number=number)) / number
        results[name] = best * 1e6
    print(json.dumps(results))


if __name__ == "__main__":
    main()
