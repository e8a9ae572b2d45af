"""Threads: the GIL is released around the calls that may block, and no
combination of threads deadlocks or crashes."""

import threading
import time

import pytest

import shmreg

TIMEOUT = 30


def run_threads(*targets):
    errors = []

    def wrap(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # reported by the main thread
                errors.append(e)
        return run

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "deadlock: a thread did not finish"
    if errors:
        raise errors[0]


def test_other_threads_run_during_register_and_unregister(reg, shm):
    stop = threading.Event()
    ticks = [0]

    def counter():
        while not stop.is_set():
            ticks[0] += 1

    def churn():
        try:
            for i in range(300):
                reg.register_system(f"r{i}", shm.key, 4096, (i % 16) * 4096)
            reg.unregister_all()
            for i in range(300):
                reg.register_system(f"r{i}", shm.key, 4096)
                reg.unregister(f"r{i}")
        finally:
            stop.set()

    run_threads(counter, churn)
    assert ticks[0] > 0
    assert reg.status() == []


def test_acquire_release_while_unregistering(shm):
    for policy in ("defer", "detach", "refuse"):
        with shmreg.Registry(policy, pin_policy="never") as reg:
            stop = threading.Event()

            def user():
                while not stop.is_set():
                    try:
                        with reg.acquire("a", 0, 64) as region:
                            memoryview(region)[0] = 1
                    except shmreg.NotFound:
                        pass

            def admin():
                try:
                    for _ in range(200):
                        try:
                            reg.register_system("a", shm.key, 64)
                        except shmreg.AlreadyExists:
                            pass  # pending under defer
                        try:
                            reg.unregister("a")
                        except (shmreg.Busy, shmreg.NotFound):
                            pass  # refused, or a pending one already went
                finally:
                    stop.set()

            run_threads(user, user, admin)
            reg.trim()  # last releases went to the reclaim thread
            stats = reg.stats()
            assert stats.references == 0 and stats.detached_regions == 0


def test_close_while_other_threads_call(shm):
    for _ in range(20):
        reg = shmreg.Registry(pin_policy="never")
        started = threading.Barrier(3)

        def caller(i):
            started.wait()
            for j in range(50):
                try:
                    reg.register_system(f"c{i}-{j}", shm.key, 64)
                    reg.acquire(f"c{i}-{j}", 0, 64).release()
                    reg.unregister(f"c{i}-{j}")
                except shmreg.InvalidArgument as e:
                    assert "closed" in str(e)
                    return
                except shmreg.NotFound:
                    pass

        def closer():
            started.wait()
            time.sleep(0.001)
            reg.close()

        run_threads(lambda: caller(0), lambda: caller(1), closer)
        assert reg.closed


def test_concurrent_arrays_and_release(reg, shm):
    np = pytest.importorskip("numpy")
    reg.register_system("a", shm.key, 4096)

    def user():
        for _ in range(500):
            with reg.acquire("a", 0, 4096) as region:
                arr = np.from_dlpack(region)
            arr[0] = 1
            del arr

    run_threads(user, user, user)
    assert reg.status("a")[0].in_use == 0
