"""An HTTP/1.1 server, plain or over TLS, for the device's HTTP transport's tests (SocketHTTPTransportTests).

Usage: http_server.py [CERT KEY [ADDRESS]]
Prints its port on a line, then serves on ADDRESS (127.0.0.1) until its standard input closes. Python's http.server and
ssl, no code of ours: what the transport is tried against. Paths:
  /echo          any method: JSON of the method, path, headers, the body's length and SHA-256 (a chunked
                 request body is decoded), and the client's port (a kept connection shows the same one)
  /chunked       a body of 100,000 bytes sent in chunks
  /until-close   a body with no length, ended by closing (over TLS, with close_notify)
  /cut           a Content-Length of 1,000 and 10 bytes, then the connection closes
  /stall         answers nothing for 30 seconds
  /close         a short answer with Connection: close
"""

import hashlib
import http.server
import json
import socketserver
import ssl
import sys
import threading
import time


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length", "0"))
        return self.rfile.read(length) if length else b""

    def answer(self):
        path = self.path.split("?")[0]
        body = self.body()
        if path == "/echo":
            payload = json.dumps(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "length": len(body),
                    "sha256": hashlib.sha256(body).hexdigest(),
                    "client_port": self.client_address[1],
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        elif path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            data = bytes(i % 251 for i in range(100_000))
            for start in range(0, len(data), 7_000):
                piece = data[start : start + 7_000]
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        elif path == "/until-close":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"until the end" * 1000)
            self.wfile.flush()
            self.close_connection = True
            if isinstance(self.connection, ssl.SSLSocket):
                self.connection.unwrap()
        elif path == "/cut":
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            self.close_connection = True
        elif path == "/stall":
            time.sleep(30)
        elif path == "/close":
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"ok")
            self.close_connection = True
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = answer


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    server = Server((sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1", 0), Handler)
    if len(sys.argv) >= 3:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1], sys.argv[2])
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()


if __name__ == "__main__":
    main()
