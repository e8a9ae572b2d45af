"""Crash survival: under a service manager the server keeps its regions in
the manager's fd store, and when it is killed the manager starts it again
with them (server/src/service/). The manager here is
server/tests/support/fd_keeper.py, which speaks systemd's notify protocol,
so that no test needs PID 1 to be systemd."""
import os
import signal
import struct
import time

import pytest

from kept_server import KeptServer, NOT_BUILT
from server_process import leftover_report
from uds_client import IN0, IN1, N, NBYTES, REGION_BYTES, filled_region, infer_body, load_memfd_client
from uds_fixtures import sock_path  # noqa: F401 (a fixture)

mc = load_memfd_client()
SAVED = r"crash survival: state \d+ stored: \d+ descriptor\(s\); (\d+) region\(s\) listed"


@pytest.fixture
def kept():
    """Factory: kept(*server_args, keeper_args=...) -> KeptServer, stopped
    with SIGTERM afterwards and checked: the server's exit 0 and nothing left
    mapped or open, the keeper's store empty."""
    started = []

    def start(*args, keeper_args=()):
        k = KeptServer(*args, keeper_args=keeper_args)
        started.append(k)
        return k

    yield start
    for k in started:
        rc = k.stop()
        err = k.text()
        assert rc == 0, f"keeper exited {rc}:\n{err}"
        assert leftover_report(err) == (0, 0), err
        assert err.rstrip().endswith("0 descriptor(s) stored"), err


def shm_region(shm_key, suffix):
    """(key, mmap) of a /dev/shm object laid out as uds_client's memfd is."""
    import mmap
    key = shm_key(suffix)
    fd = os.open("/dev/shm" + key, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    os.ftruncate(fd, REGION_BYTES)
    buf = mmap.mmap(fd, REGION_BYTES)
    os.close(fd)
    buf[0:NBYTES] = struct.pack(f"{N}i", *IN0)
    buf[NBYTES:2 * NBYTES] = struct.pack(f"{N}i", *IN1)
    return key, buf


def register_shm(k, name, key):
    body = {"key": key, "offset": 0, "byte_size": REGION_BYTES}
    code, answer = k.json("POST", f"/v2/systemsharedmemory/region/{name}/register", body)
    assert code == 200, answer


def region_names(k):
    code, regions = k.json("GET", "/v2/systemsharedmemory/status")
    assert code == 200, regions
    return sorted(r["name"] for r in regions)


def assert_outputs_in(buf):
    buf[2 * NBYTES:4 * NBYTES] = bytes(2 * NBYTES)
    sums = struct.unpack(f"{N}i", buf[2 * NBYTES:3 * NBYTES])
    assert sums == (0,) * N
    return lambda: (struct.unpack(f"{N}i", buf[2 * NBYTES:3 * NBYTES]),
                    struct.unpack(f"{N}i", buf[3 * NBYTES:4 * NBYTES]))


def infer_into(k, name, buf):
    """simple over HTTP with inputs and outputs in region name (buf its
    bytes here): the outputs must appear in buf."""
    read = assert_outputs_in(buf)
    code, answer = k.json("POST", "/v2/models/simple/infer", infer_body(name))
    assert code == 200, answer
    assert read() == (tuple(a + b for a, b in zip(IN0, IN1)), tuple(a - b for a, b in zip(IN0, IN1)))


def wait_saved(k, regions):
    """Wait until a state that holds regions regions (all there are) is in
    the keeper's store."""
    start = 0
    while True:
        i, m = k.wait_line(SAVED, start=start)
        if int(m.group(1)) >= regions:
            return
        start = i + 1


def kill_and_restart(k):
    k.started(1)
    os.kill(k.pid, signal.SIGKILL)
    k.wait_line(r"the service was killed by signal 9")
    return k.started(2)


def test_regions_survive_kill_9(kept, shm_key, sock_path):  # noqa: F811
    """A system shm region registered over HTTP and a memfd over --uds are
    back, with their bytes, in the server the keeper starts after kill -9:
    no client registers again."""
    k = kept("--uds", sock_path)
    k.started(1)
    key, shm = shm_region(shm_key, "survives")
    try:
        register_shm(k, "over_http", key)
        fd, memfd = filled_region(mc)
        sock = mc.connect(sock_path)
        mc.register(sock, "over_uds", fd, REGION_BYTES)
        os.close(fd)
        wait_saved(k, 2)
        kill_and_restart(k)
        sock.close()  # its server is gone; the region is not
        k.wait_line(r"crash survival: restored 2 region\(s\) from the service manager, 0 failed")
        assert region_names(k) == ["over_http", "over_uds"]
        infer_into(k, "over_http", shm)
        infer_into(k, "over_uds", memfd)
    finally:
        os.unlink("/dev/shm" + key)


def test_a_restored_memfd_region_goes_after_the_orphans_grace(kept, sock_path):  # noqa: F811
    """No client's connection survives a crash: a restored memfd region has
    no socket whose close would unregister it, so it goes once
    --orphan-grace-s has passed; a client connected after the restart
    registers under a tag of its own, and its close takes its region only."""
    k = kept("--uds", sock_path, "--orphan-grace-s", "2")
    k.started(1)
    fd, _ = filled_region(mc)
    sock = mc.connect(sock_path)
    mc.register(sock, "before", fd, REGION_BYTES)
    wait_saved(k, 1)
    kill_and_restart(k)
    sock.close()
    k.wait_line(r"crash survival: restored 1 region\(s\) from the service manager, 0 failed")
    k.wait_line(r"uds: 1 connection\(s\) whose regions came without their socket")
    after = mc.connect(sock_path)
    mc.register(after, "after", fd, REGION_BYTES)
    os.close(fd)
    assert region_names(k) == ["after", "before"]
    k.wait_line(r"uds uds:\S+: its regions are unregistered: no connection came for them")
    assert region_names(k) == ["after"]
    after.close()
    for _ in range(100):
        if region_names(k) == []:
            break
        time.sleep(0.05)
    assert region_names(k) == []


def test_a_region_whose_object_is_gone_fails_alone(kept, shm_key):
    """The restore reports each region it could not take back, and why, on
    a line of its own; the others are restored."""
    k = kept()
    k.started(1)
    kept_key, shm = shm_region(shm_key, "stays")
    gone_key, _ = shm_region(shm_key, "goes")
    try:
        register_shm(k, "stays", kept_key)
        register_shm(k, "goes", gone_key)
        wait_saved(k, 2)
        os.unlink("/dev/shm" + gone_key)
        kill_and_restart(k)
        k.wait_line(r"crash survival: restored 1 region\(s\) from the service manager, 1 failed")
        k.wait_line(r"crash survival: region 'goes' \(tag .*\) not restored: SHMREG_ERR_\w+: .+")
        assert region_names(k) == ["stays"]
        infer_into(k, "stays", shm)
    finally:
        os.unlink("/dev/shm" + kept_key)


def test_clean_stop_clears_the_store(kept, shm_key):
    """SIGTERM to the server empties the store: started again (the keeper's
    --restart always), it has no region."""
    k = kept(keeper_args=("--restart", "always"))
    pid, _ = k.started(1)
    key, _ = shm_region(shm_key, "clean")
    try:
        register_shm(k, "clean", key)
        wait_saved(k, 1)
        os.kill(pid, signal.SIGTERM)
        k.wait_line(r"the service exited with status 0; 0 descriptor\(s\) stored")
        k.started(2)
        k.wait_line(r"started pid \d+ with 0 stored descriptor\(s\)", start=1)
        assert region_names(k) == []
        assert "crash survival: restored" not in k.text()
    finally:
        os.unlink("/dev/shm" + key)


def test_build_without_libsystemd_says_so():
    """The server built with SERVER_WITH_SYSTEMD=OFF says at start, under a
    manager, that crash survival is not compiled in, and stores nothing."""
    server = os.environ.get("SERVER_BIN_NO_SYSTEMD")
    if not server or not os.access(server, os.X_OK):
        pytest.skip("set SERVER_BIN_NO_SYSTEMD to a server built with -DSERVER_WITH_SYSTEMD=OFF "
                    "(scripts/tests.d/60-server.sh does)")
    k = KeptServer(server=server)
    k.wait_line(NOT_BUILT + r" \(built without libsystemd\)")
    k.wait_line(r"^listening on", kind="out")
    assert k.stop() == 0
    err = k.text()
    assert "fd_keeper: stored " not in err and "service ready" not in err, err
    assert leftover_report(err) == (0, 0), err


def test_keeper_socket_is_its_users_alone():
    """The keeper's notify socket is its user's alone (0600 in a 0700 folder)."""
    k = KeptServer()
    try:
        _, m = k.wait_line(r"notify socket (\S+)")
        path = m.group(1)
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    finally:
        k.stop()
