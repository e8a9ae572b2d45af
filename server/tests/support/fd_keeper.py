#!/usr/bin/env python3
"""A small service manager for crash survival without systemd: it speaks
the part of sd_notify's protocol that shmreg-server uses, keeps an fd
store, and starts the server again, with the stored descriptors, when it
dies of a signal or exits non-zero (systemd's Restart=on-failure).

    fd_keeper.py [-v] [--restart on-failure|always] [--fd-store-max N]
                 [--notify-access main|all] [--max-restarts N] -- COMMAND...

The notify socket is a SOCK_DGRAM Unix socket, mode 0600, in a folder of
its own (0700). COMMAND runs with NOTIFY_SOCKET naming it and, after a
restart, with the stored descriptors at 3, 4, ... and LISTEN_FDS,
LISTEN_FDNAMES and LISTEN_PID (its own pid, set between fork and exec).
Messages understood: FDSTORE=1 with FDNAME= (default "stored") and the
descriptors as SCM_RIGHTS, FDSTOREREMOVE=1 with FDNAME=, READY=1,
STOPPING=1; other assignments are ignored, as systemd ignores those it
does not know.

Every datagram is untrusted: one larger than 4096 bytes, cut short
(MSG_TRUNC, MSG_CTRUNC), not UTF-8 text, with a name systemd would
refuse, with descriptors but no FDSTORE=1, or from a process other than
the service's (--notify-access main, the default; all: any process of
this user, as a test needs) is dropped with a line on stderr, and every
descriptor it carried is closed. A descriptor of a file and access mode
already stored is closed, as systemd closes a second copy of a file
description; past --fd-store-max (systemd's FileDescriptorStoreMax) the
rest are closed, as systemd does.

SIGTERM or SIGINT is passed to the service; the keeper then exits with
its status, its store closed. More than --max-restarts restarts within
10 s (systemd's StartLimitBurst) and it gives up, exit 1.
"""
import argparse
import array
import collections
import fcntl
import os
import select
import shutil
import signal
import socket
import stat
import sys
import tempfile
import time

MAX_MESSAGE = 4096          # systemd's notify buffer (PIPE_BUF)
MAX_FDS_PER_MESSAGE = 253   # the kernel's SCM_MAX_FD
MAX_NAME = 255              # systemd's FDNAME_MAX
UCRED = 12                  # struct ucred: pid, uid, gid
RESTART_WINDOW_S = 10
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def log(msg):
    print(f"fd_keeper: {msg}", file=sys.stderr, flush=True)


def name_ok(name):
    """systemd's fdname_is_valid: 1..255 printable ASCII characters, no ':'."""
    return 0 < len(name) <= MAX_NAME and all(" " <= c < "\x7f" and c != ":" for c in name)


def close_all(fds):
    for fd in fds:
        os.close(fd)


def file_key(fd):
    st = os.fstat(fd)
    return st.st_dev, st.st_ino, fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE


class Message:
    """One datagram taken apart: its fields, its descriptors, its sender."""

    def __init__(self, data, ancdata, flags):
        self.fds, self.pid, self.uid, self.problem = [], None, None, None
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
                self.fds.extend(fds)
            elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= UCRED:
                self.pid, self.uid, _ = array.array("i", payload[:UCRED])
        self.fields = {}
        if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            self.problem = "cut short (too large, or too many descriptors)"
        elif self.pid is None:
            self.problem = "no sender credentials"
        else:
            self.parse(data)

    def parse(self, data):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self.problem = "not UTF-8 text"
            return
        if "\0" in text:
            self.problem = "a NUL byte in the text"
            return
        for line in text.split("\n"):
            key, eq, value = line.partition("=")
            if eq:
                self.fields[key] = value
        name = self.fields.get("FDNAME")
        if name is not None and not name_ok(name):
            self.problem = "an invalid FDNAME"
        elif self.fds and self.fields.get("FDSTORE") != "1":
            self.problem = "descriptors without FDSTORE=1"


class Keeper:
    def __init__(self, args):
        self.args = args
        self.store = []           # (name, fd, file key), in the order stored
        self.child = None
        self.stopping = None      # the signal that asked for a stop
        self.restarts = collections.deque()
        self.folder = tempfile.mkdtemp(prefix="fd-keeper-")  # 0700
        self.path = os.path.join(self.folder, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        old = os.umask(0o177)     # the socket file is made 0600
        try:
            self.sock.bind(self.path)
        finally:
            os.umask(old)
        assert stat.S_IMODE(os.stat(self.path).st_mode) == 0o600
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.sock.setblocking(False)
        log(f"notify socket {self.path}")

    # ------------------------------------------------------- the messages

    def drain(self):
        """Take every datagram waiting on the socket."""
        space = socket.CMSG_SPACE(MAX_FDS_PER_MESSAGE * 4) + socket.CMSG_SPACE(UCRED)
        while True:
            try:
                data, anc, flags, _ = self.sock.recvmsg(MAX_MESSAGE, space, socket.MSG_CMSG_CLOEXEC)
            except (BlockingIOError, InterruptedError):
                return
            self.take(Message(data, anc, flags))

    def allowed(self, m):
        if self.args.notify_access == "all":
            return m.uid == os.getuid()
        return self.child is not None and m.pid == self.child

    def take(self, m):
        if m.problem is None and not self.allowed(m):
            m.problem = f"from pid {m.pid}, not the service's"
        if m.problem:
            close_all(m.fds)
            log(f"dropped a message: {m.problem}; {len(m.fds)} descriptor(s) closed")
            return
        if m.fields.get("FDSTORE") == "1":
            self.add(m.fields.get("FDNAME", "stored"), m.fds)
        if m.fields.get("FDSTOREREMOVE") == "1":
            self.remove(m.fields.get("FDNAME"))
        if m.fields.get("READY") == "1":
            log(f"service ready (pid {m.pid})")
        if m.fields.get("STOPPING") == "1":
            log(f"service stopping (pid {m.pid})")

    def add(self, name, fds):
        keys = {key for _, _, key in self.store}
        for i, fd in enumerate(fds):
            key = file_key(fd)
            if key in keys:
                os.close(fd)
            elif len(self.store) >= self.args.fd_store_max:
                close_all(fds[i:])
                log(f"cannot store more than --fd-store-max={self.args.fd_store_max} "
                    f"descriptors, closed {len(fds) - i}")
                return
            else:
                self.store.append((name, fd, key))
                keys.add(key)
                if self.args.verbose:
                    log(f"stored {name} ({len(self.store)} held)")

    def remove(self, name):
        if name is None:
            log("FDSTOREREMOVE=1 without FDNAME: ignored")
            return
        gone = [fd for n, fd, _ in self.store if n == name]
        self.store = [e for e in self.store if e[0] != name]
        close_all(gone)
        if self.args.verbose and gone:
            log(f"removed {name} ({len(self.store)} held)")

    # ---------------------------------------------------------- the service

    def spawn(self):
        fds = [fd for _, fd, _ in self.store]
        names = [n for n, _, _ in self.store]
        # Blocked across the fork: a stop that comes before the child has
        # exec'd is delivered to it with the default action, not to a copy
        # of this process's handler in it.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        pid = os.fork()
        if pid == 0:
            try:
                for sig in STOP_SIGNALS:
                    signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                self.exec_service(fds, names)
            finally:
                os._exit(127)
        self.child = pid
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        log(f"started pid {pid} with {len(fds)} stored descriptor(s)")
        if self.stopping is not None:  # asked before there was a child to pass it to
            os.kill(pid, self.stopping)

    def exec_service(self, fds, names):
        """In the child: the stored descriptors at 3.., nothing else open."""
        n = len(fds)
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 3 + n) for fd in fds]  # out of 3..3+n
        for i, fd in enumerate(high):
            os.dup2(fd, 3 + i, inheritable=True)
        os.closerange(3 + n, os.sysconf("SC_OPEN_MAX"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("LISTEN_")}
        env["NOTIFY_SOCKET"] = self.path
        if n:
            env.update(LISTEN_FDS=str(n), LISTEN_FDNAMES=":".join(names), LISTEN_PID=str(os.getpid()))
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # Python ignores it; the service should not inherit that
        os.execvpe(self.args.command[0], self.args.command, env)

    def reap(self):
        """None while the service runs; else its exit code, or -signal."""
        pid, status = os.waitpid(self.child, os.WNOHANG)
        if pid == 0:
            return None
        self.drain()  # its last messages, sent before it died, are still its own
        self.child = None
        return os.waitstatus_to_exitcode(status)

    def may_restart(self):
        now = time.monotonic()
        while self.restarts and now - self.restarts[0] > RESTART_WINDOW_S:
            self.restarts.popleft()
        self.restarts.append(now)
        return len(self.restarts) <= self.args.max_restarts

    def ended(self, code):
        """What to do once the service ended: an exit code, or None to go on."""
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        log(f"the service {how}; {len(self.store)} descriptor(s) stored")
        if self.stopping is not None:
            return code if code >= 0 else 128 - code
        if code == 0 and self.args.restart != "always":
            return 0
        if not self.may_restart():
            log(f"more than {self.args.max_restarts} restarts within {RESTART_WINDOW_S} s: giving up")
            return 1
        self.spawn()
        return None

    def stop(self, sig, _frame):
        self.stopping = sig
        if self.child is not None:
            os.kill(self.child, sig)

    def run(self):
        for sig in STOP_SIGNALS:
            signal.signal(sig, self.stop)
        self.spawn()
        while True:
            select.select([self.sock], [], [], 0.1)
            self.drain()
            code = self.reap()
            if code is not None and (rc := self.ended(code)) is not None:
                return rc

    def close(self):
        close_all(fd for _, fd, _ in self.store)
        self.store = []
        self.sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-v", "--verbose", action="store_true", help="a line for each descriptor stored or removed")
    p.add_argument("--restart", choices=("on-failure", "always"), default="on-failure")
    p.add_argument("--fd-store-max", type=int, default=4200)
    p.add_argument("--notify-access", choices=("main", "all"), default="main")
    p.add_argument("--max-restarts", type=int, default=5)
    p.add_argument("command", nargs="+")
    keeper = Keeper(p.parse_args(argv))
    try:
        return keeper.run()
    finally:
        keeper.close()


if __name__ == "__main__":
    sys.exit(main())
