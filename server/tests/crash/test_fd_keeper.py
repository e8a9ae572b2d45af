"""The stand-in service manager (server/tests/support/fd_keeper.py) reads
every datagram as untrusted: a malformed one, or one from a process other
than the service's, is dropped and every descriptor it carried is closed;
a well-formed one is stored and removed as systemd would."""
import array
import os
import socket
import sys

import pytest

from kept_server import KeptServer

SLEEPER = [sys.executable, "-c", "import time; time.sleep(300)"]
PROBE = "fdk-probe-"

MALFORMED = [
    (b"FDNAME=x", "descriptors without FDSTORE=1"),
    (b"FDSTORE=1\nFDNAME=a:b", "an invalid FDNAME"),
    (b"FDSTORE=1\nFDNAME=a\x01b", "an invalid FDNAME"),
    (b"FDSTORE=1\nFDNAME=" + b"n" * 256, "an invalid FDNAME"),
    (b"FDSTORE=1\nFDNAME=a\0b", "a NUL byte in the text"),
    (b"\xff\xfeFDSTORE=1", "not UTF-8 text"),
    (b"FDSTORE=1\nFDNAME=big\nX=" + b"x" * 5000, "cut short"),
]


@pytest.fixture
def keeper():
    """Factory: keeper(*keeper_args) -> a keeper running a sleeper, its
    notify socket's path in .path; stopped afterwards."""
    started = []

    def start(*keeper_args):
        k = KeptServer(keeper_args=keeper_args, command=SLEEPER)
        started.append(k)
        _, m = k.wait_line(r"notify socket (\S+)")
        k.path = m.group(1)
        k.wait_line(r"started pid \d+")
        return k

    yield start
    for k in started:
        k.stop()


def probes_held(k):
    """The names of our probe memfds the keeper holds open."""
    held = []
    folder = f"/proc/{k.proc.pid}/fd"
    for fd in os.listdir(folder):
        try:
            target = os.readlink(os.path.join(folder, fd))
        except FileNotFoundError:
            continue
        if target.startswith("/memfd:" + PROBE):
            held.append(target[len("/memfd:"):].split(" ")[0])
    return sorted(held)


def send(path, data, name):
    """data to the notify socket with one memfd named PROBE + name."""
    fd = os.memfd_create(PROBE + name)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))], 0, path)
    finally:
        os.close(fd)


def test_malformed_datagrams_are_dropped_and_leak_no_descriptor(keeper):
    k = keeper("--notify-access", "all")
    start = len(k.lines["err"])
    for i, (data, why) in enumerate(MALFORMED):
        send(k.path, data, f"bad{i}")
        start, _ = k.wait_line(rf"dropped a message: {why}.*; 1 descriptor\(s\) closed", start=start)
        start += 1
    assert probes_held(k) == []
    send(k.path, b"FDSTORE=1\nFDNAME=good", "good")
    k.wait_line(r"stored good \(1 held\)")
    assert probes_held(k) == [PROBE + "good"]
    send(k.path, b"FDSTORE=1\nFDNAME=again", "good")  # another file, same name: both kept
    k.wait_line(r"stored again \(2 held\)")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.sendto(b"FDSTOREREMOVE=1\nFDNAME=good", k.path)
    k.wait_line(r"removed good \(1 held\)")
    assert probes_held(k) == [PROBE + "good"]  # the one named "again"


def test_a_message_from_another_process_is_dropped(keeper):
    """NotifyAccess=main, as systemd's default for Type=notify: only the
    service's own process may store."""
    k = keeper()
    send(k.path, b"FDSTORE=1\nFDNAME=intruder", "intruder")
    k.wait_line(rf"dropped a message: from pid {os.getpid()}, not the service's; 1 descriptor\(s\) closed")
    assert probes_held(k) == []


def test_past_the_store_limit_the_rest_is_closed(keeper):
    """--fd-store-max, as systemd's FileDescriptorStoreMax: what passes it is closed."""
    k = keeper("--notify-access", "all", "--fd-store-max", "1")
    send(k.path, b"FDSTORE=1\nFDNAME=first", "first")
    k.wait_line(r"stored first \(1 held\)")
    send(k.path, b"FDSTORE=1\nFDNAME=second", "second")
    k.wait_line(r"cannot store more than --fd-store-max=1 descriptors, closed 1")
    assert probes_held(k) == [PROBE + "first"]
