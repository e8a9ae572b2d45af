"""Registry: configuration, register, unregister, status, stats, close."""

import os

import pytest

import shmreg


# ------------------------------------------------------------------ config

@pytest.mark.parametrize("policy", ["defer", "detach", "refuse"])
def test_busy_policies_accepted(policy):
    shmreg.Registry(policy).close()
    shmreg.Registry(busy_policy=policy).close()


def test_bad_settings_raise_invalid_argument():
    with pytest.raises(shmreg.InvalidArgument, match="busy_policy must be"):
        shmreg.Registry("later")
    with pytest.raises(shmreg.InvalidArgument, match="pin_policy must be"):
        shmreg.Registry(pin_policy="sometimes")
    with pytest.raises(shmreg.InvalidArgument):
        shmreg.Registry(reserved_key_prefixes=[""])  # the library refuses an empty prefix
    with pytest.raises(TypeError):
        shmreg.Registry(reserved_key_prefixes="/secret")  # a str is not a list of prefixes
    with pytest.raises(TypeError):
        shmreg.Registry(no_such_setting=1)
    with pytest.raises(shmreg.InvalidArgument, match=r"^max_regions must be an int in .*, not -1$"):
        shmreg.Registry(max_regions=-1)
    with pytest.raises(TypeError, match=r"^cache_bytes must be an int, not 1.5 \(float\)$"):
        shmreg.Registry(cache_bytes=1.5)
    with pytest.raises(shmreg.InvalidArgument, match="reclaim must be 'background' or 'inline', not 'later'"):
        shmreg.Registry(reclaim="later")
    with pytest.raises(TypeError, match=r"^busy_policy must be a str, not None \(NoneType\)$"):
        shmreg.Registry(busy_policy=None)
    with pytest.raises(TypeError, match="allowed_owner_uids must be a list or tuple"):
        shmreg.Registry(allowed_owner_uids=5)


def test_reserved_key_prefixes(make_shm):
    obj = make_shm()
    with shmreg.Registry(reserved_key_prefixes=(obj.key[:-1],), pin_policy="never") as reg:
        with pytest.raises(shmreg.InvalidArgument) as info:
            reg.register_system("a", obj.key, 16)
        assert str(info.value)  # the library's message
        assert reg.status() == []
        assert reg.stats().refusals == 1


def test_allowed_owner_uids(make_shm):
    obj = make_shm()
    with shmreg.Registry(allowed_owner_uids=[os.getuid()], pin_policy="never") as reg:
        reg.register_system("mine", obj.key, 16)
    with shmreg.Registry(allowed_owner_uids=[os.getuid() + 1], pin_policy="never") as reg:
        with pytest.raises(shmreg.InvalidArgument):
            reg.register_system("theirs", obj.key, 16)


NOBODY = 65534


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give an object to another uid")
def test_default_allow_list_refuses_another_uids_object(make_shm):
    """Run as root, a registry with no allow-list mapped any object a client
    named, another uid's 0600 one included; by default it takes the
    process's own uid's objects only, as the C server."""
    theirs = make_shm(4096, fill=b"secret")
    fd = os.open(theirs.path, os.O_RDWR)
    try:
        os.fchown(fd, NOBODY, NOBODY)
    finally:
        os.close(fd)
    mine = make_shm()
    with shmreg.Registry(pin_policy="never") as reg:
        with pytest.raises(shmreg.InvalidArgument) as info:
            reg.register_system("theirs", theirs.key, 4096)
        assert f"is owned by uid {NOBODY}, which this registry does not accept" in str(info.value)
        assert reg.status() == [] and reg.stats().mapped_regions == 0
        reg.register_system("mine", mine.key, 16)
    # Widened on purpose: the owner named, or every owner.
    for allowed in ([NOBODY], "any"):
        with shmreg.Registry(pin_policy="never", allowed_owner_uids=allowed) as reg:
            reg.register_system("theirs", theirs.key, 4096)


def test_allow_list_spellings():
    with pytest.raises(shmreg.InvalidArgument, match="allowed_owner_uids must be a list or tuple "
                                                     "of at least one uid"):
        shmreg.Registry(allowed_owner_uids=())  # never read as "every owner"
    with pytest.raises(shmreg.InvalidArgument, match="allowed_owner_uids must be .* or 'any'"):
        shmreg.Registry(allowed_owner_uids="all")
    shmreg.Registry(allowed_owner_uids="any").close()
    shmreg.Registry(allowed_owner_uids=None).close()


SPARSE_TIB = 1 << 40


def test_default_limits_are_the_c_servers(make_shm):
    """One sparse 1 TiB object, which costs its client nothing, registered
    again and again reserved the server's address space; by default a
    registry maps at most 1 TiB and 4096 regions, as the C server."""
    big = make_shm(SPARSE_TIB)
    with shmreg.Registry(pin_policy="never") as reg:
        reg.register_system("a", big.key, SPARSE_TIB)
        with pytest.raises(shmreg.NoMemory):
            reg.register_system("b", big.key, SPARSE_TIB)
        with pytest.raises(shmreg.NoMemory):
            reg.register_system("c", big.key, 4096)
        reg.unregister("a")
        small = make_shm()
        for i in range(4096):
            reg.register_system(f"r{i}", small.key, 16)
        with pytest.raises(shmreg.NoMemory):
            reg.register_system("one-more", small.key, 16)
        reg.unregister_all()
    with shmreg.Registry(pin_policy="never", max_mapped_bytes=0) as reg:  # 0: no limit
        reg.register_system("a", big.key, SPARSE_TIB)
        reg.register_system("b", big.key, SPARSE_TIB)


def test_limits(make_shm):
    obj = make_shm(8192)
    with shmreg.Registry(max_regions=1, pin_policy="never") as reg:
        reg.register_system("a", obj.key, 16)
        with pytest.raises(shmreg.NoMemory):
            reg.register_system("b", obj.key, 16)
    with shmreg.Registry(max_mapped_bytes=4096, pin_policy="never") as reg:
        reg.register_system("a", obj.key, 4096)
        with pytest.raises(shmreg.NoMemory):
            reg.register_system("b", obj.key, 1)
        assert [s.name for s in reg.status()] == ["a"]


def test_pinning_without_cuda(make_shm):
    if shmreg.cuda_available():
        pytest.skip("this machine can pin: python/tests/gpu covers it")
    obj = make_shm()
    with shmreg.Registry(pin_policy="always") as reg:
        with pytest.raises(shmreg.Unsupported):
            reg.register_system("a", obj.key, 16)
    with shmreg.Registry() as reg:  # "auto": no CUDA, no pinning, no error
        reg.register_system("a", obj.key, 16)
        assert reg.status("a")[0].pinned is False
        with pytest.raises(shmreg.Unsupported):
            reg.register_system("b", obj.key, 16, pin=True)
        reg.register_system("c", obj.key, 16, pin=False)


# ----------------------------------------------------------------- register

def test_register_system_and_status(reg, shm):
    reg.register_system("in", shm.key, 1024, 512, tag="client-1")
    reg.register_system("ro", shm.key, 100, readonly=True)
    by_name = {s.name: s for s in reg.status()}
    s = by_name["in"]
    assert (s.key, s.kind, s.offset, s.byte_size, s.device_id) == (shm.key, "system", 512, 1024, -1)
    assert (s.in_use, s.pending_unregister, s.pinned, s.readonly, s.flags, s.tag) == (0, False, False, False, 0, "client-1")
    r = by_name["ro"]
    assert r.readonly and r.flags == 1 and r.tag is None and r.offset == 0
    assert r.generation != s.generation
    assert reg.status("in") == [s]
    assert reg.status(kind="system", tag="client-1") == [s]
    assert reg.status(kind="cuda") == []


def test_register_errors_leave_nothing(reg, shm):
    reg.register_system("a", shm.key, 16)
    cases = [
        (shmreg.AlreadyExists, ("a", shm.key, 16)),
        (shmreg.OutOfBounds, ("b", shm.key, shm.size + 1)),
        (shmreg.OutOfBounds, ("b", shm.key, 16, shm.size)),
        (shmreg.OutOfBounds, ("b", shm.key, 0)),
        (shmreg.System, ("b", "/shmreg-pytest-no-such-object", 16)),
        (shmreg.InvalidArgument, ("", shm.key, 16)),
        (shmreg.InvalidArgument, ("x" * 256, shm.key, 16)),
        (shmreg.InvalidArgument, ("b\n", shm.key, 16)),
        (shmreg.InvalidArgument, ("b\0c", shm.key, 16)),
        (shmreg.InvalidArgument, ("b", shm.key + "\0", 16)),
    ]
    for cls, args in cases:
        with pytest.raises(cls) as info:
            reg.register_system(*args)
        assert type(info.value) is cls and str(info.value), args
    with pytest.raises(shmreg.InvalidArgument):
        reg.register_system("b", shm.key, 16, tag="\x01")
    with pytest.raises(shmreg.InvalidArgument, match="byte_size must be .*, not -1"):
        reg.register_system("b", shm.key, -1)
    with pytest.raises(TypeError, match=r"readonly must be True or False, not 1 \(int\)"):
        reg.register_system("b", shm.key, 16, readonly=1)
    with pytest.raises(TypeError, match=r"key must be a str, not None"):
        reg.register_system("b", None, 16)
    with pytest.raises(TypeError):
        reg.register_system("b", shm.key, 16, colour="red")
    assert [s.name for s in reg.status()] == ["a"]


def test_register_messages_are_the_librarys(reg, shm):
    reg.register_system("a", shm.key, 16)
    with pytest.raises(shmreg.AlreadyExists, match="'a'"):
        reg.register_system("a", shm.key, 16)
    with pytest.raises(shmreg.OutOfBounds, match=str(shm.size)):
        reg.register_system("b", shm.key, shm.size + 1)


def test_cuda_registration_without_cuda(reg):
    if shmreg.cuda_available():
        pytest.skip("python/tests/gpu covers CUDA registration")
    with pytest.raises(shmreg.Error) as info:
        reg.register_cuda_ipc("g", bytes(64), 0, 1024)
    assert isinstance(info.value, (shmreg.Unsupported, shmreg.InvalidArgument))
    r, w = os.pipe()
    try:
        with pytest.raises(shmreg.Error):
            reg.register_cuda_fd("g", r, 0, 1024)
    finally:
        os.close(r)
        os.close(w)
    with pytest.raises(shmreg.Error):
        reg.register_cuda_fd("g", -1, 0, 1024)
    with pytest.raises(TypeError):
        reg.register_cuda_ipc("g", "not bytes", 0, 1024)
    assert reg.status() == []


# --------------------------------------------------------------- unregister

def test_unregister_kinds(reg, shm):
    reg.register_system("a", shm.key, 16)
    with pytest.raises(shmreg.WrongKind):
        reg.unregister("a", "cuda")
    with pytest.raises(shmreg.WrongKind):
        reg.status("a", "cuda")
    with pytest.raises(shmreg.InvalidArgument, match="kind must be"):
        reg.unregister("a", "gpu")
    reg.unregister("a", kind="system")
    with pytest.raises(shmreg.NotFound):
        reg.unregister("a")
    with pytest.raises(shmreg.NotFound, match="'a'"):
        reg.status("a")


def test_unregister_all_and_tags(reg, shm):
    for i in range(3):
        reg.register_system(f"t{i}", shm.key, 16, tag="tenant")
    reg.register_system("other", shm.key, 16)
    reg.unregister_all(kind="cuda")
    assert len(reg.status()) == 4
    reg.unregister_all(tag="tenant")
    assert [s.name for s in reg.status()] == ["other"]
    reg.unregister_all()
    assert reg.status() == []


@pytest.mark.parametrize("policy", ["defer", "detach", "refuse"])
def test_busy_policy(policy, shm):
    with shmreg.Registry(policy, pin_policy="never") as reg:
        reg.register_system("a", shm.key, 64)
        region = reg.acquire("a", 0, 64)
        if policy == "refuse":
            with pytest.raises(shmreg.Busy, match="1"):
                reg.unregister("a")
            assert reg.status("a")[0].in_use == 1
        else:
            reg.unregister("a")
            if policy == "defer":
                (s,) = reg.status()
                assert s.pending_unregister and s.in_use == 1
                reg.acquire("a", 0, 1).release()  # still acquirable under its name
                assert reg.stats().pending_regions == 1
            else:
                assert reg.status() == []
                assert reg.stats().detached_regions == 1
                reg.register_system("a", shm.key, 64)  # the name is free again
                reg.unregister("a")
        region.release()
        reg.trim()  # the reclaim thread unmaps what the last release handed over
        stats = reg.stats()
        assert stats.references == 0 and stats.pending_regions == 0 and stats.detached_regions == 0


def test_stats(reg, shm):
    s = reg.stats()
    assert isinstance(s, shmreg.Stats)
    assert s == shmreg.Stats(*[0] * 15)
    reg.register_system("a", shm.key, 100)
    with pytest.raises(shmreg.AlreadyExists):
        reg.register_system("a", shm.key, 100)
    with reg.acquire("a", 0, 10):
        s = reg.stats()
    assert (s.regions, s.references, s.mapped_regions, s.mapped_bytes, s.registrations, s.refusals) == (1, 1, 1, 100, 1, 1)


# -------------------------------------------------------------------- close

def test_close_and_context_manager(shm):
    with shmreg.Registry(pin_policy="never") as reg:
        reg.register_system("a", shm.key, 16)
        assert not reg.closed
    assert reg.closed
    reg.close()  # idempotent
    for call in (lambda: reg.acquire("a", 0, 1), reg.status, reg.stats,
                 lambda: reg.register_system("b", shm.key, 16), lambda: reg.unregister("a"),
                 reg.unregister_all):
        with pytest.raises(shmreg.InvalidArgument, match="closed"):
            call()


def test_records_are_frozen_dataclasses(reg, shm):
    reg.register_system("a", shm.key, 16)
    (s,) = reg.status()
    assert isinstance(s, shmreg.RegionStatus)
    with pytest.raises(AttributeError):
        s.in_use = 3  # type: ignore[misc]


# --------------------------------------------------------------- 1.1 calls

def test_tags_hide_other_tenants(reg, shm):
    reg.register_system("a", shm.key, 64, tag="t1")
    reg.register_system("b", shm.key, 64, tag="t2")
    reg.register_system("c", shm.key, 64)
    # Another tag's region answers exactly as an absent one.
    with pytest.raises(shmreg.NotFound) as other:
        reg.acquire("a", 0, 1, tag="t2")
    with pytest.raises(shmreg.NotFound) as absent:
        reg.acquire("zz", 0, 1, tag="t2")
    assert str(other.value) == str(absent.value).replace("'zz'", "'a'")
    with pytest.raises(shmreg.NotFound):  # before any bounds check
        reg.acquire("a", 0, 10**6, tag="t2")
    with reg.acquire("a", 0, 1, tag="t1") as region:
        assert region.name == "a"
    assert [s.name for s in reg.status(tag="t1")] == ["a"]
    with pytest.raises(shmreg.NotFound):
        reg.status("a", tag="t2")
    with pytest.raises(shmreg.NotFound):
        reg.unregister("a", tag="t2")
    reg.unregister_all(tag="t2")
    assert sorted(s.name for s in reg.status()) == ["a", "c"]
    reg.unregister("a", tag="t1")
    assert [s.name for s in reg.status()] == ["c"]


def test_register_system_fd(reg):
    import fcntl
    fd = os.memfd_create("shmreg-pytest", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, 8192)
        os.pwrite(fd, b"memfd", 4096)
        # Unsealed: refused unless the registry accepts unsealed descriptors.
        with pytest.raises(shmreg.InvalidArgument):
            reg.register_system_fd("m", fd, 4096)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
        reg.register_system_fd("m", fd, 4096, offset=4096, tag="t")
        (s,) = reg.status()
        assert (s.name, s.key, s.kind, s.offset, s.byte_size, s.tag) == ("m", None, "system", 4096, 4096, "t")
        with reg.acquire("m", 0, 5, tag="t") as region:
            out = bytearray(5)
            region.read_into(out)
            assert bytes(out) == b"memfd"
        with pytest.raises(shmreg.OutOfBounds):
            reg.register_system_fd("big", fd, 8192, offset=1)
        with pytest.raises(shmreg.InvalidArgument, match=r"^fd must be an int in \[0, "):
            reg.register_system_fd("neg", -1, 16)
        reg.unregister("m")
    finally:
        os.close(fd)


def test_reclaim_settings(make_shm):
    obj = make_shm()
    for reclaim in ("background", "inline"):
        with shmreg.Registry(pin_policy="never", reclaim=reclaim, busy_policy="detach") as reg:
            reg.register_system("a", obj.key, 4096)
            region = reg.acquire("a", 0, 16)
            reg.unregister("a")
            region.release()
            if reclaim == "inline":  # unmapped by the release itself
                assert reg.stats().mapped_bytes == 0
            reg.trim()
            s = reg.stats()
            assert (s.mapped_bytes, s.reclaim_waiting_bytes) == (0, 0), s


def test_cache_bytes_and_cache_stats(make_shm):
    obj = make_shm()
    with shmreg.Registry(pin_policy="never", cache_bytes=1 << 20) as reg:
        reg.register_system("a", obj.key, 4096)
        reg.unregister("a")  # idle: unmapped before it returns, into the cache
        s = reg.stats()
        assert (s.cached_mappings, s.cached_bytes, s.cache_misses) == (1, 4096, 1), s
        reg.register_system("a", obj.key, 4096)
        s = reg.stats()
        assert (s.cache_hits, s.cached_mappings) == (1, 0), s
        reg.unregister("a")
        reg.trim()  # trim unmaps the cache too
        s = reg.stats()
        assert (s.cached_mappings, s.cache_evictions, s.mapped_bytes) == (0, 1, 0), s
        assert not any(obj.name in m for m in open("/proc/self/maps"))
    with shmreg.Registry(pin_policy="never") as reg:  # default: off
        reg.register_system("a", obj.key, 4096)
        reg.unregister("a")
        reg.trim()
        assert reg.stats().cached_mappings == 0
