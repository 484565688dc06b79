"""Writes our own pinned vectors for two derivations, computed by implementations no one here wrote.

    python Tests/Reference/pinned_vectors.py            # (re)writes both JSON files
    python Tests/Reference/pinned_vectors.py --check    # exits 1 if the committed files differ

1. Tests/SiblingsCryptoTests/HybridSignature/hybrid-keygen-vectors.json: the hybrid signature's seed
   expansion SHAKE256("siblings/hybrid-signature/v1/keygen" || seed, 64) = Ed25519 seed || ML-DSA-65 xi,
   the public key Ed25519 pk || ML-DSA-65 pk, and a signature over
   M' = "siblings/hybrid-signature/v1" || 0x00 || len(ctx) || ctx || message: the Ed25519 half from
   pyca/cryptography, the ML-DSA-65 half from dilithium-py's ML-DSA.Sign_internal with rnd = 0^32 and the
   context "siblings/hybrid-signature/v1" (verified again by pyca). xi -> key is checked to agree
   between pyca (OpenSSL) and dilithium-py.
2. Tests/SiblingsCryptoTests/HPKE/hpke-xwing-vectors.json: RFC 9180 base mode with KEM X-Wing (0x647a),
   HKDF-SHA256 and AES-256-GCM or ChaCha20-Poly1305. DeriveKeyPair(ikm) = SHAKE256(ikm, 32) as the X-Wing
   seed (draft-connolly-cfrg-xwing-kem, "Use in HPKE"). X-Wing's EncapsulateDerand(pk, eseed) is put
   together from kyber-py's ML-KEM.Encaps_internal, pyca's X25519 and the SHA3-256 combiner, and checked
   by xwing-kem's decapsulate (whose ML-KEM is pyca's) and against the draft's first test vector. The key
   schedule (sections 4, 5.1, 5.2, 5.3) is written below on hashlib/hmac and checked against RFC 9180's
   A.1.1; the AEAD is pyca's, and every case's sequence-0 seal is opened again by pyca's own HPKE
   (OpenSSL 4.0).

Every input is derived from SHA-256/SHA-512 of a fixed label: nothing is random, and a rerun writes
byte-identical files (JSON with sorted keys, two-space indent, a final newline).
"""

import hashlib
import hmac
import json
import os
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, mldsa, mlkem, x25519
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305
from dilithium_py.ml_dsa import ML_DSA_65
from kyber_py.ml_kem import ML_KEM_768
import xwing_kem

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HYBRID_PATH = "Tests/SiblingsCryptoTests/HybridSignature/hybrid-keygen-vectors.json"
HPKE_PATH = "Tests/SiblingsCryptoTests/HPKE/hpke-xwing-vectors.json"

RAW = serialization.Encoding.Raw
RAW_PUB = serialization.PublicFormat.Raw


def label_bytes(label, length):
    """`length` bytes fixed by `label`: SHA-512 blocks of label || counter, truncated."""
    out = b""
    counter = 0
    while len(out) < length:
        out += hashlib.sha512(f"siblings/pinned-vectors/{label}/{counter}".encode()).digest()
        counter += 1
    return out[:length]


# ---------------------------------------------------------------------------------------------------
# Hybrid signature (Ed25519 + ML-DSA-65)

HYBRID_DOMAIN = b"siblings/hybrid-signature/v1"
HYBRID_KEYGEN_LABEL = b"siblings/hybrid-signature/v1/keygen"


def hybrid_case(index, seed, message, context):
    expanded = hashlib.shake_256(HYBRID_KEYGEN_LABEL + seed).digest(64)
    ed_seed, xi = expanded[:32], expanded[32:]

    ed_key = ed25519.Ed25519PrivateKey.from_private_bytes(ed_seed)
    ed_public = ed_key.public_key().public_bytes(RAW, RAW_PUB)

    pyca_mldsa = mldsa.MLDSA65PrivateKey.from_seed_bytes(xi)
    mldsa_public = pyca_mldsa.public_key().public_bytes_raw()
    dilithium_public, dilithium_private = ML_DSA_65._keygen_internal(xi)
    assert dilithium_public == mldsa_public, f"case {index}: pyca and dilithium-py disagree on ML-DSA-65 KeyGen(xi)"

    representative = HYBRID_DOMAIN + bytes([0, len(context)]) + context + message
    ed_signature = ed_key.sign(representative)
    ed_key.public_key().verify(ed_signature, representative)

    # Pure ML-DSA (FIPS 204, Algorithm 2) of M' with context D: Sign_internal(sk, 0 || len(D) || D || M', rnd).
    formatted = bytes([0, len(HYBRID_DOMAIN)]) + HYBRID_DOMAIN + representative
    mldsa_signature = ML_DSA_65._sign_internal(dilithium_private, formatted, bytes(32))
    assert mldsa_signature == ML_DSA_65.sign(dilithium_private, representative, HYBRID_DOMAIN, deterministic=True)
    pyca_mldsa.public_key().verify(mldsa_signature, representative, HYBRID_DOMAIN)  # raises if invalid
    assert len(ed_public + mldsa_public) == 1984 and len(ed_signature + mldsa_signature) == 3373

    return {
        "seed": seed.hex(),
        "ed25519_seed": ed_seed.hex(),
        "mldsa_xi": xi.hex(),
        "public_key": (ed_public + mldsa_public).hex(),
        "message": message.hex(),
        "context": context.hex(),
        "representative": representative.hex(),
        "ed25519_signature": ed_signature.hex(),
        "mldsa_signature": mldsa_signature.hex(),
    }


def hybrid_vectors():
    seeds = [bytes(32), b"\xff" * 32] + [hashlib.sha256(f"hybrid-keygen seed {i}".encode()).digest() for i in range(2, 8)]
    contexts = [
        b"",
        b"pixie/phone-ownership-cert",
        b"pixie/sender-cert",
        b"transparency/checkpoint",
        b"\x00",
        label_bytes("hybrid-keygen/context-255", 255),
        b"x",
        label_bytes("hybrid-keygen/context-100", 100),
    ]
    messages = [
        b"",
        b"PhoneOwnershipCert",
        label_bytes("hybrid-keygen/message-2", 1),
        label_bytes("hybrid-keygen/message-3", 64),
        label_bytes("hybrid-keygen/message-4", 137),
        label_bytes("hybrid-keygen/message-5", 1000),
        b"checkpoint\n42\n",
        label_bytes("hybrid-keygen/message-7", 300),
    ]
    return {
        "description": (
            "Our own pinned vectors for HybridSignature, written by Tests/Reference/pinned_vectors.py: "
            "SHAKE256(keygen_label || seed, 64) = ed25519_seed || mldsa_xi; public_key = Ed25519 pk || "
            "ML-DSA-65 pk (pyca/cryptography, checked against dilithium-py); representative = M' = domain "
            "|| 0x00 || len(context) || context || message; ed25519_signature = Ed25519(M') (pyca); "
            "mldsa_signature = ML-DSA-65 of M' with context = domain and rnd = 0^32 (dilithium-py "
            "Sign_internal, verified by pyca). Bytes are hex."
        ),
        "domain": HYBRID_DOMAIN.hex(),
        "keygen_label": HYBRID_KEYGEN_LABEL.hex(),
        "cases": [hybrid_case(i, seeds[i], messages[i], contexts[i]) for i in range(8)],
    }


# ---------------------------------------------------------------------------------------------------
# X-Wing (draft-connolly-cfrg-xwing-kem) from kyber-py, pyca and xwing-kem

XWING_LABEL = b"\\.//^\\"


def xwing_expand(seed):
    """expandDecapsulationKey(seed): ML-KEM-768 seed d || z, X25519 scalar, public key pk_M || pk_X."""
    expanded = hashlib.shake_256(seed).digest(96)
    mlkem_seed, sk_x = expanded[:64], expanded[64:]
    pk_m = mlkem.MLKEM768PrivateKey.from_seed_bytes(mlkem_seed).public_key().public_bytes_raw()
    ek, _ = ML_KEM_768._keygen_internal(mlkem_seed[:32], mlkem_seed[32:])
    assert ek == pk_m, "pyca and kyber-py disagree on ML-KEM-768 KeyGen"
    pk_x = x25519.X25519PrivateKey.from_private_bytes(sk_x).public_key().public_bytes(RAW, RAW_PUB)
    return mlkem_seed, sk_x, pk_m + pk_x


def xwing_encapsulate_derand(public_key, eseed):
    """EncapsulateDerand(pk, eseed): returns (ss, ct)."""
    assert len(public_key) == 1216 and len(eseed) == 64
    pk_m, pk_x = public_key[:1184], public_key[1184:]
    ephemeral = x25519.X25519PrivateKey.from_private_bytes(eseed[32:64])
    ct_x = ephemeral.public_key().public_bytes(RAW, RAW_PUB)
    ss_x = ephemeral.exchange(x25519.X25519PublicKey.from_public_bytes(pk_x))
    ss_m, ct_m = ML_KEM_768._encaps_internal(pk_m, eseed[:32])
    ss = hashlib.sha3_256(ss_m + ss_x + ct_x + pk_x + XWING_LABEL).digest()
    return ss, ct_m + ct_x


def xwing_self_test():
    """The draft's first test vector (spec/test-vectors.json): seed, eseed -> pk, ct, ss (pk, ct by SHA-256)."""
    seed = bytes.fromhex("7f9c2ba4e88f827d616045507605853ed73b8093f6efbc88eb1a6eacfa66ef26")
    eseed = bytes.fromhex(
        "3cb1eea988004b93103cfb0aeefd2a686e01fa4a58e8a3639ca8a1e3f9ae57e2"
        "35b8cc873c23dc62b8d260169afa2f75ab916a58d974918835d25e6a435085b2"
    )
    _, _, public_key = xwing_expand(seed)
    ss, ct = xwing_encapsulate_derand(public_key, eseed)
    assert hashlib.sha256(public_key).hexdigest() == "2e816deebcd76c5c80d0cd2d174478871658e8e2ff42bc9d4a6e486372e856bb"
    assert hashlib.sha256(ct).hexdigest() == "17cd532d657e44c897ca6583e548a5424fc70bf54f99515a4d2bcf99e3469f33"
    assert ss.hex() == "d2df0522128f09dd8e2c92b1e905c793d8f57a54c3da25861f10bf4ca613e384"


# ---------------------------------------------------------------------------------------------------
# HPKE (RFC 9180), base mode, written here on hashlib/hmac

KEM_ID = 0x647A
KDF_ID = 0x0001
AEADS = {0x0002: ("aes-256-gcm", AESGCM), 0x0003: ("chacha20-poly1305", ChaCha20Poly1305)}
NK, NN, NH = 32, 12, 32


def i2osp(value, length):
    return value.to_bytes(length, "big")


def hkdf_extract(salt, ikm):
    return hmac.new(salt, ikm, hashlib.sha256).digest()  # an empty salt is HashLen zeros (RFC 5869)


def hkdf_expand(prk, info, length):
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def labeled_extract(suite_id, salt, label, ikm):
    """Section 4: LabeledExtract."""
    return hkdf_extract(salt, b"HPKE-v1" + suite_id + label + ikm)


def labeled_expand(suite_id, prk, label, info, length):
    """Section 4: LabeledExpand."""
    return hkdf_expand(prk, i2osp(length, 2) + b"HPKE-v1" + suite_id + label + info, length)


def key_schedule(suite_id, shared_secret, info, nk=NK):
    """Section 5.1, mode_base (0x00) with the default psk and psk_id (empty)."""
    psk_id_hash = labeled_extract(suite_id, b"", b"psk_id_hash", b"")
    info_hash = labeled_extract(suite_id, b"", b"info_hash", info)
    context = bytes([0x00]) + psk_id_hash + info_hash
    secret = labeled_extract(suite_id, shared_secret, b"secret", b"")
    return (
        labeled_expand(suite_id, secret, b"key", context, nk),
        labeled_expand(suite_id, secret, b"base_nonce", context, NN),
        labeled_expand(suite_id, secret, b"exp", context, NH),
    )


def key_schedule_self_test():
    """RFC 9180, A.1.1 (DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, base mode): the key schedule
    and the first export, so the code above is checked against the RFC's own numbers."""
    suite_id = b"HPKE" + i2osp(0x0020, 2) + i2osp(KDF_ID, 2) + i2osp(0x0001, 2)
    shared_secret = bytes.fromhex("fe0e18c9f024ce43799ae393c7e8fe8fce9d218875e8227b0187c04e7d2ea1fc")
    info = bytes.fromhex("4f6465206f6e2061204772656369616e2055726e")
    key, base_nonce, exporter_secret = key_schedule(suite_id, shared_secret, info, nk=16)
    assert key.hex() == "4531685d41d65f03dc48f6b8302c05b0"
    assert base_nonce.hex() == "56d890e5accaaf011cff4b7d"
    assert exporter_secret.hex() == "45ff1c2e220db587171952c0592d5f5ebe103f1561a2614e38f2ffd47e99e3f8"
    export = labeled_expand(suite_id, exporter_secret, b"sec", b"", 32)
    assert export.hex() == "3853fe2b4035195a573ffc53856e77058e15d9ea064de3e59f4961d0095250ee"


def compute_nonce(base_nonce, sequence):
    """Section 5.2: base_nonce XOR I2OSP(seq, Nn)."""
    return bytes(a ^ b for a, b in zip(base_nonce, i2osp(sequence, NN)))


def pyca_hpke_open(aead_id, mlkem_seed, sk_x, enc, ciphertext, info, aad):
    """pyca's own HPKE (OpenSSL 4.0, KEM MLKEM768-X25519 = X-Wing): single-shot Open at sequence 0."""
    from cryptography.hazmat.bindings._rust import openssl as rust_openssl
    from cryptography.hazmat.primitives import hpke

    aead = {0x0002: hpke.AEAD.AES_256_GCM, 0x0003: hpke.AEAD.CHACHA20_POLY1305}[aead_id]
    suite = hpke.Suite(hpke.KEM.MLKEM768_X25519, hpke.KDF.HKDF_SHA256, aead)
    private = hpke.MLKEM768X25519PrivateKey(
        mlkem.MLKEM768PrivateKey.from_seed_bytes(mlkem_seed), x25519.X25519PrivateKey.from_private_bytes(sk_x)
    )
    return rust_openssl.hpke._decrypt_with_aad(suite, enc + ciphertext, private, info, aad)


def hpke_case(aead_id, index, ikm, info):
    name, aead_class = AEADS[aead_id]
    label = f"hpke/{name}/{index}"
    suite_id = b"HPKE" + i2osp(KEM_ID, 2) + i2osp(KDF_ID, 2) + i2osp(aead_id, 2)

    seed = hashlib.shake_256(ikm).digest(32)  # DeriveKeyPair(ikm)
    mlkem_seed, sk_x, public_key = xwing_expand(seed)
    eseed = label_bytes(f"{label}/eseed", 64)
    shared_secret, enc = xwing_encapsulate_derand(public_key, eseed)
    assert xwing_kem.decapsulate(enc, mlkem_seed + sk_x) == shared_secret, f"{label}: xwing-kem disagrees"

    key, base_nonce, exporter_secret = key_schedule(suite_id, shared_secret, info)
    aead = aead_class(key)

    def sealed(sequence, plaintext, aad):
        nonce = compute_nonce(base_nonce, sequence)
        ciphertext = aead.encrypt(nonce, plaintext, aad)
        assert aead.decrypt(nonce, ciphertext, aad) == plaintext
        return {"sequence": sequence, "nonce": nonce.hex(), "pt": plaintext.hex(), "aad": aad.hex(), "ct": ciphertext.hex()}

    lengths = [(0, 0), (1, 13), (64, 0), (300, 77)]
    messages = [
        sealed(seq, label_bytes(f"{label}/pt/{seq}", pt_len), label_bytes(f"{label}/aad/{seq}", aad_len))
        for seq, (pt_len, aad_len) in enumerate(lengths)
    ]
    first = bytes.fromhex(messages[0]["ct"])
    assert pyca_hpke_open(aead_id, mlkem_seed, sk_x, enc, first, info, bytes.fromhex(messages[0]["aad"])) == b""
    # The empty first plaintext says little on its own; pyca also opens a one-shot seal of a longer one.
    probe_aad = label_bytes(f"{label}/probe-aad", 5)
    probe = label_bytes(f"{label}/probe", 40)
    probe_ct = aead.encrypt(compute_nonce(base_nonce, 0), probe, probe_aad)
    assert pyca_hpke_open(aead_id, mlkem_seed, sk_x, enc, probe_ct, info, probe_aad) == probe

    large = [
        sealed(2**32 + 5, label_bytes(f"{label}/pt/large-0", 20), label_bytes(f"{label}/aad/large-0", 3)),
        sealed(2**48 + 0x0102, label_bytes(f"{label}/pt/large-1", 7), b""),
    ]

    exports = []
    for context, length in [(b"", 32), (b"x", 1), (label_bytes(f"{label}/exporter-context", 40), 64), (b"siblings/export", 100)]:
        value = labeled_expand(suite_id, exporter_secret, b"sec", context, length)  # section 5.3
        exports.append({"exporter_context": context.hex(), "L": length, "value": value.hex()})

    return {
        "aead": name,
        "aead_id": aead_id,
        "ikm": ikm.hex(),
        "seed": seed.hex(),
        "public_key": public_key.hex(),
        "info": info.hex(),
        "eseed": eseed.hex(),
        "enc": enc.hex(),
        "shared_secret": shared_secret.hex(),
        "suite_id": suite_id.hex(),
        "key": key.hex(),
        "base_nonce": base_nonce.hex(),
        "exporter_secret": exporter_secret.hex(),
        "messages": messages,
        "large_sequence": large,
        "exports": exports,
    }


def hpke_vectors():
    xwing_self_test()
    key_schedule_self_test()
    cases = []
    for aead_id in sorted(AEADS):
        name = AEADS[aead_id][0]
        # (ikm length, info): the draft asks for at least 32 bytes of ikm.
        inputs = [(32, b""), (64, b"siblings/hpke info"), (100, label_bytes(f"hpke/{name}/2/info", 200))]
        for index, (ikm_length, info) in enumerate(inputs):
            cases.append(hpke_case(aead_id, index, label_bytes(f"hpke/{name}/{index}/ikm", ikm_length), info))
    return {
        "description": (
            "Our own pinned vectors for HPKE (RFC 9180, base mode) with KEM X-Wing (0x647a), HKDF-SHA256 "
            "(0x0001) and AES-256-GCM (0x0002) or ChaCha20-Poly1305 (0x0003), written by "
            "Tests/Reference/pinned_vectors.py: seed = DeriveKeyPair(ikm) = SHAKE256(ikm, 32); enc and "
            "shared_secret from X-Wing EncapsulateDerand(public_key, eseed); key, base_nonce, "
            "exporter_secret from the key schedule; each message sealed at its sequence number with nonce "
            "= base_nonce XOR I2OSP(sequence, 12); exports are LabeledExpand(exporter_secret, \"sec\", "
            "exporter_context, L). messages are one context's sequence 0, 1, 2, 3 in order; large_sequence "
            "entries are sealed under the same key at the sequence given. Bytes are hex."
        ),
        "kem_id": KEM_ID,
        "kdf_id": KDF_ID,
        "cases": cases,
    }


# ---------------------------------------------------------------------------------------------------


def render(vectors):
    return json.dumps(vectors, indent=2, sort_keys=True) + "\n"


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        sys.stderr.write(f"usage: {argv[0]} [--check]\n")
        return 2
    outputs = {HYBRID_PATH: render(hybrid_vectors()), HPKE_PATH: render(hpke_vectors())}
    stale = []
    for path, text in outputs.items():
        full = os.path.join(ROOT, path)
        if check:
            try:
                with open(full, encoding="utf-8") as f:
                    current = f.read()
            except FileNotFoundError:
                current = None
            if current != text:
                stale.append(path)
        else:
            with open(full, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            print(f"wrote {path}")
    if stale:
        for path in stale:
            sys.stderr.write(f"{path} differs from what {os.path.relpath(__file__, ROOT)} computes; rerun it without --check\n")
        return 1
    if check:
        print("pinned vectors are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
