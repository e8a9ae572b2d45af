"""Remote regions through UCX: export an array's memory and
register it with a server's remote_memory extension, so that a server on
another host reads the inputs from it and writes the outputs into it, and
only a small descriptor travels in the request.

A tritonclient user connects once, then changes two lines per region:
instead of creating a system shared memory region and calling
register_system_shared_memory,

    from shmreg import remote
    remote.connect("localhost:8000", token)                      # once
    window = remote.export(input_array)                          # 1
    remote.register("localhost:8000", "input0", window, token=token)  # 2
    inp.set_shared_memory("input0", input_array.nbytes)          # as before

and the same for an output array. connect() asks the server for an
invitation over HTTP (POST v2/remotememory/connect, with the bearer token
of a server started with --tenants) and connects this process's UCX client
to the server with it; export() then announces the array's memory over
that connection, and register() names it. A server accepts the windows of
a connection only in registrations of the tenant that was invited, so the
same token goes to both. One connection per process.

remote.allocate(nbytes) gives zero-filled memory owned by the library; fill
it through numpy (np.frombuffer(window.memory, dtype)). Keep `window` (and
the array) alive while the region is registered; remote.unregister(url,
name) ends it, and the server unregisters it by itself when this process
dies or disconnect() says goodbye.

Standard library only (ctypes over libshmreg's C client, shmreg/remote.h's
shmreg_remote_*), so it works with or without the compiled extension. The
library is the one shipped next to this file, else $SHMREG_LIBRARY, else
libshmreg.so.1 on the loader's path.

Transports: the library opens only those on which no peer can read or
write this process's memory without a key the NIC checks (rc, dc), unless
connect() names a tcp_device: the network device whose network you trust
("lo" for a server on this host), on which tcp is then opened, and only
there; any host that reaches that device's address can then write into
this process. tcp_ports ("LOW-HIGH") bounds the ports tcp's own listener
takes. The environment's UCX_TLS does not choose (docs/security.md).
"""

import base64
import ctypes
import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request

_SONAME = "libshmreg.so.1"


class RemoteError(Exception):
    """A failed call: code is the library's error name (SHMREG_ERR_...), or the
    server's HTTP status."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


class NotConnected(RemoteError):
    """export() or allocate() before connect(), or connect() twice: the
    library's INVALID_ARG for the same mistakes, as a class of its own."""

    def __init__(self, message):
        super().__init__("SHMREG_ERR_INVALID_ARG", message)


class _ClientConfig(ctypes.Structure):
    """shmreg_remote_client_config."""

    _fields_ = [
        ("transports", ctypes.c_char_p),
        ("tcp_device", ctypes.c_char_p),
        ("tcp_ports", ctypes.c_char_p),
        ("reserved_", ctypes.c_void_p * 4),
    ]


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
    if hasattr(lib, "shmreg_remote_client_create_with"):  # 1.4
        lib.shmreg_remote_client_create_with.argtypes = [ctypes.POINTER(_ClientConfig), ctypes.POINTER(p)]
        lib.shmreg_remote_client_create_with.restype = i
    lib.shmreg_remote_client_connect.argtypes = [p, ctypes.c_char_p, ctypes.c_char_p]
    lib.shmreg_remote_client_connect.restype = i
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


SECRET_SIZE = 32  # SHMREG_REMOTE_SECRET_SIZE

_lib = None
_client = None  # this process's connected client (one per process)
_windows = 0    # windows open on it
_lock = threading.Lock()


def _check(rc):
    if rc != 0:
        raise RemoteError(_lib.shmreg_err_name(rc).decode(), _lib.shmreg_last_error().decode())


def _library():
    global _lib
    with _lock:
        if _lib is None:
            _lib = _load()
        return _lib


def _connected():
    """The connected client, or NotConnected."""
    with _lock:
        if _client is None:
            raise NotConnected("not connected to a server: call remote.connect(url, token) first")
        return _client


def _bearer(headers, token):
    return {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}


def _invitation(server, answer):
    """(listener address, secret) of connect's answer. The listener's IP
    0.0.0.0 or [::] is any of the server's: the host this process reached
    its HTTP endpoint by, then."""
    try:
        address, secret = answer["address"], base64.b64decode(answer["secret"]["b64"], validate=True)
        host, _, port = address.rpartition(":")
    except (KeyError, TypeError, ValueError, AttributeError):
        raise RemoteError("SHMREG_ERR_INVALID_ARG", f"the server's connect answer is not an invitation: {answer!r}") from None
    if len(secret) != SECRET_SIZE:
        raise RemoteError("SHMREG_ERR_INVALID_ARG", f"the server's secret is {len(secret)} bytes, not {SECRET_SIZE}")
    if host in ("0.0.0.0", "[::]"):
        http_host = urllib.parse.urlsplit(_url(server, "")).hostname
        address = f"[{http_host}]:{port}" if ":" in http_host else f"{http_host}:{port}"
    return address, secret


def _create_client(lib, tcp_device=None, tcp_ports=None):
    """A new C client (not connected) whose UCX context opens the
    hardware transports, and tcp on tcp_device when given."""
    c = ctypes.c_void_p()
    if not hasattr(lib, "shmreg_remote_client_create_with"):
        if tcp_device is not None or tcp_ports is not None:
            raise RemoteError("SHMREG_ERR_UNSUPPORTED", "this libshmreg (before 1.4) cannot be given a tcp_device")
        _check(lib.shmreg_remote_client_create(ctypes.byref(c)))
        return c
    config = _ClientConfig(None, tcp_device.encode() if tcp_device is not None else None,
                           tcp_ports.encode() if tcp_ports is not None else None)
    _check(lib.shmreg_remote_client_create_with(ctypes.byref(config), ctypes.byref(c)))
    return c


def connect(server, token=None, headers=None, *, tcp_device=None, tcp_ports=None):
    """Connect this process to the server at "host:port" (or an http:// URL):
    ask it for an invitation (POST v2/remotememory/connect, with `token` as
    the bearer token when given), then connect the UCX client to the
    listener it names, proving the connection with the one-time secret it
    answered. Once per process: a second call raises NotConnected until
    disconnect().

    tcp_device: the network device ("lo", "eth1") this process reaches the
    server by over tcp, on a network you trust: tcp is opened there only,
    and any host that reaches it can write into this process. None: the
    hardware transports (rc, dc) only. tcp_ports: "LOW-HIGH", the ports
    tcp's own listener may take. A refused setting raises RemoteError
    (SHMREG_ERR_INVALID_ARG) with the library's message, before any HTTP
    call."""
    global _client
    lib = _library()
    with _lock:
        if _client is not None:
            raise NotConnected("already connected to a server: one connection per process "
                               "(disconnect() first)")
    # Made first: a refused setting costs no invitation.
    c = _create_client(lib, tcp_device, tcp_ports)
    try:
        address, secret = _invitation(server, json.loads(_post(server, "/connect", {}, _bearer(headers, token))))
        with _lock:
            if _client is not None:
                raise NotConnected("already connected to a server: one connection per process")
            _check(lib.shmreg_remote_client_connect(c, address.encode(), secret))
            _client, c = c, None
    finally:
        if c is not None:
            lib.shmreg_remote_client_destroy(c)


def disconnect():
    """Say goodbye to the server (it unregisters this connection's regions
    within a second) and close the client. Close every window first."""
    global _client
    with _lock:
        if _client is None:
            return
        if _windows:
            raise RemoteError("SHMREG_ERR_BUSY", f"{_windows} window(s) still open: close them before disconnect()")
        _lib.shmreg_remote_client_destroy(_client)
        _client = None


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
        global _windows
        self._w = None
        client = _connected()
        w = ctypes.c_void_p()
        self.memory = None
        if obj is None:  # allocate(): the library's memory, freed by close()
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
        with _lock:
            _windows += 1
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        _check(_lib.shmreg_remote_descriptor(w, ctypes.byref(data), ctypes.byref(size)))
        self.descriptor = ctypes.string_at(data, size.value)

    def close(self):
        """Withdraw the window at the server (its copies of it then fail)
        and stop exporting it; unregister its regions first."""
        global _windows
        if self._w is not None:
            if self.memory is not None:
                self.memory.release()  # raises while an array still views it
            _lib.shmreg_remote_unexport(self._w)
            self._w = None
            self._obj = None
            with _lock:
                _windows -= 1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


def available():
    """True when this process can export memory (UCX installed, library built with it)."""
    return _library().shmreg_remote_available() == 0


def export(obj):
    """Export a C-contiguous buffer (numpy array, bytearray) over the
    connection: a Window. NotConnected before connect()."""
    return Window(obj)


def allocate(nbytes):
    """A Window over nbytes of zero-filled memory that the library allocates
    and exports (shmreg_remote_alloc). Fill it through numpy:
    x = np.frombuffer(window.memory, np.float16).reshape(shape); drop such
    arrays before window.close(). NotConnected before connect()."""
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
        raise _http_error(e) from None


def _http_error(e):
    """The server's refusal: its status and its {"error": ...} message."""
    text = e.read().decode(errors="replace")
    try:
        text = json.loads(text).get("error", text)
    except (ValueError, AttributeError):
        pass
    return RemoteError(e.code, text)


def register(server, name, window, byte_size=None, offset=0, headers=None, token=None):
    """Register [offset, offset + byte_size) of window (default: all of it)
    as region `name` with the server at "host:port" (or an http:// URL).
    token: the bearer token, that of the tenant connect() was invited for."""
    size = window.nbytes - offset if byte_size is None else byte_size
    body = {"descriptor": {"b64": base64.b64encode(window.descriptor).decode()},
            "byte_size": size, "offset": offset}
    _post(server, f"/region/{name}/register", body, _bearer(headers, token))


def unregister(server, name=None, headers=None, token=None):
    """Unregister region `name`, or every remote region of this caller."""
    _post(server, f"/region/{name}/unregister" if name else "/unregister", {},
          _bearer(headers, token))


def status(server, name=None, headers=None, token=None):
    """The server's remote regions (a list of dicts), or one region's."""
    req = urllib.request.Request(_url(server, f"/region/{name}/status" if name else "/status"),
                                 headers=_bearer(headers, token))
    try:
        with urllib.request.urlopen(req) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise _http_error(e) from None
