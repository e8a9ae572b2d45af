#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses (corpus/ops, corpus/names,
corpus/remote_descriptor, corpus/remote_messages).

Each ops seed is a short program in fuzz_ops.c's encoding, one scenario a
fuzzer should start from; the fuzzer mutates them. Run it from anywhere after
changing that encoding: python3 tests/fuzz/make_seeds.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# fuzz_ops.c: operations[] indices
REG, ACQ, RET, REL, UNR, UALL, STAT, RECR, NUL, REG_CUDA, TRIM = 0, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12
# take_kind: ANY, SYSTEM, CUDA, invalid
ANY, SYSTEM, CUDA, BADKIND = 0, 1, 2, 3
# take_tag: 0 none, 2 tenant-a, 3 tenant-b, 4 "", 5 control characters
NOTAG, TA, TB, TEMPTY, TCTL = 0, 2, 3, 4, 5
# take_extent selectors, some followed by their bytes
ZERO, ONE, LIMIT, LIMIT_1, LIMIT1, SMAX, SMAX_4095, PAGE, PAGE_1 = ([i] for i in range(9))
def U16(v): return [9, v & 0xff, v >> 8]
def U8(v): return [11, v]


def config(policy, max_regions=0, mapped_sel=0, owners=0, inline=0, cache_sel=0):
    """create_registry's three bytes: policy and limits, the owner list, then
    the reclaim mode (inline) and the cache size (cache_sel: 0 off, 2 smaller
    than an object, 3 three pages, 4 a MiB)."""
    regions_sel = 0 if max_regions == 0 else max_regions + 3
    return [policy | regions_sel << 2 | mapped_sel << 5, owners, inline | cache_sel << 1]


def reg(name, key, off, size, flags=0, tag=NOTAG, null_opts=1):
    b = [REG, name, key] + off + size + [flags, tag]
    return b + ([null_opts] if tag in (0, 1) else [])


def cuda(name, size, flags=0, tag=NOTAG, how=1, device=1):
    """op_register_cuda: how % 4 is 0 NULL handle, 1 IPC, 2 IPC of a wrong
    handle size, 3 VMM fd; device is -1 + device."""
    return [REG_CUDA, name] + size + [flags, tag, how, device] + [7] * 64


def acq(name, off, size): return [ACQ, name] + off + size
def unr(name, kind=ANY, tag=NOTAG): return [UNR, name, kind, tag]
def uall(kind=ANY, tag=NOTAG): return [UALL, kind, tag]
def st(name=None, kind=ANY, tag=NOTAG):
    return [STAT, 0, kind, tag] if name is None else [STAT, 1, name, kind, tag]


OPS = {
    'defer-pending': config(0) + reg(0, 0, ZERO, LIMIT) + acq(0, ZERO, LIMIT) + st() + unr(0) + st()
        + acq(0, U8(5), U16(9)) + [REL, 0, REL, 0] + st(),
    'detach-reregister': config(1) + reg(0, 0, U8(7), U8(100)) + acq(0, ZERO, ONE) + unr(0)
        + reg(0, 6, ZERO, LIMIT) + st() + acq(0, ZERO, LIMIT) + [REL, 1, REL, 0] + st(0, SYSTEM),
    'refuse-busy': config(2) + reg(1, 2, U16(16), PAGE_1) + reg(2, 2, ZERO, LIMIT) + acq(1, ZERO, ZERO)
        + unr(1) + uall() + st() + [REL, 0] + uall(SYSTEM) + uall(CUDA) + uall(BADKIND),
    'extreme-names': config(0) + sum((reg(n, 0, ZERO, ONE) for n in (7, 8, 6, 9, 10, 11, 12, 14)), [])
        + [REG, 13, 5] + list(b'r\x00x1') + [0, 0, ZERO[0], ONE[0], 0, 0, 1]
        + acq(7, ZERO, ONE) + st(7) + st(8) + unr(7, SYSTEM) + unr(8) + unr(9),
    'extreme-keys': config(0) + sum((reg(k % 6, k, ZERO, ONE) for k in range(9, 19)), [])
        + [REG, 3, 19, 1, ZERO[0], ONE[0], 0, 0, 1] + st(),
    'extreme-extents': config(0) + reg(0, 0, SMAX, ONE) + reg(0, 0, PAGE, SMAX_4095) + reg(0, 0, ONE, SMAX)
        + reg(0, 0, LIMIT, ZERO) + reg(0, 0, LIMIT_1, ONE) + reg(0, 0, LIMIT_1, LIMIT)
        + reg(1, 2, PAGE_1, U8(2)) + acq(0, ONE, ONE) + acq(0, PAGE, SMAX_4095) + acq(0, SMAX, ONE)
        + acq(0, ZERO, LIMIT_1) + acq(0, ZERO, LIMIT1) + acq(0, LIMIT_1, ONE) + reg(2, 1, ZERO, ONE)
        + acq(2, ZERO, ZERO) + acq(2, ONE, ZERO) + reg(3, 2, U16(4099), U8(200), 1)
        + acq(3, U8(1), U8(50)),
    'recreate-held': config(0) + reg(0, 0, ZERO, LIMIT) + reg(1, 1, ZERO, ONE) + acq(0, ZERO, LIMIT)
        + acq(1, ZERO, ONE) + [RET, 0, RECR] + config(1) + reg(0, 0, ZERO, LIMIT) + acq(0, ZERO, LIMIT)
        + unr(0) + [RECR] + config(2) + [REL, 0, REL, 0] + st(),
    # A destroyed registry's regions released while the next registry's two
    # regions share one mapping (its cache on): the model then counts more
    # regions than there are mappings, so the harness must not judge the
    # first release's unmapping by the count.
    'destroyed-release-shared-mapping': config(0) + reg(0, 0, ZERO, LIMIT) + reg(1, 1, ZERO, ONE)
        + acq(0, ZERO, LIMIT) + acq(1, ZERO, ONE) + [RECR] + config(1, cache_sel=4) + reg(0, 0, ZERO, LIMIT)
        + acq(0, ZERO, LIMIT) + unr(0) + reg(0, 0, ZERO, LIMIT) + [REL, 0, REL, 0, RECR] + config(2)
        + [REL, 0] + st(),
    'null-arguments': config(0) + reg(0, 0, ZERO, LIMIT) + [NUL, 0, NUL, 1, NUL, 2, NUL, 3, NUL, 4, NUL, 5]
        + acq(11, ZERO, ZERO) + unr(11) + st(11),
    'readonly-and-pin': config(0) + reg(0, 0, ZERO, LIMIT, 1) + acq(0, ZERO, LIMIT)
        + reg(1, 1, ZERO, ONE, 2) + reg(2, 1, ZERO, ONE, 4) + reg(3, 1, ZERO, ONE, 6)
        + reg(4, 1, ZERO, ONE, 8) + st(),
    'unregister-kinds': config(0) + reg(0, 0, ZERO, LIMIT) + unr(0, CUDA) + unr(0, BADKIND) + unr(0, SYSTEM)
        + reg(0, 0, ZERO, LIMIT) + st(0, CUDA) + uall(CUDA) + st(None, SYSTEM) + uall() + st(),
    'tenants': config(0) + reg(0, 0, ZERO, LIMIT, tag=TA) + reg(1, 1, ZERO, ONE, tag=TB)
        + reg(2, 2, ZERO, ONE) + reg(3, 0, ZERO, ONE, tag=TEMPTY) + reg(3, 0, ZERO, ONE, tag=TCTL)
        + st(tag=TA) + st(1, tag=TA) + unr(1, tag=TA) + acq(0, ZERO, ONE) + uall(tag=TA)
        + st(tag=TB) + uall(tag=TCTL) + st() + uall(tag=TB) + st(),
    'limits-regions': config(1, max_regions=2) + reg(0, 0, ZERO, ONE) + reg(1, 1, ZERO, ONE)
        + reg(2, 2, ZERO, ONE) + acq(0, ZERO, ONE) + unr(0) + reg(0, 0, ZERO, ONE) + [REL, 0]
        + reg(0, 0, ZERO, ONE) + st(),
    'limits-bytes': config(0, mapped_sel=5) + reg(0, 0, ZERO, LIMIT) + reg(1, 0, ZERO, U8(200))
        + reg(2, 2, ZERO, U16(1000)) + reg(3, 2, ZERO, SMAX) + acq(0, ZERO, ONE) + unr(0)
        + reg(0, 1, ZERO, ONE) + [REL, 0] + reg(0, 2, ZERO, U16(904)) + st(),
    # The message of a failed acquire must not echo a name's control
    # characters (here a newline that would forge a log line).
    'control-in-messages': config(0) + acq(12, ZERO, ZERO) + acq(9, ZERO, ZERO)
        + reg(0, 18, ZERO, ONE) + st(),
    # CUDA registrations that cannot open (no CUDA here): the name, the
    # limits and the reservation behave as for system regions.
    'cuda-cannot-open': config(0, max_regions=2) + reg(0, 0, ZERO, ONE)
        + cuda(1, U8(64), how=1) + cuda(0, U8(64), how=0) + cuda(1, U8(64), how=3, device=0)
        + cuda(1, U8(64), flags=6) + cuda(2, U8(64), how=7) + cuda(1, U8(64), how=2, tag=TA)
        + reg(1, 1, ZERO, ONE) + reg(2, 1, ZERO, ONE) + st(),
    # The cache: the same object re-registered, windows inside and past the
    # cached one, shared live, read-only apart; trims between.
    'cache-hits': config(0, cache_sel=4) + reg(0, 2, ZERO, LIMIT) + unr(0) + reg(1, 2, U8(7), U8(100))
        + acq(1, ZERO, U8(100)) + reg(2, 2, PAGE, U8(5)) + reg(3, 2, ZERO, ONE, 1) + [TRIM]
        + unr(1) + [REL, 0] + reg(0, 2, ZERO, LIMIT) + uall() + [TRIM] + st(),
    'cache-limits-inline': config(1, mapped_sel=5, inline=1, cache_sel=3) + reg(0, 0, ZERO, LIMIT)
        + unr(0) + reg(1, 2, ZERO, U16(1000)) + reg(0, 0, ZERO, LIMIT) + acq(0, ZERO, ONE) + unr(0)
        + [REL, 0, TRIM] + reg(2, 1, ZERO, ONE) + [RECR] + config(0, cache_sel=2) + reg(0, 0, ZERO, ONE)
        + acq(0, ZERO, ONE) + [RECR] + config(0) + [REL, 0] + st(),
    # SHMREG_SOURCE_FD (flags bit 0x10): the objects as descriptors. owners=4
    # accepts unsealed descriptors (the harness's shm objects cannot be
    # sealed); without it every descriptor registration is refused.
    'descriptors': config(0, owners=4) + reg(0, 0, ZERO, LIMIT, 0x10) + reg(1, 2, U8(7), U8(100), 0x11, tag=TA)
        + reg(2, 10, ZERO, ONE, 0x10) + reg(0, 1, ZERO, ONE, 0x10) + acq(0, ZERO, LIMIT) + acq(1, ZERO, ONE)
        + st() + unr(0) + [REL, 0, REL, 0] + [RECR] + config(0) + reg(0, 0, ZERO, LIMIT, 0x10) + st(),
    # Descriptors beside the cache: an object cached under its key is not
    # reused by its descriptor, whose region the reclaim thread unmaps.
    'descriptors-cached': config(0, owners=4, cache_sel=4) + reg(0, 0, ZERO, LIMIT) + unr(0)
        + reg(1, 0, ZERO, LIMIT, 0x10) + acq(1, ZERO, ONE) + unr(1) + [REL, 0, TRIM]
        + reg(0, 0, ZERO, LIMIT) + reg(2, 0, ZERO, ONE, 0x10) + st() + uall(),
    'owners-refused': config(0, owners=1) + reg(0, 0, ZERO, LIMIT) + reg(1, 3, ZERO, ONE)
        + [RECR] + config(0, owners=2) + reg(0, 0, ZERO, LIMIT) + st(),
}

NAMES = {
    'plain': b'region0\x00/shmreg-seed\x00triton_',
    'reserved-slashes': b'r\x00//triton_x\x00/triton_',
    'reserved-bare-prefix': b'r\x00triton_x\x00///triton_',
    'dots': b'.\x00/..\x00',
    'dot': b'..\x00.\x00',
    'inner-slash': b'a/b\x00/a/b\x00',
    'empty': b'\x00\x00',
    'only-slashes': b'/\x00///\x00',
    'control': b'bell\x07\x00key\x1f\x00',
    'del': b'\x7f\x00k\x7f\x00',
    'name-255': b'n' * 255 + b'\x00' + b'k' * 253,
    'name-256': b'n' * 256 + b'\x00/' + b'k' * 254,
    'key-255': b'x\x00' + b'k' * 255,
    'high-bytes': '\u00e9t\u00e9'.encode() + b'\x00/\xc3\xa9\x00',
    'empty-prefix': b'r\x00key\x00//\x00',
    'many-prefixes': b'r\x00/internal_data\x00a\x00b\x00/internal_\x00c',
}

# The remote descriptor, version 2 (shmreg/remote.h): version, seven zero
# bytes, the connection id, window id and generation little-endian.
CONNECTION = bytes(range(0xa0, 0xb0))


def descriptor(version=2, reserved=bytes(7), connection=CONNECTION, window=7, generation=1):
    return (bytes([version]) + reserved + connection + window.to_bytes(8, 'little')
            + generation.to_bytes(8, 'little'))


REMOTE_DESCRIPTOR = {
    'valid': descriptor(),
    'valid-extremes': descriptor(connection=bytes(15) + b'\x01', window=2**64 - 1, generation=0),
    # A version-1 descriptor: a 32-byte header (version, worker address and
    # remote key sizes, address, length), then both blobs.
    'version-1': bytes([1, 0, 0, 0, 37, 0, 0, 0, 24]) + bytes(7) + (0x7f0012345678).to_bytes(8, 'little')
        + (4096).to_bytes(8, 'little') + bytes(range(1, 38)) + bytes(range(200, 224)),
    'version-1-sized-2': descriptor(version=1),
    'unknown-version': descriptor(version=3),
    'truncated': descriptor()[:39],
    'too-long': descriptor() + b'\x00',
    'reserved-set': descriptor(reserved=bytes(6) + b'\x01'),
    'zero-connection': descriptor(connection=bytes(16)),
}

# The connection's messages (src/remote/messages.h): 80 bytes, version 1.
HELLO, ANNOUNCE, WITHDRAW, DATA, STORED, PONG, BYE = range(1, 8)
WELCOME, ANSWER, FETCH, STORE, PING = range(16, 21)


def message(kind, status=0, request=1, window=0, generation=0, offset=0, length=0, token=b'', version=1,
            reserved=b'\x00\x00'):
    return (bytes([version, kind]) + reserved + status.to_bytes(4, 'little') + request.to_bytes(8, 'little')
            + window.to_bytes(8, 'little') + generation.to_bytes(8, 'little') + offset.to_bytes(8, 'little')
            + length.to_bytes(8, 'little') + token.ljust(32, b'\x00'))


REMOTE_MESSAGES = {
    # One of each kind, as its sender writes it.
    'hello': message(HELLO, token=bytes(range(0x40, 0x60))),
    'announce': message(ANNOUNCE, request=2, window=7, generation=1, offset=0x7f0012340000, length=1 << 20),
    'withdraw': message(WITHDRAW, request=3, window=7, generation=1),
    'data': message(DATA, request=4),
    'data-refused': message(DATA, status=2, request=5),
    'stored': message(STORED, request=6),
    'pong': message(PONG, request=7),
    'bye': message(BYE, request=0),
    'welcome': message(WELCOME, request=1, token=CONNECTION),
    'welcome-refused': message(WELCOME, status=2, request=1),
    'answer': message(ANSWER, request=2),
    'fetch': message(FETCH, request=4, window=7, generation=1, offset=4096, length=4096),
    'store': message(STORE, request=6, window=7, generation=1, offset=0, length=64),
    'ping': message(PING, request=0),
    # Broken ones.
    'truncated': message(FETCH, request=4, window=7, generation=1, offset=0, length=1)[:79],
    'version-2': message(PING, version=2),
    'reserved-set': message(ANSWER, request=2, reserved=b'\x00\x01'),
    'token-in-fetch': message(FETCH, request=4, window=7, generation=1, offset=0, length=1, token=b'\x01'),
    'welcome-long-token': message(WELCOME, request=1, token=CONNECTION + b'\x01'),
    'status-in-hello': message(HELLO, status=1, token=bytes(range(0x40, 0x60))),
    'empty-announce': message(ANNOUNCE, request=2, window=7, generation=1, offset=4096, length=0),
    'store-past-2-64': message(STORE, request=6, window=7, generation=1, offset=2**64 - 1, length=1),
    'unknown-kind': message(8, request=1),
}


def write(subdir, seeds, replace=False):
    """replace: remove the folder's other files, seeds of an older format."""
    path = os.path.join(HERE, 'corpus', subdir)
    os.makedirs(path, exist_ok=True)
    if replace:
        for old in set(os.listdir(path)) - set(seeds):
            os.remove(os.path.join(path, old))
    for name, data in seeds.items():
        with open(os.path.join(path, name), 'wb') as f:
            f.write(bytes(data))


write('ops', {k: [b & 0xff for b in v] for k, v in OPS.items()})
write('names', NAMES)
write('remote_descriptor', REMOTE_DESCRIPTOR, replace=True)
write('remote_messages', REMOTE_MESSAGES, replace=True)
