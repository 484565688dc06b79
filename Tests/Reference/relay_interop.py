"""An outside client for pixie-server's relay (docs/pixie-protocol.md, "Relay"), on the Python `websockets`
package: the frames are built here byte by byte from the spec, not from our Swift code.

    relay_interop.py PORT TOKEN_HEX TOKEN_HEX

Two connections to ws://127.0.0.1:PORT/v1/relay, each opened by the relay's CHALLENGE: the listener subscribes
the subject of a fresh Ed25519 key (pyca/cryptography) with its proof, a stranger's SUBSCRIBE of that subject
with its own key is refused (subject_not_proven, 9), the sender sends
one Sync frame to it with the first token (expects OK and a DELIVER on the listener), sends again with the
same token (expects ERROR token_spent), sends with the second token (OK), and pings. Prints one JSON line
{"ok": true} or exits non-zero with the failure on stderr.
"""

import hashlib
import json
import os
import struct
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from websockets.sync.client import connect


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def public_bytes(key):
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def subject_of(key):
    """SHA-256("pixie/relay/subject/v1" || 0x00 || Ed25519 public key)."""
    return hashlib.sha256(b"pixie/relay/subject/v1\x00" + public_bytes(key)).digest()


def subscribe(request_id, key, challenge, subject=None, push_token=b""):
    """SUBSCRIBE: subject, the owner's public key, and its signature over
    "pixie/relay/subscribe/v1" || 0x00 || challenge || subject || u16 push token length || push token."""
    subject = subject or subject_of(key)
    signed = b"pixie/relay/subscribe/v1\x00" + challenge + subject + struct.pack(">H", len(push_token)) + push_token
    return (
        bytes([0x01]) + struct.pack(">I", request_id) + subject + public_bytes(key) + key.sign(signed)
        + struct.pack(">H", len(push_token)) + push_token
    )


def challenge_of(connection):
    frame = connection.recv(timeout=120)
    if len(frame) != 33 or frame[0] != 0x84:
        fail(f"the relay's first frame is not a CHALLENGE: {frame[:8].hex()}")
    return frame[1:]


def send(request_id, subject, wake, token, payload):
    return bytes([0x03]) + struct.pack(">I", request_id) + subject + bytes([wake]) + struct.pack(">H", len(token)) + token + payload


def ping(request_id):
    return bytes([0x04]) + struct.pack(">I", request_id)


def ok(request_id):
    return bytes([0x82]) + struct.pack(">I", request_id)


def main(port, first, second):
    url = f"ws://127.0.0.1:{port}/v1/relay"
    owner = Ed25519PrivateKey.generate()
    subject = subject_of(owner)
    payload = os.urandom(1024)
    with connect(url, open_timeout=120, close_timeout=120) as listener, connect(url, open_timeout=120, close_timeout=120) as sender:
        listener_challenge = challenge_of(listener)
        sender_challenge = challenge_of(sender)
        listener.send(subscribe(7, owner, listener_challenge))
        if listener.recv(timeout=120) != ok(7):
            fail("SUBSCRIBE was not answered OK 7")
        # A stranger who knows the subject signs with its own key: refused, the holder's subscription stays.
        sender.send(subscribe(8, Ed25519PrivateKey.generate(), sender_challenge, subject=subject))
        refusal = sender.recv(timeout=120)
        if refusal[:7] != bytes([0x83]) + struct.pack(">IH", 8, 9):
            fail(f"a stranger's SUBSCRIBE was answered {refusal.hex()}, not ERROR 8 subject_not_proven (9)")
        sender.send(send(1, subject, 1, first, payload))
        if sender.recv(timeout=120) != ok(1):
            fail("SEND with a fresh token was not answered OK 1")
        deliver = listener.recv(timeout=120)
        if deliver != bytes([0x81]) + subject + bytes([1]) + payload:
            fail(f"the DELIVER differs: {deliver[:40].hex()}...")
        sender.send(send(2, subject, 0, first, payload))
        error = sender.recv(timeout=120)
        if error[:7] != bytes([0x83]) + struct.pack(">IH", 2, 4):
            fail(f"a spent token was answered {error.hex()}, not ERROR 2 token_spent (4)")
        reason = error[7:].decode("utf-8")
        sender.send(send(3, subject, 0, second, b""))
        if sender.recv(timeout=120) != ok(3):
            fail("SEND with the second token was not answered OK 3")
        if listener.recv(timeout=120) != bytes([0x81]) + subject + bytes([0]):
            fail("the empty DELIVER differs")
        sender.send(ping(9))
        if sender.recv(timeout=120) != ok(9):
            fail("PING was not answered OK 9")
    print(json.dumps({"ok": True, "reason": reason}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        fail(__doc__)
    main(int(sys.argv[1]), bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3]))
