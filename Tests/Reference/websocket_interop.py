"""Interop between our WebSocket code (HTTPServer) and the Python `websockets` package.

    websocket_interop.py client PORT   drive websockets' client against our server's /echo route
    websocket_interop.py server        run a websockets echo server on 127.0.0.1; print its port, then serve
                                       until stdin closes
    websocket_interop.py server CERT KEY  the same over TLS (wss://), showing the PEM chain CERT with KEY

The client mode prints one JSON line {"ok": true} or exits non-zero with the failure on stderr.
"""

import json
import os
import ssl
import sys
import threading

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.sync.server import serve


def fail(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def client(port):
    with connect(f"ws://127.0.0.1:{port}/echo", max_size=None, open_timeout=120, close_timeout=120) as ws:
        ws.send("héllo, wörld")
        if ws.recv(timeout=120) != "héllo, wörld":
            fail("text echo differs")
        ws.send(b"\x00\x01\xfe\xff")
        if ws.recv(timeout=120) != b"\x00\x01\xfe\xff":
            fail("binary echo differs")
        big = os.urandom(1 << 20)
        ws.send(big)
        if ws.recv(timeout=120) != big:
            fail("the 1 MiB echo differs")
        ws.ping(b"are you there").wait(timeout=120) or fail("no pong")
        # Our server closes with 4002 when asked.
        ws.send("close 4002")
        try:
            ws.recv(timeout=120)
            fail("the server did not close")
        except ConnectionClosed as closed:
            if closed.rcvd is None or closed.rcvd.code != 4002 or closed.rcvd.reason != "asked to":
                fail(f"the server closed with {closed.rcvd!r}, not 4002 'asked to'")
    # A second connection closes from the client side with a code of its own.
    with connect(f"ws://127.0.0.1:{port}/echo", open_timeout=120, close_timeout=120) as ws:
        ws.send("x")
        ws.recv(timeout=120)
        ws.close(code=4100, reason="client done")
        if ws.protocol.close_rcvd is None or ws.protocol.close_rcvd.code != 4100:
            fail(f"the server answered the close with {ws.protocol.close_rcvd!r}, not 4100")
    print(json.dumps({"ok": True}), flush=True)


def server(tls=None):
    def echo(ws):
        try:
            for message in ws:
                ws.send(message)
        except ConnectionClosed:
            pass

    context = None
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tls[0], tls[1])
    with serve(echo, "127.0.0.1", 0, max_size=None, ssl=context) as running:
        # Exit when the test closes our stdin (or dies), so no server outlives its test.
        threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
        print(running.socket.getsockname()[1], flush=True)
        running.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "client":
        client(int(sys.argv[2]))
    elif len(sys.argv) == 2 and sys.argv[1] == "server":
        server()
    elif len(sys.argv) == 4 and sys.argv[1] == "server":
        server((sys.argv[2], sys.argv[3]))
    else:
        fail(__doc__)
