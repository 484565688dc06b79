"""An outside client for pixie-server's relay (docs/pixie-protocol.md, "Relay"), on the Python `websockets`
package: the frames are built here byte by byte from the spec, not from our Swift code.

    relay_interop.py PORT TOKEN_HEX TOKEN_HEX

Two connections to ws://127.0.0.1:PORT/v1/relay: the listener subscribes a random subject, the sender sends
one Sync frame to it with the first token (expects OK and a DELIVER on the listener), sends again with the
same token (expects ERROR token_spent), sends with the second token (OK), and pings. Prints one JSON line
{"ok": true} or exits non-zero with the failure on stderr.
"""

import json
import os
import struct
import sys

from websockets.sync.client import connect


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def subscribe(request_id, subject, push_token=b""):
    return bytes([0x01]) + struct.pack(">I", request_id) + subject + struct.pack(">H", len(push_token)) + push_token


def send(request_id, subject, wake, token, payload):
    return bytes([0x03]) + struct.pack(">I", request_id) + subject + bytes([wake]) + struct.pack(">H", len(token)) + token + payload


def ping(request_id):
    return bytes([0x04]) + struct.pack(">I", request_id)


def ok(request_id):
    return bytes([0x82]) + struct.pack(">I", request_id)


def main(port, first, second):
    url = f"ws://127.0.0.1:{port}/v1/relay"
    subject = os.urandom(32)
    payload = os.urandom(1024)
    with connect(url, open_timeout=120, close_timeout=120) as listener, connect(url, open_timeout=120, close_timeout=120) as sender:
        listener.send(subscribe(7, subject))
        if listener.recv(timeout=120) != ok(7):
            fail("SUBSCRIBE was not answered OK 7")
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
