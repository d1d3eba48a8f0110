# SPDX-License-Identifier: BSD-3-Clause
"""A small, generic harness for real ``redis-server`` processes.

Nothing here knows about mcaptcha-cache: it starts servers on 127.0.0.1 with
free TCP ports, each in its own directory, optionally loading a module, with
AOF / RDB / replication options, and can restart (same dir, same port),
SIGTERM or SIGKILL them. A failed start raises ``ServerStartError`` with the
tail of the server's log. ``ServerManager`` owns a set of servers and stops all
of them at teardown (and reports servers that died without being asked to).

It is meant to be reused by other test files (e.g. a Redis Cluster harness):
pass any further configuration as ``config={"cluster-enabled": "yes", ...}``
and reserve the cluster bus port with ``find_free_port(offsets=(10000,))``.
"""

import os
import signal
import socket
import subprocess
import tempfile
import time

import redis

REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")

_handed_out_ports = set()


class ServerStartError(RuntimeError):
    pass


class ServerDiedError(RuntimeError):
    pass


def _port_is_free(port):
    if port <= 0 or port >= 65536:
        return False
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _worker_share():
    """(index, count) of this pytest-xdist worker, or (0, 1) outside xdist.

    Parallel workers take ports from disjoint classes ((port >> 1) % 4: Linux
    hands out mostly odd ports to bind(0), so the low bit would split nothing),
    so a server restarted on its old port never finds it taken by another
    worker (up to 4 workers). The offsets used (10000 for a cluster bus) keep a
    bus port in its worker's class too."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not name.startswith("gw"):
        return 0, 1
    return int(name[2:]) % _PORT_CLASSES, _PORT_CLASSES


_PORT_CLASSES = 4


def find_free_port(offsets=()):
    """A TCP port on 127.0.0.1 that is free now (found by binding port 0).

    ``offsets``: further ports (port + offset) that must be free as well, e.g.
    (10000,) for a Redis Cluster bus port. Ports are not handed out twice by
    this process, and under pytest-xdist each worker has its own share of
    ports (see _worker_share)."""
    index, count = _worker_share()
    for _ in range(2000):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        finally:
            s.close()
        if port in _handed_out_ports or (port >> 1) % count != index:
            continue
        if not all(_port_is_free(port + o) for o in offsets):
            continue
        _handed_out_ports.add(port)
        for o in offsets:
            _handed_out_ports.add(port + o)
        return port
    raise RuntimeError("could not find a free TCP port")


def parse_info(text):
    """Parse the text of INFO into a dict of str -> str."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        out[k] = v
    return out


def tail_file(path, nlines=60):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return "<cannot read %s: %s>" % (path, e)
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-nlines:])


class RedisServer:
    """One redis-server process.

    dir          -- working directory (created if missing); RDB and AOF live here
    module       -- path of a module .so to load (None: no module)
    module_args  -- extra arguments for --loadmodule
    port         -- TCP port (None: a free one)
    save         -- value of the `save` option ("" disables RDB snapshots)
    appendonly   -- enable AOF
    appendfsync  -- "always" | "everysec" | "no"
    aof_preamble -- aof-use-rdb-preamble yes/no
    replicaof    -- (host, port) of a primary, or a RedisServer
    config       -- dict of further options, passed as --name value
    """

    def __init__(self, dir, module=None, module_args=(), port=None, save="",
                 appendonly=False, appendfsync="always", aof_preamble=True,
                 replicaof=None, config=None, name="redis", start_timeout=20.0,
                 port_offsets=()):
        self.dir = os.path.abspath(dir)
        os.makedirs(self.dir, exist_ok=True)
        self.module = module
        self.module_args = list(module_args)
        self.port = port if port is not None else find_free_port(port_offsets)
        self.host = "127.0.0.1"
        self.save = save
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        self.aof_preamble = aof_preamble
        self.replicaof = replicaof
        self.config = dict(config or {})
        self.name = name
        self.start_timeout = start_timeout
        self.proc = None
        self.expected_down = True  # not running yet
        self.logfile = os.path.join(self.dir, "redis.log")
        self.stdoutfile = os.path.join(self.dir, "stdout.log")
        self._clients = []

    # ------------------------------------------------------------------ args
    def args(self):
        a = [REDIS_SERVER,
             "--port", str(self.port),
             "--bind", self.host,
             "--dir", self.dir,
             "--logfile", self.logfile,
             "--daemonize", "no",
             "--protected-mode", "no",
             "--enable-debug-command", "yes",
             "--save", self.save if self.save is not None else "",
             "--dbfilename", "dump.rdb",
             "--appendonly", "yes" if self.appendonly else "no",
             "--appendfsync", self.appendfsync,
             "--aof-use-rdb-preamble", "yes" if self.aof_preamble else "no",
             "--loglevel", "notice",
             # full syncs start at once (the default waits 5 s for more replicas)
             "--repl-diskless-sync-delay", "0"]
        if self.module:
            a += ["--loadmodule", self.module] + [str(x) for x in self.module_args]
        if self.replicaof is not None:
            if isinstance(self.replicaof, RedisServer):
                h, p = self.replicaof.host, self.replicaof.port
            else:
                h, p = self.replicaof
            a += ["--replicaof", str(h), str(p)]
        for k, v in self.config.items():
            a += ["--" + k]
            if isinstance(v, (list, tuple)):
                a += [str(x) for x in v]
            else:
                a += [str(v)]
        return a

    # ------------------------------------------------------------ lifecycle
    def start(self, wait=True):
        if self.running():
            raise RuntimeError("%s already running" % self.name)
        with open(self.stdoutfile, "ab") as out:
            self.proc = subprocess.Popen(self.args(), stdout=out, stderr=subprocess.STDOUT,
                                         cwd=self.dir, stdin=subprocess.DEVNULL)
        self.expected_down = False
        if wait:
            self.wait_ready()
        return self

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, nlines=60):
        parts = ["--- %s (port %d, dir %s) redis.log tail ---" % (self.name, self.port, self.dir),
                 tail_file(self.logfile, nlines)]
        if os.path.exists(self.stdoutfile) and os.path.getsize(self.stdoutfile) > 0:
            parts += ["--- stdout/stderr tail ---", tail_file(self.stdoutfile, 20)]
        return "\n".join(parts)

    def wait_ready(self, timeout=None):
        """Wait until the server answers PING (not LOADING)."""
        timeout = self.start_timeout if timeout is None else timeout
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.expected_down = True
                raise ServerStartError("%s exited with code %s during start-up\n%s"
                                       % (self.name, self.proc.returncode, self.log_tail()))
            try:
                c = redis.Redis(host=self.host, port=self.port, socket_timeout=2,
                                socket_connect_timeout=2)
                try:
                    if c.ping():
                        return
                finally:
                    c.close()
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as e:
                # ResponseError covers BusyLoadingError (LOADING)
                last = e
            time.sleep(0.02)
        raise ServerStartError("%s did not answer PING within %.1fs (last error: %r)\n%s"
                               % (self.name, timeout, last, self.log_tail()))

    def stop(self, timeout=20.0):
        """Graceful shutdown (SIGTERM): AOF is flushed; RDB saved only if save points exist."""
        self._close_clients()
        if self.proc is None:
            return
        self.expected_down = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def kill(self):
        """kill -9."""
        self._close_clients()
        if self.proc is None:
            return
        self.expected_down = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def restart(self, kill=False, wait=True, **changes):
        """Stop (SIGTERM, or SIGKILL with kill=True) and start again on the same
        dir and port. Keyword arguments change attributes first (e.g. appendonly)."""
        if kill:
            self.kill()
        else:
            self.stop()
        for k, v in changes.items():
            if not hasattr(self, k):
                raise AttributeError(k)
            setattr(self, k, v)
        return self.start(wait=wait)

    # -------------------------------------------------------------- clients
    def client(self, decode_responses=False, raw=False, **kw):
        """A redis-py client. raw=True: no response callbacks (replies as sent)."""
        kw.setdefault("socket_timeout", 5)
        c = redis.Redis(host=self.host, port=self.port, decode_responses=decode_responses, **kw)
        if raw:
            c.response_callbacks.clear()
        self._clients.append(c)
        return c

    def _close_clients(self):
        for c in self._clients:
            try:
                c.close()
                c.connection_pool.disconnect()
            except Exception:
                pass
        self._clients = []

    def info(self, section=None):
        c = redis.Redis(host=self.host, port=self.port, socket_timeout=10)
        c.response_callbacks.clear()  # the raw INFO text, parsed below
        try:
            raw = c.execute_command("INFO", section) if section else c.execute_command("INFO")
        finally:
            c.close()
        return parse_info(raw)

    def check_alive(self):
        """Raise ServerDiedError (with the log tail) if the process is gone."""
        if not self.running():
            rc = self.proc.returncode if self.proc else None
            raise ServerDiedError("%s is not running (exit code %s)\n%s"
                                  % (self.name, rc, self.log_tail()))

    # ------------------------------------------------------------------ AOF
    def aof_dir(self):
        return os.path.join(self.dir, self.config.get("appenddirname", "appendonlydir"))

    def wait_aof_rewrite_done(self, timeout=20.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            i = self.info("persistence")
            if (i.get("aof_rewrite_in_progress") == "0" and i.get("aof_rewrite_scheduled") == "0"
                    and i.get("loading") == "0"):
                if i.get("aof_last_bgrewrite_status", "ok") != "ok":
                    raise AssertionError("AOF rewrite failed\n" + self.log_tail())
                return i
            time.sleep(0.02)
        raise AssertionError("AOF rewrite still running after %.0fs\n%s" % (timeout, self.log_tail()))

    def save_now(self, timeout=30.0):
        """SAVE, once no RDB child runs. A replica's full sync forks one (diskless:
        after a delay), and SAVE refuses to run beside it: wait, and again if a
        child started in between."""
        deadline = time.time() + timeout
        c = self.client()
        while True:
            self.wait_bgsave_done()
            try:
                return c.execute_command("SAVE")
            except redis.ResponseError as e:
                if "in progress" not in str(e) or time.time() > deadline:
                    raise

    def wait_bgsave_done(self, timeout=20.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            i = self.info("persistence")
            if i.get("rdb_bgsave_in_progress") == "0":
                if i.get("rdb_last_bgsave_status", "ok") != "ok":
                    raise AssertionError("BGSAVE failed\n" + self.log_tail())
                return i
            time.sleep(0.02)
        raise AssertionError("BGSAVE still running after %.0fs\n%s" % (timeout, self.log_tail()))

    def __repr__(self):
        return "<RedisServer %s port=%d dir=%s>" % (self.name, self.port, self.dir)


# ----------------------------------------------------------------- replication
class ConfigFileServer(RedisServer):
    """A server started as `redis-server <file> --options...`: the config file
    first, as a packaged or installed redis.conf is used."""

    def __init__(self, conf, **kw):
        super().__init__(**kw)
        self.conf = conf

    def args(self):
        a = super().args()
        return a[:1] + [self.conf] + a[1:]


def resync_replica_now(replica, primary):
    """Have a replica whose primary restarted reconnect now, rather than at its
    next once-a-second retry (REPLICAOF NO ONE, then the primary again)."""
    c = replica.client()
    try:
        assert c.execute_command("REPLICAOF", "NO", "ONE")
        assert c.execute_command("REPLICAOF", primary.host, primary.port)
    finally:
        c.connection_pool.disconnect()


def wait_replica_link(replica, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        replica.check_alive()
        i = replica.info("replication")
        if i.get("role") == "slave" and i.get("master_link_status") == "up" \
                and i.get("master_sync_in_progress", "0") == "0":
            return
        time.sleep(0.02)
    raise AssertionError("replica %s: master_link_status not up after %.0fs\n%s"
                         % (replica.name, timeout, replica.log_tail()))


def wait_until(pred, what, timeout=15.0):
    """Poll pred() (a state: a waiter queued, a lease ended, a replica caught up)
    until it is truthy and return its value; fail naming `what` after `timeout`
    seconds. The polling only waits for the state, it orders nothing."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.005)
    raise AssertionError("timed out waiting for: " + what)


def read_reply(conn):
    """The reply to a command sent on the redis-py Connection `conn`; an error reply
    is returned, not raised (the model tests compare it with what they expect)."""
    try:
        return conn.read_response()
    except redis.ResponseError as e:
        return e


def wait_replicas_synced(primary, replicas, timeout=20.0):
    """Wait until every replica's link is up, WAIT acknowledges them, and the
    replication offsets match the primary's."""
    for r in replicas:
        wait_replica_link(r, timeout)
    c = redis.Redis(host=primary.host, port=primary.port, socket_timeout=timeout + 5)
    try:
        n = c.execute_command("WAIT", len(replicas), 5000)
        if n < len(replicas):
            raise AssertionError("WAIT %d 5000 acknowledged only %d replicas\n%s"
                                 % (len(replicas), n, primary.log_tail()))
    finally:
        c.close()
    deadline = time.time() + timeout
    while time.time() < deadline:
        p_off = primary.info("replication").get("master_repl_offset")
        offs = [r.info("replication").get("master_repl_offset") for r in replicas]
        if all(o == p_off for o in offs):
            # the primary may have sent something (e.g. a PING) meanwhile
            if primary.info("replication").get("master_repl_offset") == p_off:
                return
        time.sleep(0.02)
    raise AssertionError("replication offsets do not match after %.0fs: primary %s, replicas %s"
                         % (timeout, p_off, offs))


# ---------------------------------------------------------------- the manager
class ServerManager:
    """Creates servers under one base directory and stops them all at cleanup.

    ``module`` / ``module_args``: what ``new()`` loads by default. The default
    ``module_args`` apply only to the default module: ``new(module_args=())``
    starts a server with the default module and no arguments, ``new(module=...)``
    loads another module with the arguments given there (none unless given)."""

    def __init__(self, module=None, base_dir=None, prefix="redis", module_args=()):
        self.module = module
        self.module_args = list(module_args)
        self.base_dir = base_dir or tempfile.mkdtemp(prefix="redis-servers-")
        self.prefix = prefix
        self.servers = []
        self._n = 0

    def new(self, start=True, name=None, dir=None, module="default", **kw):
        self._n += 1
        name = name or "%s-%d" % (self.prefix, self._n)
        dir = dir or os.path.join(self.base_dir, name)
        if module == "default":
            module = self.module
            kw.setdefault("module_args", self.module_args)
        s = RedisServer(dir, module=module, name=name, **kw)
        self.servers.append(s)
        if start:
            s.start()
        return s

    def replica_of(self, primary, wait=True, **kw):
        r = self.new(replicaof=primary, name=kw.pop("name", None) or primary.name + "-replica",
                     **kw)
        if wait:
            wait_replicas_synced(primary, [r])
        return r

    def died_unexpectedly(self):
        return [s for s in self.servers
                if s.proc is not None and not s.expected_down and s.proc.poll() is not None]

    def log_tails(self, nlines=40):
        return "\n".join(s.log_tail(nlines) for s in self.servers if s.proc is not None)

    def stop_all(self):
        """Stop every server. Returns the servers that had died by themselves."""
        dead = self.died_unexpectedly()
        for s in self.servers:
            try:
                s.kill()
            except Exception:
                pass
        return dead


# ------------------------------------------------------------- raw RESP access
def resp_encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RawConnection:
    """A plain socket speaking RESP2, returning replies as the exact wire bytes."""

    def __init__(self, host, port, timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.f = self.sock.makefile("rb")

    def close(self):
        try:
            self.f.close()
        finally:
            self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def _line(self):
        line = self.f.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed in the middle of a reply: %r" % line)
        return line

    def read_reply(self):
        """One whole reply, as raw bytes."""
        line = self._line()
        t = line[:1]
        if t in (b"+", b"-", b":", b"_", b",", b"#", b"("):
            return line
        if t in (b"$", b"!", b"="):
            n = int(line[1:-2])
            if n < 0:
                return line
            data = self.f.read(n + 2)
            return line + data
        if t in (b"*", b"~", b">", b"%", b"|"):
            n = int(line[1:-2])
            if n < 0:
                return line
            if t in (b"%", b"|"):
                n *= 2
            return line + b"".join(self.read_reply() for _ in range(n))
        raise ValueError("unexpected RESP type: %r" % line)

    def command(self, *args):
        self.sock.sendall(resp_encode(*args))
        return self.read_reply()


def raw_command(server, *args):
    with RawConnection(server.host, server.port) as c:
        return c.command(*args)
