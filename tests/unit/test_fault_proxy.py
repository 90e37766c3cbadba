"""ctas_devstack/fault_proxy.py: the service applies the request whose answer the proxy loses, the
loss is one-shot and only for the request it names, a refusing proxy lets nothing through, one
that is down looks killed to its clients (connections reset, connecting refused) until it is up again,
and each Thrift call is timed from its forwarding to its answer."""

from __future__ import annotations

import http.client
import socket
import struct
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from ctas_devstack.fault_proxy import FaultProxy


class _Service(BaseHTTPRequestHandler):
    applied: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.applied.append(f"{self.path} {body.decode()}")
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    _Service.applied = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proxy = FaultProxy(("127.0.0.1", server.server_address[1])).start()
    yield proxy
    proxy.stop()
    server.shutdown()


def _post(proxy: FaultProxy, path: str, body: str, connection: http.client.HTTPConnection | None = None) -> str:
    connection = connection or http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    connection.request("POST", path, body=body)
    response = connection.getresponse()
    return f"{response.status} {response.read().decode()}"


def test_a_lost_answer_is_applied_by_the_service_and_closes_the_connection(proxy):
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    assert _post(proxy, "/tables/t/metrics", "m", connection) == "200 ok", "the keep-alive connection works"
    proxy.lose_answer(r"^POST /tables/t HTTP")
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _post(proxy, "/tables/t", "commit", connection)
    assert _Service.applied == ["/tables/t/metrics m", "/tables/t commit"], "the service applied it"
    assert proxy.lost == ["POST /tables/t HTTP/1.1"]
    assert _post(proxy, "/tables/t", "again") == "200 ok", "one-shot"


def test_a_gateway_503_replaces_the_answer_of_an_applied_request(proxy):
    proxy.lose_answer(r"^POST /tables/t HTTP", mode="503")
    assert _post(proxy, "/tables/other", "x") == "200 ok", "another request is not the armed one"
    assert _post(proxy, "/tables/t", "commit") == "503 "
    assert _Service.applied == ["/tables/other x", "/tables/t commit"]


def test_a_refusing_proxy_lets_no_request_through(proxy):
    proxy.refuse()
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _post(proxy, "/tables/t", "x")
    proxy.refuse(False)
    assert _post(proxy, "/tables/t", "y") == "200 ok"
    assert _Service.applied == ["/tables/t y"] and proxy.refused == 1


def test_a_throttling_store_answers_the_next_requests_503_unforwarded_then_recovers(proxy):
    proxy.throttle(2)
    assert [_post(proxy, "/b/k", str(n)) for n in range(3)] == ["503 ", "503 ", "200 ok"]
    assert _Service.applied == ["/b/k 2"], "the throttled requests never reached the store"
    assert proxy.unavailable_answers == 2


def test_only_the_known_loss_modes_are_accepted(proxy):
    with pytest.raises(ValueError, match="mode must be one of"):
        proxy.lose_answer("^POST", mode="drop")


def _thrift_call(name: str, payload: bytes = b"\x0b\x00\x01\x00\x00\x00\x02db\x00") -> bytes:
    return b"\x80\x01\x00\x01" + struct.pack(">i", len(name)) + name.encode() + struct.pack(">i", 7) + payload


def test_thrift_calls_are_counted_by_method_and_http_requests_are_not(proxy):
    """Two calls in one send (a batch) and one split over two sends, as a client's buffer may."""
    seen: list[str] = []
    proxy.on_call = seen.append
    _post(proxy, "/tables/t", "x")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(_thrift_call("get_table") + _thrift_call("alter_table_with_environment_context"))
        call = _thrift_call("get_table")
        sock.sendall(call[:9])
        time.sleep(0.2)
        sock.sendall(call[9:])
        time.sleep(0.2)
    assert proxy.calls == {"get_table": 1, "alter_table_with_environment_context": 1}, (
        "a header split across sends is not seen: the metastore client sends each call in one flush"
    )
    assert seen == ["get_table", "alter_table_with_environment_context"], "each call reported as forwarded"


def test_a_proxy_that_is_down_resets_open_connections_refuses_new_ones_and_comes_back_on_its_port(proxy):
    """As a killed and restarted service looks to its clients; the service's state is kept."""
    held = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=10)
    assert _post(proxy, "/b/k", "1", held) == "200 ok"
    port = proxy.port
    proxy.down()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
        _post(proxy, "/b/k", "2", held)  # the keep-alive connection was reset
    proxy.down(False)
    assert proxy.port == port
    assert _post(proxy, "/b/k", "3") == "200 ok"
    assert _Service.applied == ["/b/k 1", "/b/k 3"]


def test_each_thrift_call_is_counted_with_the_time_its_service_took_to_answer() -> None:
    """What the metastore-calls report attributes to the service: from a call's forwarding to its answer."""
    listener = socket.create_server(("127.0.0.1", 0))
    delays = {b"get_table": 0.05, b"alter_partitions": 0.4}

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            while request := connection.recv(65536):
                name = request[8 : 8 + request[7]]
                time.sleep(delays[name])
                connection.sendall(b"\x80\x01\x00\x02" + request[4:] + b"answer")

    threading.Thread(target=serve, daemon=True).start()
    proxy = FaultProxy(listener.getsockname()).start()
    try:
        with socket.create_connection(("127.0.0.1", proxy.port)) as client:
            for name in (b"get_table", b"alter_partitions", b"get_table"):
                client.sendall(b"\x80\x01\x00\x01\x00\x00\x00" + bytes([len(name)]) + name + b"\x00\x00\x00\x01")
                assert client.recv(65536).endswith(b"answer")
    finally:
        proxy.stop()
        listener.close()
    assert proxy.calls == {"get_table": 2, "alter_partitions": 1}
    assert proxy.call_seconds["alter_partitions"] >= 0.4
    assert 0.1 <= proxy.call_seconds["get_table"] < proxy.call_seconds["alter_partitions"]
