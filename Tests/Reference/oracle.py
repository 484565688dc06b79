"""The outside reference the Swift tests compare against, one JSON request per line on stdin.

Request: {"op": NAME, ...arguments}, bytes as hex. Reply: {"ok": {...}} or {"error": MESSAGE}.
Everything here calls an implementation no one here wrote: pyca/cryptography (which bundles OpenSSL
4.0), kyber-py and dilithium-py (pure-Python FIPS 203/204, for derandomized functions pyca lacks),
xwing-kem, pyrage (rage, in Rust) or Debian's age 1.1.1 (in Go). Nothing is computed by hand, so an
agreement with Swift means two independent implementations agree.
"""

import json
import sys

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, mldsa, x25519
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

RAW = serialization.Encoding.Raw
RAW_PUB = serialization.PublicFormat.Raw
RAW_PRIV = serialization.PrivateFormat.Raw
NO_ENC = serialization.NoEncryption()
X962 = serialization.Encoding.X962
UNCOMPRESSED = serialization.PublicFormat.UncompressedPoint


def h(name, request):
    return bytes.fromhex(request[name])


def x25519_public(r):
    key = x25519.X25519PrivateKey.from_private_bytes(h("private", r))
    return {"out": key.public_key().public_bytes(RAW, RAW_PUB).hex()}


def x25519_shared(r):
    key = x25519.X25519PrivateKey.from_private_bytes(h("private", r))
    peer = x25519.X25519PublicKey.from_public_bytes(h("peer", r))
    return {"out": key.exchange(peer).hex()}


def x25519_generate(r):
    key = x25519.X25519PrivateKey.generate()
    return {
        "private": key.private_bytes(RAW, RAW_PRIV, NO_ENC).hex(),
        "public": key.public_key().public_bytes(RAW, RAW_PUB).hex(),
    }


def ed25519_generate(r):
    key = ed25519.Ed25519PrivateKey.generate()
    return {
        "private": key.private_bytes(RAW, RAW_PRIV, NO_ENC).hex(),
        "public": key.public_key().public_bytes(RAW, RAW_PUB).hex(),
    }


def ed25519_public(r):
    key = ed25519.Ed25519PrivateKey.from_private_bytes(h("private", r))
    return {"out": key.public_key().public_bytes(RAW, RAW_PUB).hex()}


def ed25519_sign(r):
    key = ed25519.Ed25519PrivateKey.from_private_bytes(h("private", r))
    return {"out": key.sign(h("message", r)).hex()}


def ed25519_verify(r):
    key = ed25519.Ed25519PublicKey.from_public_bytes(h("public", r))
    try:
        key.verify(h("signature", r), h("message", r))
        return {"out": True}
    except InvalidSignature:
        return {"out": False}


def p256_generate(r):
    key = ec.generate_private_key(ec.SECP256R1())
    return {
        "private": key.private_numbers().private_value.to_bytes(32, "big").hex(),
        "public": key.public_key().public_bytes(X962, UNCOMPRESSED).hex(),
    }


def p256_public(r):
    key = ec.derive_private_key(int.from_bytes(h("private", r), "big"), ec.SECP256R1())
    return {"out": key.public_key().public_bytes(X962, UNCOMPRESSED).hex()}


def p256_sign(r):
    key = ec.derive_private_key(int.from_bytes(h("private", r), "big"), ec.SECP256R1())
    der = key.sign(h("message", r), ec.ECDSA(hashes.SHA256()))
    rr, ss = decode_dss_signature(der)
    return {"der": der.hex(), "raw": (rr.to_bytes(32, "big") + ss.to_bytes(32, "big")).hex()}


def p256_verify(r):
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), h("public", r))
    try:
        key.verify(h("der", r), h("message", r), ec.ECDSA(hashes.SHA256()))
        return {"out": True}
    except InvalidSignature:
        return {"out": False}


def der_from_raw(r):
    raw = h("raw", r)
    return {"out": encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")).hex()}


def mldsa65_public(r):
    key = mldsa.MLDSA65PrivateKey.from_seed_bytes(h("seed", r))
    return {"out": key.public_key().public_bytes_raw().hex()}


def mldsa65_sign(r):
    key = mldsa.MLDSA65PrivateKey.from_seed_bytes(h("seed", r))
    return {"out": key.sign(h("message", r), h("context", r)).hex()}


def mldsa65_verify(r):
    key = mldsa.MLDSA65PublicKey.from_public_bytes(h("public", r))
    try:
        key.verify(h("signature", r), h("message", r), h("context", r))
        return {"out": True}
    except InvalidSignature:
        return {"out": False}


def mldsa65_sign_internal(r):
    """dilithium-py's ML-DSA.KeyGen_internal(seed) and ML-DSA.Sign_internal(sk, M', rnd) (FIPS 204,
    Algorithms 6 and 7) with M' = 0 || len(context) || context || message, the pure-mode encoding."""
    from dilithium_py.ml_dsa import ML_DSA_65

    context = h("context", r)
    public, private = ML_DSA_65._keygen_internal(h("seed", r))
    formatted = bytes([0, len(context)]) + context + h("message", r)
    signature = ML_DSA_65._sign_internal(private, formatted, h("rnd", r))
    return {"public": public.hex(), "private": private.hex(), "out": signature.hex()}


AEADS = {"aes-256-gcm": AESGCM, "chacha20-poly1305": ChaCha20Poly1305}


def aead_seal(r):
    aead = AEADS[r["cipher"]](h("key", r))
    return {"out": aead.encrypt(h("nonce", r), h("plaintext", r), h("aad", r)).hex()}


def aead_open(r):
    aead = AEADS[r["cipher"]](h("key", r))
    try:
        return {"out": aead.decrypt(h("nonce", r), h("ciphertext", r), h("aad", r)).hex()}
    except InvalidTag:
        raise ValueError("InvalidTag")


def blobcrypto_v1_seal_file(r):
    """BlobCrypto v1 as docs/pixie-protocol.md ("BlobCrypto") states it, on pyca's AESGCM: the file at `path` cut
    into `chunk`-byte chunks (the last holds the rest; an empty file is one empty chunk), chunk i sealed with
    nonce N XOR (uint88_be(i) || last), no aad. Returns the blob's SHA-256 and length, so megabytes need not
    cross the pipe as hex."""
    aead = AESGCM(h("key", r))
    nonce = h("nonce", r)
    chunk = r["chunk"]
    with open(r["path"], "rb") as f:
        plaintext = f.read()
    count = max(1, -(-len(plaintext) // chunk))
    digest = hashes.Hash(hashes.SHA256())
    size = 0
    for i in range(count):
        counter = i.to_bytes(11, "big") + bytes([1 if i == count - 1 else 0])
        sealed = aead.encrypt(bytes(a ^ b for a, b in zip(nonce, counter)), plaintext[i * chunk:(i + 1) * chunk], None)
        digest.update(sealed)
        size += len(sealed)
    return {"sha256": digest.finalize().hex(), "size": size}


HASHES = {
    "sha256": hashes.SHA256,
    "sha384": hashes.SHA384,
    "sha512": hashes.SHA512,
    "sha3-256": hashes.SHA3_256,
    "sha3-512": hashes.SHA3_512,
}
XOFS = {"shake128": hashes.SHAKE128, "shake256": hashes.SHAKE256}


def digest(r):
    if r["hash"] in XOFS:
        hasher = hashes.Hash(XOFS[r["hash"]](digest_size=r["length"]))
    else:
        hasher = hashes.Hash(HASHES[r["hash"]]())
    hasher.update(h("message", r))
    return {"out": hasher.finalize().hex()}


def hmac(r):
    from cryptography.hazmat.primitives import hmac as pyca_hmac

    mac = pyca_hmac.HMAC(h("key", r), HASHES[r["hash"]]())
    mac.update(h("message", r))
    return {"out": mac.finalize().hex()}


def hkdf(r):
    kdf = HKDF(algorithm=HASHES[r["hash"]](), length=r["length"], salt=h("salt", r), info=h("info", r))
    return {"out": kdf.derive(h("ikm", r)).hex()}


def mlkem768_public(r):
    from cryptography.hazmat.primitives.asymmetric import mlkem

    key = mlkem.MLKEM768PrivateKey.from_seed_bytes(h("seed", r))
    return {"out": key.public_key().public_bytes_raw().hex()}


def mlkem768_encapsulate(r):
    from cryptography.hazmat.primitives.asymmetric import mlkem

    key = mlkem.MLKEM768PublicKey.from_public_bytes(h("public", r))
    secret, ciphertext = key.encapsulate()
    return {"secret": secret.hex(), "ciphertext": ciphertext.hex()}


def mlkem768_decapsulate(r):
    from cryptography.hazmat.primitives.asymmetric import mlkem

    key = mlkem.MLKEM768PrivateKey.from_seed_bytes(h("seed", r))
    return {"out": key.decapsulate(h("ciphertext", r)).hex()}


def kyberpy_encaps(r):
    """kyber-py's derandomized ML-KEM-768 (pure Python, independent of OpenSSL)."""
    from kyber_py.ml_kem import ML_KEM_768

    seed = h("seed", r)
    ek, dk = ML_KEM_768._keygen_internal(seed[:32], seed[32:])
    secret, ciphertext = ML_KEM_768._encaps_internal(ek, h("m", r))
    return {"secret": secret.hex(), "ciphertext": ciphertext.hex(), "dk": dk.hex()}


def xwing_decapsulate(r):
    """xwing-kem (PyPI): its secret key is ML-KEM's 64-byte seed then the X25519 scalar."""
    import xwing_kem

    return {"out": xwing_kem.decapsulate(h("ciphertext", r), h("mlkem_seed", r) + h("x25519", r)).hex()}


def xwing_encapsulate(r):
    import xwing_kem

    secret, ciphertext = xwing_kem.encapsulate(h("public", r))
    return {"secret": secret.hex(), "ciphertext": ciphertext.hex()}


def _hpke_suite(r):
    from cryptography.hazmat.primitives import hpke

    aead = {"chacha20-poly1305": hpke.AEAD.CHACHA20_POLY1305, "aes-256-gcm": hpke.AEAD.AES_256_GCM}[r["aead"]]
    return hpke.Suite(hpke.KEM.MLKEM768_X25519, hpke.KDF.HKDF_SHA256, aead)


def _hpke_private(r):
    from cryptography.hazmat.primitives import hpke
    from cryptography.hazmat.primitives.asymmetric import mlkem

    return hpke.MLKEM768X25519PrivateKey(
        mlkem.MLKEM768PrivateKey.from_seed_bytes(h("mlkem_seed", r)),
        x25519.X25519PrivateKey.from_private_bytes(h("x25519", r)),
    )


def hpke_seal(r):
    """pyca's HPKE (OpenSSL 4.0) with KEM MLKEM768-X25519 = X-Wing: returns enc || ciphertext."""
    from cryptography.hazmat.bindings._rust import openssl as rust_openssl

    public = _hpke_private(r).public_key()
    sealed = rust_openssl.hpke._encrypt_with_aad(_hpke_suite(r), h("plaintext", r), public, h("info", r), h("aad", r))
    return {"out": sealed.hex()}


def hpke_open(r):
    from cryptography.hazmat.bindings._rust import openssl as rust_openssl

    opened = rust_openssl.hpke._decrypt_with_aad(_hpke_suite(r), h("sealed", r), _hpke_private(r), h("info", r), h("aad", r))
    return {"out": opened.hex()}


def pyrage_generate(r):
    import pyrage

    identity = pyrage.x25519.Identity.generate()
    return {"identity": str(identity), "recipient": str(identity.to_public())}


def pyrage_encrypt(r):
    import pyrage

    recipients = [pyrage.x25519.Recipient.from_str(text) for text in r["recipients"]]
    return {"out": pyrage.encrypt(h("plaintext", r), recipients, armored=r.get("armor", False)).hex()}


def pyrage_decrypt(r):
    import pyrage

    identities = [pyrage.x25519.Identity.from_str(text) for text in r["identities"]]
    return {"out": pyrage.decrypt(h("file", r), identities).hex()}


def pyrage_encrypt_passphrase(r):
    import pyrage

    return {"out": pyrage.passphrase.encrypt(h("plaintext", r), r["passphrase"], armored=r.get("armor", False)).hex()}


def pyrage_decrypt_passphrase(r):
    import pyrage

    return {"out": pyrage.passphrase.decrypt(h("file", r), r["passphrase"]).hex()}


def _run(args, stdin=b""):
    import subprocess

    done = subprocess.run(args, input=stdin, capture_output=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:2])} exited {done.returncode}: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _with_files(files, body):
    """Writes {name: bytes} into a private temporary directory and calls body(paths)."""
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        paths = {}
        for name, data in files.items():
            paths[name] = os.path.join(directory, name)
            with open(paths[name], "wb") as f:
                f.write(data)
        paths["out"] = os.path.join(directory, "out")
        return body(paths)


def age_keygen(r):
    """Debian's age-keygen: the key file text it writes."""
    return {"out": _run(["/usr/bin/age-keygen"]).decode()}


def age_encrypt(r):
    args = ["/usr/bin/age", "--encrypt"] + [arg for text in r["recipients"] for arg in ("-r", text)]
    return {"out": _run(args + (["--armor"] if r.get("armor") else []), h("plaintext", r)).hex()}


def age_decrypt(r):
    """Debian's age -d with the key file text `keyfile` (its own bytes, given as hex when encrypted)."""
    files = {"key": h("keyfile", r), "in": h("file", r)}

    def body(paths):
        if "passphrase" in r:
            _pty_age(["-d", "-i", paths["key"], "-o", paths["out"], paths["in"]], r["passphrase"])
            with open(paths["out"], "rb") as f:
                return {"out": f.read().hex()}
        return {"out": _run(["/usr/bin/age", "-d", "-i", paths["key"], paths["in"]]).hex()}

    return _with_files(files, body)


def _pty_age(args, passphrase):
    """Runs /usr/bin/age on a pseudo-terminal (it reads passphrases only from one), typing `passphrase`
    at every prompt that mentions one. Returns what it printed."""
    import os
    import pty
    import time

    pid, fd = pty.fork()
    if pid == 0:
        os.execv("/usr/bin/age", ["age"] + args)
    output = b""
    answered = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 1024)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
        while output.lower().count(b"passphrase") > answered:
            time.sleep(0.05)  # let age turn echo off before typing
            os.write(fd, passphrase.encode() + b"\n")
            answered += 1
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"age {' '.join(args[:1])} failed: {output.decode(errors='replace').strip()}")
    return output


def age_encrypt_passphrase(r):
    def body(paths):
        _pty_age(["-p"] + (["-a"] if r.get("armor") else []) + ["-o", paths["out"], paths["in"]], r["passphrase"])
        with open(paths["out"], "rb") as f:
            return {"out": f.read().hex()}

    return _with_files({"in": h("plaintext", r)}, body)


def age_decrypt_passphrase(r):
    def body(paths):
        _pty_age(["-d", "-o", paths["out"], paths["in"]], r["passphrase"])
        with open(paths["out"], "rb") as f:
            return {"out": f.read().hex()}

    return _with_files({"in": h("file", r)}, body)


def riblt_indices(r):
    """docs/pixie-sync.md, "Symbols" and "Which symbols an item is mapped to", written from the text alone in
    Python's floats (IEEE 754 binary64, round-to-nearest) so the Swift mapping is checked by a second reading."""
    import math

    mask = (1 << 64) - 1
    item = h("item", r)
    hi, lo = int.from_bytes(item[:8], "big"), int.from_bytes(item[8:], "big")
    z = hi ^ (((lo << 32) | (lo >> 32)) & mask)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    check = z ^ (z >> 31)
    below = r["below"]
    indices, s, i = [0], check, 0
    while True:
        s = (s * 0xDA942042E4DD58B5) & mask
        step = math.ceil((float(i) + 1.5) * (4294967296.0 / math.sqrt(float(s) + 1.0) - 1.0))
        if step >= 4294967296:
            break
        i += max(1, int(step))
        if i >= below:
            break
        indices.append(i)
    return {"check": f"{check:016x}", "indices": indices}


def main():
    operations = {
        name: fn
        for name, fn in globals().items()
        if type(fn).__name__ == "function" and fn.__module__ == __name__ and name not in ("main", "h")
    }
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"ok": operations[request["op"]](request)}
        except Exception as error:  # every refusal goes back to the test, which decides what it means
            reply = {"error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
