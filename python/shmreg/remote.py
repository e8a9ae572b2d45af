"""Remote regions through UCX: export an array's memory and
register it with a server's remote_memory extension, so that a server on
another host reads the inputs from it and writes the outputs into it, and
only a small descriptor travels in the request.

A tritonclient user changes two lines: instead of creating a system shared
memory region and calling register_system_shared_memory,

    from shmreg import remote
    window = remote.export(input_array)                          # 1
    remote.register("localhost:8000", "input0", window)          # 2
    inp.set_shared_memory("input0", input_array.nbytes)          # as before

and the same for an output array. With the shared-memory transports
(client and server on one host), remote.allocate(nbytes) gives memory the
server reads directly, much faster than an exported array of the caller's;
fill it through numpy (np.frombuffer(window.memory, dtype)).
Keep `window` (and the array) alive while
the region is registered; remote.unregister(url, name) ends it, and the
server unregisters it by itself when this process dies.

Standard library only (ctypes over libshmreg's C client, shmreg.h's
shmreg_remote_*), so it works with or without the compiled extension. The
library is the one shipped next to this file, else $SHMREG_LIBRARY, else
libshmreg.so.1 on the loader's path. UCX reads its settings from the
environment (UCX_TLS, UCX_NET_DEVICES) when the first client is made.
"""

import base64
import ctypes
import json
import os
import threading
import urllib.error
import urllib.request

_SONAME = "libshmreg.so.1"


class RemoteError(Exception):
    """A failed call: code is the library's error name, or the HTTP status."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def _load():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), _SONAME)
    path = os.environ.get("SHMREG_LIBRARY") or (here if os.path.exists(here) else _SONAME)
    lib = ctypes.CDLL(path)
    p, sz, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    lib.shmreg_last_error.restype = ctypes.c_char_p
    lib.shmreg_err_name.restype = ctypes.c_char_p
    lib.shmreg_err_name.argtypes = [i]
    lib.shmreg_remote_available.restype = i
    lib.shmreg_remote_client_create.argtypes = [ctypes.POINTER(p)]
    lib.shmreg_remote_client_create.restype = i
    lib.shmreg_remote_client_destroy.argtypes = [p]
    lib.shmreg_remote_client_destroy.restype = None
    lib.shmreg_remote_export.argtypes = [p, p, sz, ctypes.POINTER(p)]
    lib.shmreg_remote_export.restype = i
    lib.shmreg_remote_alloc.argtypes = [p, sz, ctypes.POINTER(p), ctypes.POINTER(p)]
    lib.shmreg_remote_alloc.restype = i
    lib.shmreg_remote_descriptor.argtypes = [p, ctypes.POINTER(p), ctypes.POINTER(sz)]
    lib.shmreg_remote_descriptor.restype = i
    lib.shmreg_remote_unexport.argtypes = [p]
    lib.shmreg_remote_unexport.restype = None
    return lib


_lib = None
_client = None
_lock = threading.Lock()


def _check(rc):
    if rc != 0:
        raise RemoteError(_lib.shmreg_err_name(rc).decode(), _lib.shmreg_last_error().decode())


def _the_client():
    """One UCX client (context, worker, progress thread) per process."""
    global _lib, _client
    with _lock:
        if _client is None:
            if _lib is None:
                _lib = _load()
            c = ctypes.c_void_p()
            _check(_lib.shmreg_remote_client_create(ctypes.byref(c)))
            _client = c
        return _client


def _address(obj):
    """Address and size of a C-contiguous buffer (a numpy array, bytearray)."""
    view = memoryview(obj)
    if not view.c_contiguous:
        raise ValueError("export needs a C-contiguous buffer")
    if view.nbytes == 0:
        raise ValueError("export needs a non-empty buffer")
    interface = getattr(obj, "__array_interface__", None)
    if interface is not None:
        return interface["data"][0], view.nbytes
    if view.readonly:
        raise ValueError("a read-only buffer without __array_interface__ cannot be exported")
    return ctypes.addressof(ctypes.c_char.from_buffer(view)), view.nbytes


class Window:
    """One exported buffer. descriptor: the bytes a server registers.
    Holds the buffer, so its memory stays valid while the window lives.
    memory: a memoryview of the bytes for a window from allocate()."""

    def __init__(self, obj=None, nbytes=0):
        client = _the_client()
        w = ctypes.c_void_p()
        self.memory = None
        if obj is None:  # allocate(): UCX's memory, freed by close()
            addr = ctypes.c_void_p()
            _check(_lib.shmreg_remote_alloc(client, nbytes, ctypes.byref(addr), ctypes.byref(w)))
            self.nbytes = nbytes
            self._obj = (ctypes.c_char * nbytes).from_address(addr.value)
            self.memory = memoryview(self._obj).cast("B")
        else:
            self._obj = obj
            addr, self.nbytes = _address(obj)
            _check(_lib.shmreg_remote_export(client, addr, self.nbytes, ctypes.byref(w)))
        self._w = w
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        _check(_lib.shmreg_remote_descriptor(w, ctypes.byref(data), ctypes.byref(size)))
        self.descriptor = ctypes.string_at(data, size.value)

    def close(self):
        """Stop exporting (unregister it at the server first)."""
        if self._w is not None:
            if self.memory is not None:
                self.memory.release()  # raises while an array still views it
            _lib.shmreg_remote_unexport(self._w)
            self._w = None
            self._obj = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def available():
    """True when this process can export memory (UCX installed, library built with it)."""
    global _lib
    with _lock:
        if _lib is None:
            _lib = _load()
    return _lib.shmreg_remote_available() == 0


def export(obj):
    """Export a C-contiguous buffer (numpy array, bytearray): a Window."""
    return Window(obj)


def allocate(nbytes):
    """A Window over nbytes that UCX allocates (shmreg_remote_alloc): with
    the shared-memory transports the server reads and writes it directly,
    about ten times faster than an exported array of the caller's. Fill it
    through numpy: x = np.frombuffer(window.memory, np.float16).reshape(shape);
    drop such arrays before window.close()."""
    if nbytes <= 0:
        raise ValueError(f"nbytes must be positive, got {nbytes}")
    return Window(nbytes=nbytes)


def _url(server, path):
    base = server if "://" in server else "http://" + server
    return base.rstrip("/") + "/v2/remotememory" + path


def _post(server, path, body, headers=None):
    data = json.dumps(body).encode()
    req = urllib.request.Request(_url(server, path), data=data, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        text = e.read().decode(errors="replace")
        try:
            text = json.loads(text).get("error", text)
        except ValueError:
            pass
        raise RemoteError(e.code, text) from None


def register(server, name, window, byte_size=None, offset=0, headers=None):
    """Register [offset, offset + byte_size) of window (default: all of it)
    as region `name` with the server at "host:port" (or an http:// URL)."""
    size = window.nbytes - offset if byte_size is None else byte_size
    body = {"descriptor": {"b64": base64.b64encode(window.descriptor).decode()},
            "byte_size": size, "offset": offset}
    _post(server, f"/region/{name}/register", body, headers)


def unregister(server, name=None, headers=None):
    """Unregister region `name`, or every remote region of this caller."""
    _post(server, f"/region/{name}/unregister" if name else "/unregister", {}, headers)


def status(server, name=None, headers=None):
    """The server's remote regions (a list of dicts), or one region's."""
    req = urllib.request.Request(_url(server, f"/region/{name}/status" if name else "/status"),
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise RemoteError(e.code, e.read().decode(errors="replace")) from None
