#!/usr/bin/env python3
"""A stand-in for the weather API forecast-service calls, for trying the service by hand:
`python3 upstream.py 9090`. POST /token exchanges client credentials (any id, the secret in
$UPSTREAM_CLIENT_SECRET or "dev-secret") for a bearer token; GET /weather/<city> needs it and
answers with the weather (a 503 with Retry-After: 1 once in a while, never twice in a row for
a city, so the retry shows and succeeds);
GET /saved answers a user's saved cities to the user's own token (`Bearer user-<name>-...`),
`private, max-age=30`; GET /calls/<city> says how many weather answers it gave for the city, and
GET /calls/saved-<name> how many saved-cities answers for the user (smoke.sh reads them)."""
import json
import os
import random
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ.get("UPSTREAM_CLIENT_SECRET", "dev-secret")
TOKENS = set()
CALLS = {}
JUST_REFUSED = set()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def reply(self, status, body=None, headers=()):
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/token":
            return self.reply(404)
        try:
            credentials = json.loads(body)
        except ValueError:
            return self.reply(400)
        if credentials.get("clientSecret") != SECRET:
            return self.reply(401)
        token = uuid.uuid4().hex
        TOKENS.add(token)
        self.reply(200, {"access_token": token})

    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "calls":
            return self.reply(200, {"calls": CALLS.get(parts[1], 0)})
        if parts == ["saved"]:
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer user-"):
                return self.reply(401, headers=[("WWW-Authenticate", "Bearer")])
            user = auth[len("Bearer user-"):].split("-")[0]
            CALLS["saved-" + user] = CALLS.get("saved-" + user, 0) + 1
            return self.reply(200, {"user": user, "cities": [user + "ville", "paris"]},
                              headers=[("Cache-Control", "private, max-age=30")])
        if len(parts) != 2 or parts[0] != "weather":
            return self.reply(404)
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in TOKENS:
            return self.reply(401, headers=[("WWW-Authenticate", "Bearer")])
        city = parts[1]
        # Once in a while a 503 (so the retry shows), never twice in a row for a city: a request
        # that retries it is answered.
        if city not in JUST_REFUSED and random.random() < 0.2:
            JUST_REFUSED.add(city)
            return self.reply(503, headers=[("Retry-After", "1")])
        JUST_REFUSED.discard(city)
        CALLS[city] = CALLS.get(city, 0) + 1
        self.reply(200, {"city": city.capitalize(), "temperature": round(random.uniform(-5, 30), 1),
                         "summary": random.choice(["sunny", "cloudy", "rain", "fog"])},
                   headers=[("Cache-Control", "public, max-age=30")])


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 9090
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
