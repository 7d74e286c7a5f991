#!/usr/bin/env python3
"""A small HTTP server for Conveyor's integration tests (Python standard library only).

Binds 127.0.0.1 on the given port (0 = a free one), prints "PORT <n>" on its first stdout line,
and exits when its stdin closes, so a crashed test process never leaves it behind. With
`--spawner` it starts servers on request instead (see `spawn_on_request`).
"""
import argparse
import hashlib
import json
import re
import struct
import zlib
import os
import random
import signal
import sys
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

counters = {}
counters_lock = threading.Lock()
seen = {}  # /flaky/<name>: the traceparent fields each attempt carried


def bump(name, reset=False):
    with counters_lock:
        counters[name] = 0 if reset else counters.get(name, 0) + 1
        return counters[name]


held_events = {}


def held_event(name):
    """The event /held/<name> requests (and /events?hold=<name>) wait on."""
    with counters_lock:
        return held_events.setdefault(name, threading.Event())


hedge_first_ended = {}  # /hedge/<name>: whether its first request saw the client hang up


def hedge_event(name):
    """Set when the first /hedge/<name> request ended (the client hung up, or it answered)."""
    with counters_lock:
        return held_events.setdefault("hedge/" + name, threading.Event())


endless_written = {}  # /endless?key=: bytes written before the client hung up
endless_events = {}


def endless_event(key):
    """Set when /endless?key=<key> stopped writing."""
    with counters_lock:
        return endless_events.setdefault(key, threading.Event())


gzip_cache = {}


def gzip_zeros(total):
    """A gzip member of `total` zero bytes (1 GiB compresses to about 1 MB). Deflating a GiB takes
    seconds, so one MiB is deflated and its block repeated: after a full flush each block stands
    alone (no back-reference crosses it), so the same MiB deflates to the same bytes every time."""
    with counters_lock:
        if total not in gzip_cache:
            mib = 1 << 20
            compressor = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate; the container is below
            block = compressor.compress(bytes(mib)) + compressor.flush(zlib.Z_FULL_FLUSH)
            whole, rest = divmod(total, mib)
            tail = compressor.compress(bytes(rest)) + compressor.flush(zlib.Z_FINISH)
            crc, zeros = 0, bytes(mib)
            for _ in range(whole):
                crc = zlib.crc32(zeros, crc)
            crc = zlib.crc32(bytes(rest), crc)
            header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # gzip, deflate, no name, no mtime
            trailer = struct.pack("<II", crc, total & 0xFFFFFFFF)
            gzip_cache[total] = header + block * whole + tail + trailer
        return gzip_cache[total]


def parse_multipart(content_type, body):
    """The parts of a multipart/form-data body (RFC 7578), without the removed `cgi` module.

    Returns a list of (headers dict with lower-case names, content bytes); raises ValueError.
    """
    kind, _, params = content_type.partition(";")
    boundary = None
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.lower() == "boundary":
            boundary = value[1:-1] if value.startswith('"') and value.endswith('"') else value
    if kind.strip().lower() != "multipart/form-data" or not boundary:
        raise ValueError("not multipart/form-data with a boundary")
    # Every delimiter but the first follows a CRLF; a preamble before the first is ignored.
    sections = (b"\r\n" + body).split(b"\r\n--" + boundary.encode())
    if len(sections) < 2 or not sections[-1].startswith(b"--"):
        raise ValueError("no closing delimiter")
    parts = []
    for section in sections[1:-1]:
        if not section.startswith(b"\r\n"):
            raise ValueError("a delimiter is not followed by CRLF")
        rest = section[2:]
        if rest.startswith(b"\r\n"):  # a part with no headers
            head, content = b"", rest[2:]
        else:
            head, separator, content = rest.partition(b"\r\n\r\n")
            if not separator:
                raise ValueError("a part's headers do not end")
        headers = {}
        for line in head.decode("utf-8").split("\r\n") if head else []:
            name, colon, value = line.partition(":")
            if not colon:
                raise ValueError("a header line has no colon")
            headers[name.strip().lower()] = value.strip()
        parts.append((headers, content))
    return parts


def disposition_params(value):
    """name and filename of a Content-Disposition value, undoing the %22/%0D/%0A escaping."""
    unescape = lambda text: text.replace("%22", '"').replace("%0D", "\r").replace("%0A", "\n")
    params = {}
    for match in re.finditer(r';\s*([^=;\s]+)\s*=\s*(?:"([^"]*)"|([^;\s]*))', value):
        params[match.group(1).lower()] = unescape(match.group(2) if match.group(2) is not None else match.group(3))
    return params


def describe_multipart(content_type, body):
    """What /multipart answers: each part's name, filename, content type, size, digest, and text."""
    described = []
    for headers, content in parse_multipart(content_type, body):
        params = disposition_params(headers.get("content-disposition", ""))
        text = None
        if "filename" not in params and len(content) < 1024:
            try:
                text = content.decode("utf-8")
            except UnicodeDecodeError:
                pass
        described.append({
            "name": params.get("name"), "filename": params.get("filename"),
            "contentType": headers.get("content-type"), "size": len(content),
            "sha256": hashlib.sha256(content).hexdigest(), "text": text,
        })
    return {"parts": described}


# Byte i of every /blob body is i % 256. A chunk of up to 64 KiB starting at any offset is a slice
# of this pattern (one block and one more period, so a slice may start at any phase).
PATTERN = memoryview(bytes(range(256)) * 257)
BLOB_DATE = "Mon, 01 Jan 2024 00:00:00 GMT"
blob_ranges = {}  # key -> the Range header of each /blob request for it (None where it had none)
upload_logs = {}  # key -> one {"bytes", "sha256", "status"} per /upload for it


def byte_range(header, total):
    """(first, last) for a single `bytes=a-b`, `bytes=a-` or `bytes=-n` range; "unsatisfiable";
    or None when the header is not one such range (a server then ignores it)."""
    match = re.fullmatch(r"bytes=(\d*)-(\d*)", header.strip())
    if not match or match.group(1) == match.group(2) == "":
        return None
    first, last = match.group(1), match.group(2)
    if first == "":  # the last n bytes
        n = int(last)
        return (max(0, total - n), total - 1) if n > 0 and total > 0 else "unsatisfiable"
    first, last = int(first), int(last) if last else total - 1
    if match.group(2) and last < first:
        return None
    return (first, min(last, total - 1)) if first < total else "unsatisfiable"


# Unseeded /events bodies already built (the benchmark reads the same one many times).
EVENT_BODIES = {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # otherwise every response waits ~40 ms for delayed ACKs

    def log_message(self, *args):
        pass

    def wait_for_hang_up(self, limit):
        """Whether the client closed the connection within `limit` seconds (without sending more)."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable:
                try:
                    return self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    return True
        return False

    def send(self, status, body=b"", content_type="application/json", headers=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        elif isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        if body or status not in (204, 304):
            self.send_header("Content-Type", content_type)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(0 if status in (204, 304) else len(body)))
        self.end_headers()
        if self.command != "HEAD" and status not in (204, 304):
            self.wfile.write(body)

    def handle_any(self):
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        arg = lambda name, default=None: query.get(name, [default])[0]
        if url.path == "/upload":  # reads its own body, in pieces
            self.upload(arg)
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = [p for p in url.path.split("/") if p]

        if url.path == "/echo":
            text = body.decode("utf-8", "replace")
            try:
                parsed = json.loads(text) if text else None
            except ValueError:
                parsed = None
            is_form = (self.headers.get("Content-Type") or "").startswith("application/x-www-form-urlencoded")
            headers = {}
            for name, value in self.headers.items():
                key = name.lower()
                headers[key] = headers[key] + ", " + value if key in headers else value
            self.send(200, {
                "method": self.command, "path": url.path, "rawQuery": url.query, "query": query,
                "headers": headers, "body": text, "json": parsed,
                "form": parse_qs(text, keep_blank_values=True) if is_form else None,
            })
        elif url.path == "/set-cookie":  # 200 with Set-Cookie: <cookie> (the query's cookie=, verbatim)
            self.send(200, {"set": arg("cookie", "")}, headers=[("Set-Cookie", arg("cookie", ""))])
        elif url.path == "/multipart":  # parses a multipart/form-data body: describe_multipart
            try:
                self.send(200, describe_multipart(self.headers.get("Content-Type") or "", body))
            except (ValueError, UnicodeDecodeError) as error:
                self.send(400, {"error": str(error)})
        elif len(parts) == 2 and parts[0] == "status":
            extra = [("Retry-After", arg("retryAfter"))] if arg("retryAfter") is not None else []
            self.send(int(parts[1]), {"status": int(parts[1])}, headers=extra)
        elif url.path == "/json/movies":
            self.send(200, [{"id": 1, "title": "Alien"}, {"id": 2, "title": "Heat"}])
        elif url.path == "/malformed":
            self.send(200, '{"id": 1, "title": ')
        elif url.path == "/slow":
            seconds = float(arg("seconds", "1"))
            time.sleep(seconds)
            self.send(200, {"slept": seconds})
        elif url.path == "/empty":
            self.send(204)
        elif url.path == "/text":
            self.send(200, "héllo wörld", "text/plain; charset=utf-8")
        elif url.path == "/bytes":
            count = int(arg("count", "0"))
            self.send(200, (bytes(range(256)) * (count // 256 + 1))[:count], "application/octet-stream")
        elif url.path == "/quota":
            self.quota(arg)
        elif url.path == "/quota/count":  # how many /quota?key= requests were served and refused
            key = arg("key", "")
            self.send(200, {"served": counters.get("quota/ok/" + key, 0), "refused": counters.get("quota/no/" + key, 0)})
        elif len(parts) >= 2 and parts[0] == "counter":
            count = bump("counter/" + parts[1], reset=parts[-1] == "reset" and len(parts) == 3)
            self.send(200, {"name": parts[1], "count": count})
        # --- De-duplication routes (DeduplicationBehavior end-to-end test) -----------------------
        # /held/<name>          counts a hit, then waits until /held/<name>/release (30 s at most)
        # /held/<name>/release  lets every held and later /held/<name> request answer at once
        # /held/<name>/hits     how many /held/<name> requests arrived, without counting itself
        elif len(parts) == 3 and parts[0] == "held" and parts[2] in ("release", "hits"):
            if parts[2] == "release":
                held_event(parts[1]).set()
            self.send(200, {"name": parts[1], "hits": counters.get("held/" + parts[1], 0)})
        elif len(parts) == 2 and parts[0] == "held":
            count = bump("held/" + parts[1])
            held_event(parts[1]).wait(30)
            self.send(200, {"name": parts[1], "count": count})
        # --- end of the de-duplication routes ---------------------------------------------------
        # --- Hedging routes (HedgingLoopbackTests) ------------------------------------------------
        # /hedge/<name>         the first request waits for the client to hang up (30 s at most,
        #                       then answers {"attempt": 1}); every later one answers {"attempt": n}
        # /hedge/<name>/ended   waits until the first request ended (30 s at most): the hits, and
        #                       whether the client hung up on the first
        elif len(parts) == 3 and parts[0] == "hedge" and parts[2] == "ended":
            hedge_event(parts[1]).wait(30)
            with counters_lock:
                hits = counters.get("hedge/" + parts[1], 0)
                hung_up = hedge_first_ended.get(parts[1])
            self.send(200, {"hits": hits, "hungUp": hung_up})
        elif len(parts) == 2 and parts[0] == "hedge":
            count = bump("hedge/" + parts[1])
            if count > 1:
                self.send(200, {"attempt": count})
                return
            hung_up = self.wait_for_hang_up(30)
            with counters_lock:
                hedge_first_ended[parts[1]] = hung_up
            hedge_event(parts[1]).set()
            if hung_up:
                self.close_connection = True
            else:
                self.send(200, {"attempt": 1})
        # --- end of the hedging routes ------------------------------------------------------------
        elif len(parts) >= 2 and parts[0] == "flaky":
            if len(parts) == 3 and parts[2] == "reset":
                bump("flaky/" + parts[1], reset=True)
                self.send(200, {"reset": parts[1]})
                return
            if len(parts) == 3 and parts[2] == "seen":  # the trace headers each attempt carried
                with counters_lock:
                    self.send(200, {"traceparent": seen.get(parts[1], [])})
                return
            with counters_lock:  # every traceparent field of each attempt, duplicates included
                seen.setdefault(parts[1], []).append(self.headers.get_all("traceparent") or [])
            attempt = bump("flaky/" + parts[1])
            extra = [("Retry-After", arg("retryAfter"))] if arg("retryAfter") is not None else []
            if attempt <= int(arg("failures", "1")):
                self.send(int(arg("status", "503")), {"attempt": attempt}, headers=extra)
            else:
                self.send(200, {"attempts": attempt})
        elif url.path == "/nonce":  # echoes X-Request-Nonce back unless ?echo=0 (a captive portal)
            nonce = self.headers.get("X-Request-Nonce")
            extra = [("X-Request-Nonce", nonce)] if nonce and arg("echo", "1") == "1" else []
            self.send(200, {"ok": True}, headers=extra)
        elif url.path == "/auth":
            if self.headers.get("Authorization") == "Bearer " + (arg("token") or ""):
                self.send(200, {"ok": True})
            else:
                self.send(401, {"ok": False}, headers=[("WWW-Authenticate", "Bearer")])
        elif url.path == "/events":  # a numbered event stream, resumed from Last-Event-ID: events()
            self.events(arg)
        elif url.path == "/hostile":  # a response with hostile bytes in one header: hostile()
            self.hostile(query.get("header", ["Date"])[0], int(query.get("variant", ["0"])[0]))
        elif url.path == "/trickle":  # the whole response a byte at a time: trickle()
            self.trickle(int(arg("bytes", "40")), float(arg("interval", "0.05")), arg("head", "1") == "1")
        elif url.path.startswith("/framing/"):  # a head that breaks a framing rule: framing()
            self.framing(url.path[len("/framing/"):])
        elif url.path.startswith("/fault/"):
            self.fault(parts[1])
        elif url.path == "/stream":  # `bytes` bytes (default 1 GiB), written in 64 KiB chunks;
            # with hold=<name>, the first `first` bytes, then the rest once /held/<name>/release came
            self.stream(int(arg("bytes", str(1 << 30))), gzip=False,
                        hold=arg("hold"), first=int(arg("first", "0")))
        elif url.path == "/gzipbomb":  # a small gzip body that inflates to `bytes` zero bytes
            self.stream(int(arg("bytes", str(1 << 30))), gzip=True)
        elif url.path == "/endless/written":  # how much /endless?key= wrote, once it stopped (or so far, with wait=0): endless()
            done = endless_event(arg("key", ""))
            finished = done.wait(float(arg("wait", "60")))
            with counters_lock:
                written = endless_written.get(arg("key", ""), 0)
            self.send(200, {"written": written, "finished": finished})
        elif url.path == "/endless":  # writes until the client hangs up, counting: endless()
            self.endless(arg("key", ""), arg("type", "events"), int(arg("bytes", str(1 << 30))))
        elif url.path == "/nested":  # JSON nested `depth` arrays deep
            depth = int(arg("depth", "10000"))
            self.send(200, "[" * depth + "]" * depth)
        elif url.path == "/chain":  # `n` redirects (302 to n-1), then {"end": true} at n=0
            left = int(arg("n", "0"))
            if left > 0:
                self.send(302, b"", headers=[("Location", "/chain?n=%d" % (left - 1))])
            else:
                self.send(200, {"end": True})
        elif url.path == "/loop":  # redirects to itself forever
            self.send(302, b"", headers=[("Location", "/loop")])
        elif url.path == "/redirect":
            self.send(int(arg("status", "302")), b"", headers=[("Location", arg("to", "/echo"))])
        elif len(parts) >= 2 and parts[0] == "cache":
            self.cache(parts, arg)
        elif url.path == "/blob":
            self.blob(arg)
        elif url.path in ("/blob/count", "/blob/ranges", "/upload/log"):
            key, name = arg("key", ""), parts[-1]
            with counters_lock:
                found = {
                    "count": counters.get("blob/" + key, 0),
                    "ranges": list(blob_ranges.get(key, [])),
                    "log": list(upload_logs.get(key, [])),
                }[name]
            self.send(200, {name: found})
        else:
            self.send(404, {"error": "not found"})

    # --- RateLimitBehavior's route (Tests/ConveyorBehaviorsTests/RateLimitLoopbackTests.swift) ---
    # /quota?key=<k>&limit=<n>&window=<seconds>&form=x|ietf|retry
    #   a quota of n requests per window for key k, the window starting at its first request.
    #   Within it: 200 announcing what is left (X-RateLimit-Remaining/-Reset/-Limit, or the IETF
    #   draft's RateLimit/RateLimit-Policy); past it: 429 with Retry-After (the announcement too,
    #   except with form=retry, which announces nothing but the Retry-After).
    def quota(self, arg):
        key, limit, window = arg("key", ""), int(arg("limit", "5")), float(arg("window", "60"))
        form = arg("form", "x")
        now = time.monotonic()
        with counters_lock:
            start = counters.setdefault("quota/start/" + key, now)
            if now - start >= window:
                start = counters["quota/start/" + key] = now
                counters["quota/used/" + key] = 0
            used = counters["quota/used/" + key] = counters.get("quota/used/" + key, 0) + 1
            served = used <= limit
            counters[("quota/ok/" if served else "quota/no/") + key] = counters.get(("quota/ok/" if served else "quota/no/") + key, 0) + 1
        left, reset = max(0, limit - used), max(1, int(start + window - now + 0.999))
        headers = []
        if form == "x":
            headers = [("X-RateLimit-Limit", str(limit)), ("X-RateLimit-Remaining", str(left)), ("X-RateLimit-Reset", str(reset))]
        elif form == "ietf":
            headers = [("RateLimit-Policy", '"quota";q=%d;w=%d' % (limit, int(window))), ("RateLimit", '"quota";r=%d;t=%d' % (left, reset))]
        if not served:
            headers.append(("Retry-After", str(reset)))
        self.send(200 if served else 429, {"left": left}, headers=headers)

    # --- CacheBehavior's routes (Tests/ConveyorBehaviorsTests/CacheEndToEndTests.swift) -------
    # /cache/<name>?cc=<Cache-Control>&etag=<ETag>&lm=<Last-Modified>&vary=<header name>
    #   counts every request to <name>; sends the given headers; answers a GET with 304 when its
    #   If-None-Match equals etag (or, without etag, its If-Modified-Since equals lm); the JSON body
    #   carries the count, the method and the value of the header named by vary (and, with
    #   pad=N, N bytes of padding: a large body for the shared cache's concurrent writers; with
    #   delay=MS, it answers MS milliseconds later: a slow upstream for the fleet's one fill;
    #   with fail=N, its first N requests are answered 503 with Retry-After: 0: a fill that fails).
    # /cache/<name>/count  the count so far, without counting (proves whether the server was asked).
    def cache(self, parts, arg):
        key = "cache/" + parts[1]
        if len(parts) == 3 and parts[2] == "count":
            with counters_lock:
                count = counters.get(key, 0)
            self.send(200, {"count": count})
            return
        count = bump(key)
        if arg("delay") is not None:
            time.sleep(min(int(arg("delay")), 30000) / 1000)
        if count <= int(arg("fail", "0")):
            self.send(503, {"count": count}, headers=[("Retry-After", "0")])
            return
        names = (("cc", "Cache-Control"), ("etag", "ETag"), ("lm", "Last-Modified"), ("vary", "Vary"))
        headers = [(header, arg(param)) for param, header in names if arg(param) is not None]
        etag, modified = arg("etag"), arg("lm")
        if self.command == "GET" and (
            (etag is not None and self.headers.get("If-None-Match") == etag)
            or (etag is None and modified is not None and self.headers.get("If-Modified-Since") == modified)
        ):
            self.send(304, headers=headers)
            return
        varied = self.headers.get(arg("vary")) if arg("vary") else None
        reply = {"count": count, "method": self.command, "varied": varied, "cookie": self.headers.get("Cookie")}
        if arg("pad") is not None:
            reply["pad"] = "p" * min(int(arg("pad")), 1 << 20)
        self.send(200, reply, headers=headers)

    # --- Large transfers (Tests/ConveyorTests/TransferServerTests.swift, transfer-bench) -------
    # /blob?bytes=N  N bytes, byte i = i % 256, with ETag "blob-N", a fixed Last-Modified and
    #   Accept-Ranges; a single Range (a-b, a-, -n) answers 206 with Content-Range, or 416 with
    #   Content-Range bytes */N when it starts past the end; an If-Range that is neither the
    #   ETag nor the Last-Modified date gets the whole 200 instead. Options:
    #   norange=1       ignore Range (always 200, no Accept-Ranges)
    #   etag=<value>    this ETag instead (a test can change the validator between calls)
    #   coding=gzip     the stored representation is gzip (as an object stored compressed is
    #                   served): N pseudo-random bytes (seeded by N) gzipped, sent with
    #                   Content-Encoding: gzip; Range, Content-Range and failat count its bytes
    #   delay=ms&chunk=n  n-byte chunks (64 KiB at most) with ms milliseconds between them
    #   key=X           counts the request (/blob/count?key=X) and logs its Range header
    #                   (/blob/ranges?key=X: null where it had none); then, on the key's first
    #                   request only: fail=<status> answers that status with Retry-After: 0,
    #                   failat=K sends the headers of the whole answer, the bytes before absolute
    #                   offset K, and closes the connection.
    # /upload?key=X (POST/PUT)  reads a Content-Length or chunked body in pieces, never whole, and
    #   answers {"bytes", "sha256", "contentType", "chunked"}. With a key, each upload is logged
    #   (/upload/log?key=X: bytes, sha256, status; status 0 where no answer was sent) and, on the
    #   key's first upload only: fail=<status> answers that status with Retry-After: 0 after
    #   reading the whole body; closeafter=K reads K bytes of the body and closes the connection.
    def blob(self, arg):
        total, key = int(arg("bytes", "0")), arg("key")
        etag = arg("etag", '"blob-%d"' % total)
        requested = self.headers.get("Range")
        first_of_key = False
        if key is not None:
            first_of_key = bump("blob/" + key) == 1
            with counters_lock:
                blob_ranges.setdefault(key, []).append(requested)
        if first_of_key and arg("fail"):
            self.send(int(arg("fail")), {"failed": key}, headers=[("Retry-After", "0")])
            return
        headers = [("ETag", etag), ("Last-Modified", BLOB_DATE)]
        coded = None
        if arg("coding") == "gzip":
            coded = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip wrapper, no file name or time
            coded = coded.compress(random.Random(total).randbytes(total)) + coded.flush()
            total = len(coded)
            headers.append(("Content-Encoding", "gzip"))
        status, first, last = 200, 0, total - 1
        if arg("norange") != "1":
            headers.append(("Accept-Ranges", "bytes"))
            span = byte_range(requested, total) if requested else None
            if span is not None and self.headers.get("If-Range", etag) in (etag, BLOB_DATE):
                if span == "unsatisfiable":
                    headers.append(("Content-Range", "bytes */%d" % total))
                    self.send(416, {"error": "range not satisfiable"}, headers=headers)
                    return
                status, (first, last) = 206, span
                headers.append(("Content-Range", "bytes %d-%d/%d" % (first, last, total)))
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(last + 1 - first))
        self.end_headers()
        if self.command == "HEAD":
            return
        stop = int(arg("failat")) if first_of_key and arg("failat") else last + 1
        chunk = max(1, min(int(arg("chunk", "65536")), 65536))
        delay = int(arg("delay", "0")) / 1000
        offset = first
        try:
            while offset < min(stop, last + 1):
                if delay and offset > first:
                    time.sleep(delay)
                size = min(chunk, min(stop, last + 1) - offset)
                if coded is not None:
                    self.wfile.write(coded[offset : offset + size])
                else:
                    self.wfile.write(PATTERN[offset % 256 : offset % 256 + size])
                offset += size
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client hung up
            return
        if stop <= last:  # failat: the server closes mid-body
            self.hang_up()

    def upload(self, arg):
        key = arg("key")
        first_of_key = key is not None and bump("upload/" + key) == 1
        limit = int(arg("closeafter")) if first_of_key and arg("closeafter") else None
        chunked = "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()
        digest, count, status = hashlib.sha256(), 0, 200
        try:
            for piece in self.body_pieces(chunked, limit):
                digest.update(piece)
                count += len(piece)
        except ConnectionError:
            status = 0  # the client hung up: no answer
        if status and first_of_key and arg("fail"):
            status = int(arg("fail"))
        if limit is not None and count >= limit:
            status = 0  # closeafter: closed without an answer
        if key is not None:
            with counters_lock:
                upload_logs.setdefault(key, []).append({"bytes": count, "sha256": digest.hexdigest(), "status": status})
        if status == 0:
            self.hang_up()
        elif status != 200:
            self.send(status, {"failed": key, "bytes": count}, headers=[("Retry-After", "0")])
        else:
            self.send(200, {
                "bytes": count, "sha256": digest.hexdigest(),
                "contentType": self.headers.get("Content-Type"), "chunked": chunked,
            })

    def body_pieces(self, chunked, limit=None):
        """Yields the request body in pieces of at most 64 KiB (decoding chunked transfer coding),
        and stops after `limit` bytes if given."""
        left = limit if limit is not None else float("inf")

        def read(size):  # up to `size` bytes, in pieces, within the limit
            nonlocal left
            while size > 0 and left > 0:
                piece = self.rfile.read(int(min(65536, size, left)))
                if not piece:
                    raise ConnectionResetError("the body ended early")
                size, left = size - len(piece), left - len(piece)
                yield piece

        if not chunked:
            yield from read(int(self.headers.get("Content-Length") or 0))
            return
        while left > 0:
            line = self.rfile.readline(1024)
            if not line:
                raise ConnectionResetError("the body ended early")
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:  # the last chunk; then trailers up to an empty line
                while self.rfile.readline(1024).strip():
                    pass
                return
            yield from read(size)
            if left > 0:
                self.rfile.readline(1024)  # the CRLF after the chunk's data

    def hang_up(self):
        """Ends the connection at once, whatever was (or was not) sent."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(2)
        except OSError:
            pass

    def stream(self, total, gzip, hold=None, first=0):
        """Streams `total` zero bytes (gzip-encoded if asked) until done or the client hangs up;
        with `hold`, writes `first` bytes, then waits for /held/<hold>/release (30 s at most)."""
        body = gzip_zeros(total) if gzip else None
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if gzip:
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body) if gzip else total))
        self.end_headers()
        try:
            if gzip:
                self.wfile.write(body)
            else:
                chunk = memoryview(bytes(65536))  # slices of a view copy nothing
                sent = 0
                if hold is not None:
                    self.wfile.write(bytes(min(first, total)))
                    self.wfile.flush()
                    sent = min(first, total)
                    held_event(hold).wait(30)
                while sent < total:
                    part = chunk[: min(len(chunk), total - sent)]
                    self.wfile.write(part)
                    sent += len(part)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped reading: that is the point

    def endless(self, key, kind, total):
        """Writes `total` bytes (1 GiB by default) until the client hangs up, and records in
        `endless_written[key]` how many the kernel accepted before the connection broke (or all of
        them); `/endless/written?key=` waits for that. `type=events`: a `text/event-stream` whose
        one line never ends (`data: xxx…`, no line break); `type=bytes`: octet-stream zeros under
        its Content-Length."""
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if kind == "events" else "application/octet-stream")
        if kind != "events":
            self.send_header("Content-Length", str(total))
        self.end_headers()
        events = kind == "events"
        chunk = memoryview(b"x" * 65536 if events else bytes(65536))  # slices of a view copy nothing
        written = 0
        try:
            if events:
                self.wfile.write(b"data: ")
                written = 6
            while written < total:
                part = chunk[: min(len(chunk), total - written)]
                self.wfile.write(part)
                written += len(part)
                with counters_lock:  # so far, for `/endless/written?wait=0`
                    endless_written[key] = written
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with counters_lock:
                endless_written[key] = written
            endless_event(key).set()

    # Header values no server should send, as raw bytes: a non-ASCII character inside an HTTP
    # date (this ended the process through Foundation's DateFormatter on Linux), a non-ASCII
    # value alone, invalid UTF-8, a no-break space after a date, Latin-1 text.
    HOSTILE_VALUES = [
        b"Sun\xdc\xb1, 06 Nov 1994 08:49:37 GMT",
        b"Sun\xdc\xb1",
        b"\xff\xfe\xc3(",
        b"Sun, 06 Nov 2094 08:49:37 GMT\xc2\xa0",
        b"\xe9t\xe9, 1",
    ]

    def hostile(self, header, variant):
        """`header` set to HOSTILE_VALUES[variant], written as raw bytes. Retry-After comes with
        a 503 (so a retry behavior reads it); the others with a cacheable 200."""
        value = self.HOSTILE_VALUES[variant % len(self.HOSTILE_VALUES)]
        status = b"503 Service Unavailable" if header == "Retry-After" else b"200 OK"
        body = b'{"ok":true}'
        head = b"HTTP/1.1 " + status + b"\r\n"
        if header != "Content-Type":
            head += b"Content-Type: application/json\r\n"
        head += b"Cache-Control: max-age=60\r\n" + header.encode() + b": " + value + b"\r\n"
        head += b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        self.wfile.write(head + (b"" if self.command == "HEAD" else body))

    def events(self, arg):
        """A text/event-stream of `count` numbered events (id and data are the number), resumed
        after the Last-Event-ID the client sends; once every event was sent, a 204 (stop).
        With `seed`, each connection sends a random 1-4 events and then drops, usually in the
        middle of the next event, in writes cut at random bytes, with CR, LF and CRLF line ends.
        With `token`, the request needs `Bearer <token>`, and from event `rotate_at` on
        `Bearer <token>2` (the old token then gets a 401: the client must refresh). `pad` adds
        that many bytes of text to each event's data (the benchmark's larger events). With
        `sticky`, like a load balancer's sticky session: every stream response sets the cookie
        `node=a`, and a reconnect (Last-Event-ID sent) without it gets a 409. With `interval`,
        each event is written on its own, `interval` seconds after the last (a stream that lasts
        longer than a client's per-attempt timeout while never idle); with `done`, a last event
        `data: [DONE]` follows. With `noids`, events carry no `id:` (an LLM's answer: it cannot be
        resumed); with `empty`, the response is `retry: 0` and a comment, then the end (a server
        that keeps closing). With `hold=<name>`, the first event is written and the rest waits for
        /held/<name>/release (60 s at most)."""
        if arg("empty"):
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b"retry: 0\n: nothing to say\n\n")
            return
        count = int(arg("count", "10"))
        seed = arg("seed")
        last = self.headers.get("Last-Event-ID") or ""
        start = int(last) + 1 if last.isdigit() else 1
        token = arg("token")
        if token is not None:
            rotate_at = int(arg("rotate_at", "0"))
            wanted = token + ("2" if rotate_at and start >= rotate_at else "")
            if self.headers.get("Authorization") != "Bearer " + wanted:
                self.send(401, {"ok": False}, headers=[("WWW-Authenticate", "Bearer")])
                return
        sticky = arg("sticky") is not None
        if sticky and last and "node=a" not in (self.headers.get("Cookie") or ""):
            self.send(409, {"ok": False})
            return
        if start > count:
            self.send(204)
            return
        rng = random.Random(f"{seed}:{start}") if seed else None
        end = count if rng is None else min(count, start + rng.randrange(0, 4))
        ending = [b"\n", b"\r", b"\r\n"]
        padding = b" " + b"x" * int(arg("pad", "0")) if arg("pad") else b""
        interval = float(arg("interval", "0"))
        plain = rng is None and not interval and not arg("done") and not arg("noids")
        cached = EVENT_BODIES.get((start, count, padding)) if plain else None
        parts = [cached] if cached else [b"retry: 0\n\n: numbered events\n"]
        for number in range(start, end + 1) if not cached else ():
            line_end = ending[rng.randrange(3)] if rng else b"\n"
            if arg("noids"):
                parts.append(b"data: %d%s%s%s" % (number, padding, line_end, line_end))
            else:
                parts.append(b"id: %d%sdata: %d%s%s%s" % (number, line_end, number, padding, line_end, line_end))
        if rng and end < count:  # the next event, cut anywhere before its blank line
            partial = b"id: %d\ndata: %d\n" % (end + 1, end + 1)
            parts.append(partial[: rng.randrange(len(partial))])
        if arg("done") and end == count:
            parts.append(b"data: [DONE]\n\n")
        hold = arg("hold")
        if interval or hold:
            self.close_connection = True
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for index, part in enumerate(parts):
                    self.wfile.write(part)
                    self.wfile.flush()
                    if hold and index == 1:
                        held_event(hold).wait(60)
                    time.sleep(interval)
            except (BrokenPipeError, ConnectionResetError):
                pass
            return
        body = b"".join(parts)
        if plain and len(EVENT_BODIES) < 8:  # the benchmark asks for the same body again
            EVENT_BODIES[(start, count, padding)] = body
        self.close_connection = True  # no length: the body ends when the connection does
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        if sticky:
            self.send_header("Set-Cookie", "node=a; Path=/")
        self.end_headers()
        try:
            while body:
                cut = rng.randrange(1, len(body) + 1) if rng else len(body)
                self.wfile.write(body[:cut])
                self.wfile.flush()
                body = body[cut:]
        except (BrokenPipeError, ConnectionResetError):
            pass

    def trickle(self, size, interval, head):
        """A cacheable 200 of `size` bytes, written one byte every `interval` seconds: the body
        only, or (`head`) the status line and headers too. Stops when the client hangs up."""
        self.close_connection = True
        response = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nCache-Control: max-age=60\r\n"
                    b"Connection: close\r\nContent-Length: " + str(size).encode() + b"\r\n\r\n")
        if not head:
            self.wfile.write(response)
            self.wfile.flush()
            response = b""
        response += b"x" * size
        try:
            for index in range(len(response)):
                self.wfile.write(response[index:index + 1])
                self.wfile.flush()
                time.sleep(interval)
        except (BrokenPipeError, ConnectionResetError):
            pass

    FRAMING = {
        "two-lengths": [b"Content-Length: 2", b"Content-Length: 9"],
        "same-lengths": [b"Content-Length: 2", b"Content-Length: 2"],
        "bare-cr": [b"X-Odd: a\rb", b"Content-Length: 2"],
        "nul": [b"X-Odd: a\x00b", b"Content-Length: 2"],
        "latin1": [b"X-Odd: \xe9t\xe9", b"Content-Length: 2"],
        "utf8": [b"X-Odd: \xdc\xb1 \xc3\xa9", b"Content-Length: 2"],
        "plain": [b"X-Odd: fine", b"Content-Length: 2"],
    }

    def framing(self, kind):
        """A 200 with body `ok` whose head is FRAMING[kind], as raw bytes; the connection closes."""
        self.close_connection = True
        lines = [b"HTTP/1.1 200 OK", b"Content-Type: text/plain", b"Connection: close"] + self.FRAMING[kind]
        self.wfile.write(b"\r\n".join(lines) + b"\r\n\r\n" + (b"" if self.command == "HEAD" else b"ok"))
        self.wfile.flush()

    def fault(self, kind):
        """Misbehaves on purpose; every branch ends the connection."""
        self.close_connection = True
        w = self.wfile
        if kind == "close":  # no response at all
            pass
        elif kind == "truncated":  # promises 1000 bytes, sends 10
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n[1,2,3,4,5")
        elif kind == "truncatedcookie":  # sets a cookie, promises 1000 bytes, sends 10
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nSet-Cookie: planted=1; Path=/\r\n"
                    b"Content-Length: 1000\r\n\r\n0123456789")
        elif kind == "midheaders":  # closes in the middle of the headers
            w.write(b"HTTP/1.1 200 OK\r\nContent-Ty")
        elif kind == "shortlength":  # Content-Length smaller than the body
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello, and more")
        elif kind == "garbage":  # not HTTP at all
            w.write(b"\x00\xffTHIS IS NOT HTTP\r\n\r\n")
        elif kind == "stall":  # reads the request, never answers (until the client gives up)
            time.sleep(120)
        w.flush()
        try:
            self.connection.shutdown(2)
        except OSError:
            pass

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = handle_any


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--spawner", action="store_true", help="fork a server for each 'start' read from stdin")
    args = parser.parse_args()
    if args.spawner:
        spawn_on_request()
        return
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print("PORT", server.server_address[1], flush=True)
    serve(server, lifeline=sys.stdin.buffer.fileno())


def serve(server, lifeline):
    """Serves until SIGTERM, or until `lifeline` reads end of file (whoever holds its other end,
    the test process, is gone), so a server never outlives the tests."""
    def exit_when_lifeline_closes():
        while os.read(lifeline, 4096):
            pass
        os._exit(0)

    threading.Thread(target=exit_when_lifeline_closes, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server.serve_forever()


def spawn_on_request():
    """The spawner (`--spawner`): the test suite keeps one and asks it for each server, because
    starting the interpreter and importing the modules above costs about 0.1 s of CPU, and a test
    run starts over a hundred servers; a fork of a process that has done it once costs almost
    nothing. Reads commands from stdin, one per line, in order:

        start      forks a server on a free port and prints "PORT <port> <pid>"
        stop <pid> kills that server and reaps it (prints nothing)
        sync       prints "SYNC" once every command before it is done

    Each server exits when stopped or once the spawner is gone: it holds the read end of a pipe
    whose write end only the spawner holds. The spawner exits when its stdin closes."""
    lifeline, keep = os.pipe()
    for line in sys.stdin:
        command = line.split()
        if command == ["start"]:
            server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            server.daemon_threads = True
            pid = os.fork()
            if pid == 0:  # the server: its own randomness, nothing of the spawner's but the lifeline
                os.close(keep)
                null = os.open(os.devnull, os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                random.seed()
                serve(server, lifeline)
                os._exit(0)
            server.server_close()
            print("PORT", server.server_address[1], pid, flush=True)
        elif len(command) == 2 and command[0] == "stop" and command[1].isdigit():
            try:
                # SIGKILL: a test process may start the spawner with SIGTERM blocked, and every
                # process it forks inherits the mask.
                os.kill(int(command[1]), signal.SIGKILL)
                os.waitpid(int(command[1]), 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        elif command == ["sync"]:
            print("SYNC", flush=True)


if __name__ == "__main__":
    main()
