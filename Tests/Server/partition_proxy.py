#!/usr/bin/env python3
"""A TCP proxy that can be cut like a network partition, for the shared-cache partition tests
(Python standard library only).

    partition_proxy.py TARGET_HOST TARGET_PORT

Listens on 127.0.0.1 on a free port and prints "PORT <n>" as its first line of stdout; forwards
every connection to TARGET_HOST:TARGET_PORT (which must be in 127.0.0.0/8). Commands, one a line
on stdin, each answered by one line on stdout once it is in force:

    partition   -> "PARTITIONED": no byte goes through any more, in either direction, on the
                   connections open now and on new ones (accepted, never connected onward). No
                   socket is closed or reset: the peers hear nothing, as across a network
                   partition or from a host gone without a word.
    heal        -> "HEALED": new connections are forwarded again; the ones cut stay dead (and
                   open).
    count       -> "CONNECTIONS <accepted> <cut>": connections accepted so far, and cut.

The proxy exits when its stdin closes.
"""
import ipaddress
import socket
import sys
import threading


class Proxy:
    def __init__(self, target):
        self.target = target
        self.lock = threading.Lock()
        self.partitioned = False
        # Every socket ever opened, kept so that none is closed (a socket object closes when it
        # is garbage-collected); the process's exit closes them all.
        self.sockets = []
        # The pairs forwarding now: a partition cuts them all.
        self.live = []
        self.accepted = 0
        self.cut = 0
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.sockets.append(self.listener)

    def serve(self):
        while True:
            client, _ = self.listener.accept()
            with self.lock:
                self.sockets.append(client)
                self.accepted += 1
                if self.partitioned:
                    self.cut += 1
                    continue  # a black hole: accepted, never read, never answered
            threading.Thread(target=self.connect, args=(client,), daemon=True).start()

    def connect(self, client):
        upstream = socket.create_connection(self.target)
        pair = {"client": client, "upstream": upstream, "cut": False}
        with self.lock:
            self.sockets.append(upstream)
            if self.partitioned:
                self.cut += 1
                return
            self.live.append(pair)
        threading.Thread(target=self.pump, args=(pair, client, upstream), daemon=True).start()
        threading.Thread(target=self.pump, args=(pair, upstream, client), daemon=True).start()

    def pump(self, pair, source, destination):
        """Copies source to destination until the pair is cut or the source ends; after a cut,
        what arrives is read and dropped (it never reaches the other side). An ending source is
        not passed on either once cut: the other side keeps its connection, hearing nothing."""
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                return
            with self.lock:
                cut = pair["cut"]
            if not data:
                if not cut:
                    try:
                        destination.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    with self.lock:
                        if pair in self.live:
                            self.live.remove(pair)
                return
            if cut:
                continue
            try:
                destination.sendall(data)
            except OSError:
                return

    def partition(self):
        with self.lock:
            self.partitioned = True
            for pair in self.live:
                pair["cut"] = True
                self.cut += 1
            self.live = []

    def heal(self):
        with self.lock:
            self.partitioned = False


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    if not ipaddress.ip_address(socket.gethostbyname(host)) in ipaddress.ip_network("127.0.0.0/8"):
        sys.exit(f"partition_proxy.py: only 127.0.0.0/8 is reached, not {host}")
    proxy = Proxy((host, port))
    threading.Thread(target=proxy.serve, daemon=True).start()
    print(f"PORT {proxy.listener.getsockname()[1]}", flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "partition":
            proxy.partition()
            print("PARTITIONED", flush=True)
        elif command == "heal":
            proxy.heal()
            print("HEALED", flush=True)
        elif command == "count":
            with proxy.lock:
                print(f"CONNECTIONS {proxy.accepted} {proxy.cut}", flush=True)
        elif command:
            print(f"UNKNOWN {command}", flush=True)


if __name__ == "__main__":
    main()
