"""jm.runtime.ports: a port for a server started a moment later comes from outside the
kernel's ephemeral range, where no bind(0) or outgoing connection of another process
(another peer's Raft client, a Spark driver) can take it meanwhile."""
import random
import socket

import pytest

from jm.runtime.ports import (HIGHEST_PORT, LOWEST_PORT, ephemeral_range, free_port,
                              free_ports, parse_range, spans)


def _outside(port: int) -> bool:
    low, high = ephemeral_range()
    return LOWEST_PORT <= port < low or high < port <= HIGHEST_PORT


def test_the_ports_are_outside_the_ephemeral_range_distinct_and_free():
    for seed in range(20):
        ports = free_ports(4, rnd=random.Random(seed))
        assert len(set(ports)) == 4 and all(map(_outside, ports)), ports
        for port in ports:
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))  # free


def test_a_taken_port_is_skipped():
    first = free_port(rnd=random.Random(7))
    with socket.socket() as held:
        held.bind(("127.0.0.1", first))
        held.listen()
        again = free_port(rnd=random.Random(7))  # the same draw first: taken, so the next
        assert again != first and _outside(again)


def test_the_range_is_read_as_the_kernel_writes_it():
    assert parse_range("32768\t60999\n") == (32768, 60999)


@pytest.mark.parametrize("low, high, want", [
    (32768, 60999, [(LOWEST_PORT, 32768), (61000, 65536)]),
    (1024, 65535, []),                      # no room outside: the kernel's choice
    (10010, 65000, [(65001, 65536)]),       # too little below
])
def test_the_runs_outside_the_range(low, high, want):
    assert spans(low, high, room=20) == want
