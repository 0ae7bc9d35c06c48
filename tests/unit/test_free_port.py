"""jm.runtime.sparkjvm.free_port: a port for a server started a moment later comes
from below the kernel's ephemeral range, where no bind(0) or outgoing connection of
another process (another Spark's driver) can take it meanwhile."""
import random
import socket

from jm.runtime.sparkjvm import LOWEST_PORT, ephemeral_start, free_port


def _ephemeral() -> int:
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        return ephemeral_start(f.read())


def test_the_port_is_below_the_ephemeral_range_and_free():
    start = _ephemeral()
    for seed in range(20):
        port = free_port(rnd=random.Random(seed))
        assert LOWEST_PORT <= port < start
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # free


def test_a_taken_port_is_skipped():
    start = _ephemeral()
    first = free_port(rnd=random.Random(7))
    with socket.socket() as held:
        held.bind(("127.0.0.1", first))
        held.listen()
        again = free_port(rnd=random.Random(7))  # the same draw first: taken, so the next
        assert again != first and LOWEST_PORT <= again < start


def test_the_range_is_read_as_the_kernel_writes_it():
    assert ephemeral_start("32768\t60999\n") == 32768
