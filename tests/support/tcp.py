"""TCP stand-ins for a database that refuses, hangs or never answers, on 127.0.0.1.

:class:`TcpProxy` sits in front of a real database server and can make it
refuse connections or hang; :class:`SilentListener` accepts connections
and never sends a byte (a server that hangs, or a host behind a proxy
that still accepts).
"""

from __future__ import annotations

import itertools
import socket
import threading


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target``; can refuse, hang and recover.

    ``refuse()`` closes the port and every connection (clients get
    "connection refused"); ``hang()`` keeps everything open but stops
    passing bytes either way (clients wait); ``restore()`` goes back to
    forwarding.  :attr:`client_sends` counts what clients sent (one per
    request message on a quiet loopback); :attr:`round_trips` counts the
    times a client sent something after the server last spoke on that
    connection: what the client waited for, however its bytes were split
    or pipelined.
    """

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._forwarding = threading.Event()
        self._forwarding.set()
        self._lock = threading.Lock()
        self._connections: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._sends = itertools.count()
        self.client_sends = 0
        self.round_trips = 0
        self.port = 0
        self._listen()

    def _listen(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._connections += [client, upstream]
            # Who spoke last on this connection: a client that speaks after the server starts a round trip.
            last = {"client": False}
            threading.Thread(target=self._pump, args=(client, upstream, last, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, last), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, last: dict[str, bool],
              from_client: bool = False) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if from_client:
                    self.client_sends = next(self._sends) + 1
                    with self._lock:
                        if not last["client"]:
                            self.round_trips += 1
                        last["client"] = True
                else:
                    with self._lock:
                        last["client"] = False
                self._forwarding.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _drop_connections(self) -> None:
        with self._lock:
            connections, self._connections = self._connections, []
        for sock in connections:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def refuse(self) -> None:
        if self._listener is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone
            # would leave the port listening until it returns.
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        self._drop_connections()

    def hang(self) -> None:
        self._forwarding.clear()

    def restore(self) -> None:
        if self._listener is None:
            self._listen()
        if not self._forwarding.is_set():
            # Connections that were hanging are dropped; new ones flow again.
            self._drop_connections()
            self._forwarding.set()

    def close(self) -> None:
        self.refuse()
        self._forwarding.set()


class SilentListener:
    """Accepts connections on 127.0.0.1 and holds them, never sending a byte."""

    def __init__(self) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, name="silent-listener", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _address = self._server.accept()
            except OSError:
                return
            self._held.append(conn)

    def close(self) -> None:
        try:
            # Wakes the thread blocked in accept().
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        for conn in self._held:
            conn.close()

    def __enter__(self) -> SilentListener:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
