#!/usr/bin/env python3
"""A chaos server for Conveyor's soak (Integrations/Sources/ChaosSoak): every path is one way a
server can misbehave, written as raw bytes on a plain TCP socket (Python standard library only).

Binds 127.0.0.1 on a free port, prints "PORT <n>" on its first stdout line, and exits when its
stdin closes. GET /<misbehavior>; /list prints the names, one per line.
"""
import os
import socket
import socketserver
import sys
import threading
import time

OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


def ok(body=b'{"ok":true}', extra=b""):
    return OK_HEAD + extra + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body


def trickle(sock, data, interval):
    for index in range(len(data)):
        sock.sendall(data[index:index + 1])
        time.sleep(interval)


# name -> function(socket) writing the response (or not); the connection closes afterwards.
MISBEHAVIORS = {
    "ok": lambda s: s.sendall(ok(extra=b"Cache-Control: max-age=1\r\n")),
    "slow-start": lambda s: (time.sleep(0.1), s.sendall(ok())),
    "reset-before-status": lambda s: None,
    "half-sent": lambda s: s.sendall(b"HTTP/1.1 200 OK\r\n"),  # swift-corelibs-foundation#5285
    "mid-headers": lambda s: s.sendall(b"HTTP/1.1 200 OK\r\nContent-Ty"),
    "truncated-body": lambda s: s.sendall(OK_HEAD + b"Content-Length: 100\r\n\r\n[1,2,3"),
    "header-trickle": lambda s: trickle(s, ok(), 0.02),
    "body-trickle": lambda s: (s.sendall(OK_HEAD + b"Content-Length: 200\r\n\r\n"), trickle(s, b"x" * 200, 0.01)),
    "garbage-status": lambda s: s.sendall(b"\x00\xffNOT HTTP AT ALL\r\n\r\n"),
    "bad-status-code": lambda s: s.sendall(b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"),
    "two-lengths": lambda s: s.sendall(OK_HEAD + b"Content-Length: 2\r\nContent-Length: 9\r\n\r\nok"),
    "bad-chunk-size": lambda s: s.sendall(OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
    "chunked-cut": lambda s: s.sendall(OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"),
    "huge-headers": lambda s: s.sendall(OK_HEAD + b"X-Big: " + b"a" * (1 << 20) + b"\r\nContent-Length: 2\r\n\r\nok"),
    "nul-header": lambda s: s.sendall(ok(extra=b"X-Odd: a\x00b\r\n")),
    "cr-header": lambda s: s.sendall(ok(extra=b"X-Odd: a\rb\r\n")),
    "latin1-header": lambda s: s.sendall(ok(extra=b"X-Odd: \xe9t\xe9\r\n")),
    "non-ascii-date": lambda s: s.sendall(ok(extra=b"Date: Sun\xdc\xb1, 06 Nov 1994 08:49:37 GMT\r\nCache-Control: max-age=5\r\n")),
    "unsolicited-304": lambda s: s.sendall(b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"),
    "retry-503": lambda s: s.sendall(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n"),
    "close-delimited": lambda s: s.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end"),
    "too-large": lambda s: s.sendall(OK_HEAD + b"Content-Length: 2097152\r\n\r\n" + b"x" * 2097152),
}


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        sock = self.request
        try:
            request = b""
            while b"\r\n\r\n" not in request and len(request) < 65536:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                request += chunk
            path = request.split(b" ", 2)[1].decode("latin-1") if request.count(b" ") >= 2 else "/"
            name = path.split("?")[0].strip("/")
            if name == "list":
                body = "\n".join(MISBEHAVIORS).encode()
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            else:
                MISBEHAVIORS.get(name, MISBEHAVIORS["ok"])(sock)
        except OSError:
            pass
        finally:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main():
    server = Server(("127.0.0.1", 0), Handler)
    print("PORT", server.server_address[1], flush=True)

    def exit_when_stdin_closes():
        while sys.stdin.buffer.read(4096):
            pass
        os._exit(0)

    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    server.serve_forever()


if __name__ == "__main__":
    main()
