"""The outside WebAuthn references the Swift WebAuthn tests compare against, in oracle.py's protocol.

One JSON request per line on stdin: {"op": NAME, ...arguments}, bytes as hex; reply {"ok": {...}} or
{"error": MESSAGE}. Two implementations no one here wrote:

- python-fido2 (Yubico, PyPI `fido2`): its data classes build registrations and assertions the way an
  authenticator and a client do (AttestedCredentialData, AuthenticatorData, AttestationObject,
  CollectedClientData, ES256 COSE keys, its CBOR codec), signed with a pyca/cryptography P-256 key.
- py_webauthn (Duo, PyPI `webauthn`): its relying-party functions verify_registration_response and
  verify_authentication_response check what the Swift SoftwareAuthenticator produces.
"""

import json
import sys

try:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    _missing = None
except ImportError as error:  # answered per request, so the Swift test says to run ./scripts/setup.sh
    _missing = error


def h(name, request):
    return bytes.fromhex(request[name])


def _x963(public):
    return public.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)


def _flags(r, *, attested):
    from fido2.webauthn import AuthenticatorData

    F = AuthenticatorData.FLAG
    flags = F(0)
    if r.get("up", True):
        flags |= F.UP
    if r.get("uv", True):
        flags |= F.UV
    if r.get("be", False):
        flags |= F.BE
    if r.get("bs", False):
        flags |= F.BS
    if attested:
        flags |= F.AT
    return flags


def fido2_registration(r):
    """A registration made with python-fido2's data classes: a fresh P-256 key (pyca), fmt `r["fmt"]`
    (default "none", attStmt {}), clientDataJSON from CollectedClientData.create."""
    import os

    from fido2.cose import ES256
    from fido2.webauthn import AttestationObject, AttestedCredentialData, AuthenticatorData, CollectedClientData

    key = ec.generate_private_key(ec.SECP256R1())
    credential_id = os.urandom(r.get("id_length", 32))
    attested = AttestedCredentialData.create(bytes(16), credential_id, ES256.from_cryptography_key(key.public_key()))
    digest = hashes.Hash(hashes.SHA256())
    digest.update(r["rp_id"].encode())
    auth_data = AuthenticatorData.create(digest.finalize(), _flags(r, attested=True), r.get("counter", 0), bytes(attested))
    attestation = AttestationObject.create(r.get("fmt", "none"), auth_data, {})
    client_data = CollectedClientData.create(
        type=r.get("type", "webauthn.create"), challenge=h("challenge", r), origin=r["origin"]
    )
    return {
        "attestation_object": bytes(attestation).hex(),
        "client_data_json": bytes(client_data).hex(),
        "credential_id": credential_id.hex(),
        "private": key.private_numbers().private_value.to_bytes(32, "big").hex(),
        "public": _x963(key.public_key()).hex(),
    }


def fido2_assertion(r):
    """An assertion made with python-fido2's AuthenticatorData and CollectedClientData, signed (DER ECDSA)
    by pyca over authenticatorData || SHA-256(clientDataJSON)."""
    from fido2.webauthn import AuthenticatorData, CollectedClientData

    key = ec.derive_private_key(int.from_bytes(h("private", r), "big"), ec.SECP256R1())
    digest = hashes.Hash(hashes.SHA256())
    digest.update(r["rp_id"].encode())
    auth_data = AuthenticatorData.create(digest.finalize(), _flags(r, attested=False), r["counter"])
    client_data = CollectedClientData.create(
        type=r.get("type", "webauthn.get"), challenge=h("challenge", r), origin=r["origin"]
    )
    signature = key.sign(bytes(auth_data) + client_data.hash, ec.ECDSA(hashes.SHA256()))
    return {"authenticator_data": bytes(auth_data).hex(), "client_data_json": bytes(client_data).hex(), "signature": signature.hex()}


def fido2_cbor_decode(r):
    """python-fido2's CBOR decoder (fido2.cbor), answering with its own canonical re-encoding."""
    from fido2 import cbor

    value = cbor.decode(h("data", r))
    return {"out": cbor.encode(value).hex()}


def fido2_cose_key(r):
    """python-fido2's ES256 COSE_Key for the uncompressed point `public`, and its verdict on `cose` bytes."""
    from fido2 import cbor
    from fido2.cose import CoseKey, ES256

    out = {}
    if "public" in r:
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), h("public", r))
        out["out"] = cbor.encode(ES256.from_cryptography_key(public)).hex()
    if "cose" in r:
        key = CoseKey.parse(cbor.decode(h("cose", r)))
        out["algorithm"] = key.ALGORITHM
        numbers = ec.EllipticCurvePublicNumbers(int.from_bytes(key[-2], "big"), int.from_bytes(key[-3], "big"), ec.SECP256R1())
        out["public"] = _x963(numbers.public_key()).hex()
    return out


def check(r):
    """Whether both references are installed (the Swift tests ask first, to fail with a clear message)."""
    from importlib.metadata import version

    if _missing is not None:
        raise _missing
    import fido2  # noqa: F401
    import webauthn  # noqa: F401

    return {"fido2": version("fido2"), "webauthn": version("webauthn")}


def fido2_parse_options(r):
    """python-fido2's reading of PublicKeyCredentialCreationOptionsJSON / RequestOptionsJSON text."""
    from fido2.webauthn import PublicKeyCredentialCreationOptions, PublicKeyCredentialRequestOptions

    data = json.loads(r["json"])
    if r["kind"] == "creation":
        o = PublicKeyCredentialCreationOptions.from_dict(data)
        return {
            "rp_id": o.rp.id,
            "user_id": o.user.id.hex(),
            "challenge": o.challenge.hex(),
            "algs": [p.alg for p in o.pub_key_cred_params],
            "exclude": [c.id.hex() for c in o.exclude_credentials or []],
            "resident_key": o.authenticator_selection.resident_key.value,
            "user_verification": o.authenticator_selection.user_verification.value,
            "attestation": o.attestation.value,
            "timeout": o.timeout,
        }
    o = PublicKeyCredentialRequestOptions.from_dict(data)
    return {
        "rp_id": o.rp_id,
        "challenge": o.challenge.hex(),
        "allow": [c.id.hex() for c in o.allow_credentials or []],
        "user_verification": o.user_verification.value,
        "timeout": o.timeout,
    }


def pywebauthn_verify_registration(r):
    """py_webauthn's verify_registration_response on a RegistrationResponseJSON text."""
    from webauthn import verify_registration_response

    verified = verify_registration_response(
        credential=r["json"],
        expected_challenge=h("challenge", r),
        expected_rp_id=r["rp_id"],
        expected_origin=r["origin"],
        require_user_verification=r.get("require_uv", False),
    )
    return {
        "credential_id": verified.credential_id.hex(),
        "public_key": verified.credential_public_key.hex(),
        "sign_count": verified.sign_count,
        "fmt": getattr(verified.fmt, "value", verified.fmt),
        "user_verified": verified.user_verified,
        "backed_up": verified.credential_backed_up,
        "aaguid": verified.aaguid,
    }


def pywebauthn_verify_authentication(r):
    """py_webauthn's verify_authentication_response on an AuthenticationResponseJSON text."""
    from webauthn import verify_authentication_response

    verified = verify_authentication_response(
        credential=r["json"],
        expected_challenge=h("challenge", r),
        expected_rp_id=r["rp_id"],
        expected_origin=r["origin"],
        credential_public_key=h("public_key", r),
        credential_current_sign_count=r["sign_count"],
        require_user_verification=r.get("require_uv", False),
    )
    return {"new_sign_count": verified.new_sign_count, "user_verified": verified.user_verified}


def main():
    operations = {
        name: fn
        for name, fn in globals().items()
        if type(fn).__name__ == "function" and fn.__module__ == __name__ and not name.startswith("_")
        and name not in ("main", "h")
    }
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply = {"ok": operations[request["op"]](request)}
        except ImportError as error:
            reply = {"error": f"reference missing ({error}): run ./scripts/setup.sh to install requirements.txt"}
        except Exception as error:  # every refusal goes back to the test, which decides what it means
            reply = {"error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
