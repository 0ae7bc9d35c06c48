"""The Raft port and the REST port of real peers (raft/transport.py, rest/connlimit.py):
a raw TCP client that sends a pickle which would run a command gets its connection
dropped, the command never runs, and the peer stays in the cluster; so does one that
announces a huge frame; inbound Raft connections past raft.max-connections are closed
and idle ones go after the connection timeout while the cluster keeps committing;
REST connections past rest.max-connections get a 503 naming the key."""
import asyncio
import os
import pickle
import struct
import zlib

import pytest

from raft.commands import Barrier
from tests.conftest import running
from tests.helpers import ahttp, apoll


class _Evil:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def _frame(message, protocol: int = 2) -> bytes:
    data = zlib.compress(pickle.dumps(message, protocol), 3)
    return struct.pack("i", len(data)) + data


def _raft_port(cluster, i: int) -> int:
    return int(cluster.lines[i].split(":")[2])


def _claim(cluster) -> tuple[int, str, str]:
    """(port of a member, the address of a member that connects to it, the address of one
    it connects to itself): members connect one way, the greater address to the smaller."""
    addrs = sorted((m.raft_addr, int(m.raft_addr.rsplit(":", 1)[1]))
                   for m in cluster.masters())
    return addrs[1][1], addrs[2][0], addrs[0][0]


async def _closed_by_peer(reader, timeout: float = 10.0) -> bool:
    """True once the peer closed the connection (EOF or reset) within `timeout`."""
    try:
        while True:
            data = await asyncio.wait_for(reader.read(4096), timeout)
            if not data:
                return True
    except asyncio.TimeoutError:  # (before OSError: TimeoutError is one)
        return False
    except (ConnectionError, OSError):
        return True


async def _commits(cluster) -> None:
    """Every peer commits a write through Raft, and all agree on one leader."""
    for p in cluster.peers:
        res = await p.parts.raft.submit(Barrier(), 10.0)
        assert res.ok
    leaders = {p.parts.raft.leader() for p in cluster.peers}
    assert len(leaders) == 1 and None not in leaders, leaders


@pytest.mark.parametrize("settings", [{}, {"raft.password": "s3cret"}],
                         ids=["no-password", "password"])
async def test_a_pickle_that_would_run_code_is_refused(tmp_path, settings):
    async with running(str(tmp_path / "c"), settings=settings) as c:
        leader_before = c.peers[0].parts.raft.leader()
        marks = []
        for i in range(len(c.peers)):  # the leader and the followers
            port = _raft_port(c, i)
            mark = tmp_path / f"pwned-{i}"
            marks.append(mark)
            for protocol in (2, 4):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(_frame(_Evil(str(mark)), protocol))
                await writer.drain()
                assert await _closed_by_peer(reader), "the connection was not dropped"
                writer.close()
            # a pysyncobj utility command (it would remove a member)
            other = c.masters()[(i + 1) % len(c.peers)].raft_addr
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_frame(["remove", other]))
            await writer.drain()
            assert await _closed_by_peer(reader)
            writer.close()
        await _commits(c)
        assert not [m for m in marks if m.exists()], "the payload ran"
        assert all(len(p.parts.raft.membership.members()) == 3 for p in c.peers)
        assert c.peers[0].parts.raft.leader() == leader_before  # nobody lost a beat


async def test_a_client_claiming_to_be_a_member_cannot_run_code_either(tmp_path):
    """Without raft.password anyone may claim to be a member (and so disturb the
    cluster for a moment: the real member's connection is replaced), but what it sends
    is still read by the restricted unpickler."""
    async with running(str(tmp_path / "c")) as c:
        mark = tmp_path / "pwned"
        port, other, wrong_way = _claim(c)
        evil = _frame({"type": "append_entries", "term": 10 ** 6, "commit_index": 0,
                       "entries": [_Evil(str(mark))]})
        # the second claim is to be a member that never connects this way: refused at once
        for claim in (other, wrong_way):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(_frame(claim) + evil)
            await writer.drain()
            assert await _closed_by_peer(reader), "the connection was not dropped"
            writer.close()
            await apoll(lambda: _commits_ok(c), 30, what="the cluster commits again")
        assert not mark.exists(), "the payload ran"
        assert all(len(p.parts.raft.membership.members()) == 3 for p in c.peers)


async def _commits_ok(cluster) -> bool:
    try:
        await _commits(cluster)
    except Exception:
        return False
    return True


async def test_a_huge_frame_is_refused_before_it_is_read(tmp_path):
    async with running(str(tmp_path / "c")) as c:
        port, other, _ = _claim(c)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack("i", 2 ** 31 - 1) + b"\x00" * 1000)
        await writer.drain()
        assert await _closed_by_peer(reader, 5.0)
        writer.close()
        # also a member's frame past raft.max-message-size: dropped
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(_frame(other) + struct.pack("i", 300 * 1024 * 1024) + b"\x00" * 1000)
        await writer.drain()
        assert await _closed_by_peer(reader, 5.0)
        writer.close()
        # (the claim replaced member 0's connection for a moment: see the test above)
        await apoll(lambda: _commits_ok(c), 30, what="the cluster commits again")


async def test_inbound_raft_connections_are_capped_and_idle_ones_closed(tmp_path):
    cap = 6
    async with running(str(tmp_path / "c"), settings={"raft.max-connections": cap}) as c:
        port = _raft_port(c, 0)
        conns = []
        for _ in range(3 * cap):
            conns.append(await asyncio.open_connection("127.0.0.1", port))
            await asyncio.sleep(0.02)

        async def open_count() -> int:
            n = 0
            for reader, _ in conns:
                if reader.at_eof():
                    continue
                try:
                    await asyncio.wait_for(reader.read(1), 0.01)
                except asyncio.TimeoutError:
                    n += 1
                except (ConnectionError, OSError):
                    pass
            return n
        # the peer holds at most `cap` inbound connections (members' included)
        await apoll(lambda: _le(open_count(), cap), 10, what=f"at most {cap} held open")
        await _commits(c)  # the members' own connections were not the ones closed
        # the rest never said which member they are: closed after the connection timeout
        await apoll(lambda: _le(open_count(), 0), 15, what="idle connections closed")
        for _, w in conns:
            w.close()
        await _commits(c)


async def _le(coro, n: int) -> bool:
    return (await coro) <= n


async def test_rest_connections_past_the_limit_get_503(tmp_path):
    limit = 5
    async with running(str(tmp_path / "c"), n=1,
                       settings={"rest.max-connections": limit}) as c:
        url = c.urls[0]
        port = int(url.rsplit(":", 1)[1])
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(limit)]
        await apoll(lambda: len(c.peers[0].runner.server.connections) >= limit, 10,
                    what="connections registered")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
        assert b"rest.max-connections" in answer and b'"errors"' in answer
        for _, w in held:
            w.close()
        await apoll(lambda: len(c.peers[0].runner.server.connections) < limit, 10,
                    what="held connections gone")
        status, body = await ahttp("GET", url + "/healthz")
        assert status == 200, body


async def test_idle_and_slow_rest_connections_are_closed(tmp_path):
    """rest.keepalive-timeout: a connection that sends nothing, one that sends its
    headers a byte at a time and one idle after an answer are closed once it has passed
    (aiohttp's default kept them an hour: 1,000 idle sockets locked REST out)."""
    async with running(str(tmp_path / "c"), n=1,
                       settings={"rest.keepalive-timeout": "1 s"}) as c:
        port = int(c.urls[0].rsplit(":", 1)[1])
        loop = asyncio.get_running_loop()
        silent = await asyncio.open_connection("127.0.0.1", port)
        slow = await asyncio.open_connection("127.0.0.1", port)
        used = await asyncio.open_connection("127.0.0.1", port)
        used[1].write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        await used[1].drain()
        assert (await asyncio.wait_for(used[0].readuntil(b"\r\n\r\n"), 10)).startswith(
            b"HTTP/1.1 200")
        t0 = loop.time()
        closed_at = {}

        async def dribble():
            for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\n":
                if slow[0].at_eof():
                    return
                slow[1].write(bytes([byte]))
                await asyncio.sleep(0.2)

        async def until_closed(name, reader):
            while await reader.read(4096):  # (the rest of an answer, if any)
                pass
            closed_at[name] = loop.time() - t0
        task = asyncio.create_task(dribble())
        await asyncio.wait_for(asyncio.gather(until_closed("silent", silent[0]),
                                              until_closed("slow", slow[0]),
                                              until_closed("used", used[0])), 20)
        task.cancel()
        assert set(closed_at) == {"silent", "slow", "used"}
        assert closed_at["slow"] < 0.2 * 36, closed_at  # before its headers were whole
        for _, w in (silent, slow, used):
            w.close()
        status, body = await ahttp("GET", c.urls[0] + "/healthz")
        assert status == 200, body


class _FailingAccept:
    """A listening socket whose accept() fails with `code` the first `times` calls."""

    def __init__(self, sock, code: int, times: int) -> None:
        self.sock, self.code, self.left, self.accepted = sock, code, times, 0

    def accept(self):
        if self.left > 0:
            self.left -= 1
            raise OSError(self.code, os.strerror(self.code))
        conn = self.sock.accept()
        self.accepted += 1
        return conn

    def __getattr__(self, name):
        return getattr(self.sock, name)


@pytest.mark.parametrize("fsync", [True, False])
async def test_the_raft_listener_survives_emfile(tmp_path, fsync, caplog):
    """accept() failing for want of descriptors pauses the listener, never closes it
    (pysyncobj closed it for good: the member never took a Raft connection again). The
    process-level test with a real RLIMIT_NOFILE: tests/e2e/test_wire_limits.py."""
    import errno

    from raft.door import transport_of
    from raft.node import RaftHost, RaftSettings
    from tests.helpers import free_ports
    port = free_ports(1)[0]
    addr = f"127.0.0.1:{port}"
    host = RaftHost(addr, [], str(tmp_path / "r"), RaftSettings(fsync=fsync),
                    asyncio.get_running_loop(), {addr: "p0"})
    try:
        await apoll(lambda: host.leader() == "p0", 20, what="single-node leader")
        server = transport_of(host.syncobj)._server
        failing = _FailingAccept(server.listening, errno.EMFILE, 5)
        server.listening = failing
        conns = []
        for _ in range(3):  # each waits in the backlog until accept() works again
            conns.append(await asyncio.open_connection("127.0.0.1", port))
        await apoll(lambda: failing.accepted >= 3, 20, what="the connections accepted")
        assert failing.left == 0
        assert "Raft listener: accept() failed" in caplog.text
        for _, w in conns:
            w.close()
        res = await host.submit(Barrier(), 5.0)
        assert res.ok
    finally:
        await asyncio.to_thread(host.destroy)


async def test_one_address_cannot_take_the_connections_kept_for_others_and_peers(tmp_path):
    """rest.max-connections-per-source, and the share only the cluster's peers may use,
    on a real aiohttp server: past its own cap a source gets the 503 naming the key while
    a peer still connects, and admitted connections are served as usual."""
    from aiohttp import web
    from rest.connlimit import limit_connections, peer_reserve
    from tests.helpers import free_ports

    async def ok(request):
        return web.json_response({"ok": True})
    app = web.Application()
    app.router.add_get("/", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    peers = {"now": False}  # (every test address is 127.0.0.1: whether it is a peer's)
    limit_connections(runner, 20, 4, lambda address: peers["now"])
    port = free_ports(1)[0]
    await web.TCPSite(runner, "127.0.0.1", port).start()

    async def ask():
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        return answer
    try:
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
        await apoll(lambda: len(runner.server.connections) >= 4, 10, what="4 connections")
        answer = await ask()
        assert answer.startswith(b"HTTP/1.1 503") and b"rest.max-connections-per-source" \
            in answer and b'"errors"' in answer, answer[:300]
        peers["now"] = True  # a peer is not held to it, up to the whole limit
        held += [await asyncio.open_connection("127.0.0.1", port) for _ in range(15)]
        await apoll(lambda: len(runner.server.connections) >= 19, 10, what="19 connections")
        assert (await ask()).startswith(b"HTTP/1.1 200")
        peers["now"] = False
        assert peer_reserve(20) == 8
        for _, w in held[4:]:
            w.close()
        await apoll(lambda: len(runner.server.connections) <= 4, 10, what="peers' gone")
        held[0][1].close()
        await apoll(lambda: len(runner.server.connections) <= 3, 10, what="one fewer")
        assert (await ask()).startswith(b"HTTP/1.1 200")  # under its cap again
    finally:
        for _, w in held:
            w.close()
        await runner.cleanup()
