"""Prepares a running pixie-server for scripts/bench-server.sh (run with the project's venv).

    pixie_bench_prepare.py URL DATA_DIR OUT_DIR VERIFICATIONS

Against the server at URL (whose development SMS outbox is DATA_DIR/sms-outbox.jsonl), it

1. verifies a number (the code read from the outbox) and creates an account for it: a WebAuthn "none"
   registration with an ES256 COSE key built with python-fido2's data classes and a pyca P-256 key (as
   Tests/Reference/webauthn_oracle.py does), a real X-Wing discovery key (xwing-kem) and a real hybrid
   Ed25519 + ML-DSA-65 account key (pyca + dilithium-py); then writes OUT_DIR/discovery.json, the body
   of a POST /v1/discovery/own that answers 200;
2. starts VERIFICATIONS phone verifications, one number each, reads their codes from the outbox and
   writes OUT_DIR/checks.jsonl, one POST /v1/phone/verifications/check body a line (each succeeds once).

Prints a JSON summary (the account's session token included) on standard output.
"""

import base64
import hashlib
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import requests
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from dilithium_py.ml_dsa import ML_DSA_65
from fido2.cose import ES256
from fido2.webauthn import AttestationObject, AttestedCredentialData, AuthenticatorData, CollectedClientData
import xwing_kem

RP_ID = "localhost"
ORIGIN = "https://localhost"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def outbox_codes(data_dir):
    """Every code in the outbox, by number (the last one sent wins)."""
    codes = {}
    with open(os.path.join(data_dir, "sms-outbox.jsonl")) as outbox:
        for line in outbox:
            message = json.loads(line)
            word = next(w for w in message["text"].replace(".", " ").split() if w.isdigit() and len(w) == 6)
            codes[message["to"]] = word
    return codes


def post(session, url, path, body, expect):
    response = session.post(url + path, json=body, timeout=30)
    if response.status_code != expect:
        sys.exit(f"pixie_bench_prepare: {path} answered {response.status_code}: {response.text}")
    return response.json()


def registration(challenge):
    """A WebAuthn "none" registration (RegistrationResponseJSON) for `challenge`, ES256, UP and UV set."""
    key = ec.generate_private_key(ec.SECP256R1())
    credential_id = os.urandom(32)
    attested = AttestedCredentialData.create(bytes(16), credential_id, ES256.from_cryptography_key(key.public_key()))
    flags = AuthenticatorData.FLAG.UP | AuthenticatorData.FLAG.UV | AuthenticatorData.FLAG.AT
    auth_data = AuthenticatorData.create(hashlib.sha256(RP_ID.encode()).digest(), flags, 0, bytes(attested))
    attestation = AttestationObject.create("none", auth_data, {})
    client_data = CollectedClientData.create(type="webauthn.create", challenge=challenge, origin=ORIGIN)
    return {
        "id": b64url(credential_id),
        "rawId": b64url(credential_id),
        "response": {"clientDataJSON": b64url(bytes(client_data)), "attestationObject": b64url(bytes(attestation))},
        "clientExtensionResults": {},
        "type": "public-key",
    }


def hybrid_public_key():
    """A 1984-byte hybrid public key: Ed25519 (32) || ML-DSA-65 (1952)."""
    ed = ed25519.Ed25519PrivateKey.generate().public_key()
    ed_raw = ed.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ml_public, _ = ML_DSA_65.keygen()
    return ed_raw + ml_public


def main():
    url, data_dir, out_dir, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    session = requests.Session()

    number = "+14155550100"
    started = post(session, url, "/v1/phone/verifications", {"phone_number": number}, 201)
    code = outbox_codes(data_dir)[number]
    checked = post(
        session, url, "/v1/phone/verifications/check",
        {"verification_id": started["verification_id"], "code": code}, 200)
    challenge = post(session, url, "/v1/auth/passkey/challenge", {"purpose": "register"}, 201)
    account = post(session, url, "/v1/accounts", {
        "phone_cert": checked["phone_cert"],
        "discovery_inbox": b64url(os.urandom(32)),
        "discovery_xwing_pubkey": b64url(xwing_kem.generate_keypair().public_key),
        "account_signing_pubkey": b64url(hybrid_public_key()),
        "device": {
            "pubkey": b64url(os.urandom(32)), "name": "bench",
            # The relay inbox the device listens on (a bench never subscribes it) and its X-Wing sealing key.
            "inbox": b64url(os.urandom(32)),
            "sealing_key": b64url(xwing_kem.generate_keypair().public_key),
        },
        "passkey": {
            "challenge_id": challenge["challenge_id"],
            "credential": registration(base64.urlsafe_b64decode(challenge["challenge"] + "==")),
        },
    }, 201)
    with open(os.path.join(out_dir, "discovery.json"), "w") as out:
        json.dump({"phone_cert": checked["phone_cert"]}, out)
    post(session, url, "/v1/discovery/own", {"phone_cert": checked["phone_cert"]}, 200)

    # One number per verification, so each code is found by its number whatever the order of sending.
    numbers = [f"+1650{i:07d}" for i in range(count)]
    local = threading.local()

    def start(number):
        if not hasattr(local, "session"):
            local.session = requests.Session()
        return number, post(local.session, url, "/v1/phone/verifications", {"phone_number": number}, 201)

    with ThreadPoolExecutor(max_workers=4) as pool:
        ids = dict((n, r["verification_id"]) for n, r in pool.map(start, numbers))
    codes = outbox_codes(data_dir)
    with open(os.path.join(out_dir, "checks.jsonl"), "w") as out:
        for number in numbers:
            out.write(json.dumps({"verification_id": ids[number], "code": codes[number]}) + "\n")
    json.dump({
        "account_id": account["account_id"], "session_token": account["session_token"], "verifications": count,
    }, sys.stdout)
    print()


if __name__ == "__main__":
    main()
