# SPDX-License-Identifier: BSD-3-Clause
"""A small Redis Cluster harness for the mcaptcha-cache integration tests.

``Cluster`` starts 3 primaries + 3 replicas (``redis-server`` on 127.0.0.1,
each in its own directory, cluster bus port = port + 10000 reserved free as
well) with the module loaded, joins them with ``redis-cli --cluster create
... --cluster-replicas 1 --cluster-yes`` and waits until every node reports
``cluster_state:ok``, every node agrees on who owns which slot, and every
replica is in sync. The servers come from ``servers.py`` (``ServerManager`` /
``RedisServer``), so every process is killed by ``Cluster.stop()``.

The pytest fixture ``redis_cluster`` (module-scoped) yields a started
``Cluster``; it always stops every node at teardown, also when a test or the
start-up fails. Its ``client`` is a redis-py ``RedisCluster`` with
``decode_responses=True``.

Also here: ``key_slot`` (CRC16-XMODEM with the hash-tag rule of the Redis
Cluster specification, written from the specification and cross-checked
against ``CLUSTER KEYSLOT`` by the tests) and helpers to find names that hash
to given slots.
"""

import os
import subprocess
import tempfile
import time
from binascii import crc_hqx

import pytest
import redis
from redis.cluster import RedisCluster

from servers import ServerManager, parse_info

REDIS_CLI = os.environ.get("REDIS_CLI", "/usr/bin/redis-cli")
NSLOTS = 16384


# ------------------------------------------------------------------ hash slots
def _bytes(x):
    if isinstance(x, bytes):
        return x
    if isinstance(x, int):
        return str(x).encode()
    return x.encode()


def key_slot(key):
    """Hash slot of `key`: CRC16-XMODEM (binascii.crc_hqx with init 0) of the
    hash tag -- the bytes between the first '{' and the first '}' after it, if
    that span is non-empty -- or else of the whole key, modulo 16384."""
    k = _bytes(key)
    open_ = k.find(b"{")
    if open_ >= 0:
        close = k.find(b"}", open_ + 1)
        if close > open_ + 1:
            k = k[open_ + 1:close]
    return crc_hqx(k, 0) % NSLOTS


def captcha_key(name):
    return b"mcap:captcha::{" + _bytes(name) + b"}"


def challenge_key(name, challenge):
    return b"mcap:CHALLENGE:{" + _bytes(name) + b"}:" + _bytes(challenge)


def name_slot_agrees(name):
    """True when the derived captcha key hashes to the slot of the name itself."""
    return key_slot(captcha_key(name)) == key_slot(name)


def names_in_slots(slots, per_slot, prefix="n"):
    """{slot: [per_slot names "<prefix><i>" whose hash slot is that slot]}.

    One linear scan; about 16384 * per_slot names are hashed (fast: crc_hqx is C)."""
    want = {s: [] for s in slots}
    left = len(want) * per_slot
    i = 0
    while left:
        n = "%s%d" % (prefix, i)
        s = key_slot(n)
        lst = want.get(s)
        if lst is not None and len(lst) < per_slot:
            lst.append(n)
            left -= 1
        i += 1
        if i > 50_000_000:  # pragma: no cover
            raise RuntimeError("could not find names for slots %r" % (slots,))
    return want


# --------------------------------------------------------------------- errors
class ClusterError(AssertionError):
    pass


# -------------------------------------------------------------------- cluster
class Cluster:
    """3 primaries with one replica each, module loaded on every node."""

    def __init__(self, module, base_dir=None, primaries=3, replicas_per_primary=1,
                 node_timeout_ms=2000):
        self.module = module
        self.base_dir = base_dir or tempfile.mkdtemp(prefix="redis-cluster-")
        self.nprimaries = primaries
        self.nreplicas = replicas_per_primary
        self.node_timeout_ms = node_timeout_ms
        # the internal commands open to clients, as for the standalone fixtures (conftest.py)
        self.mgr = ServerManager(module=module, base_dir=self.base_dir, prefix="node",
                                 module_args=("INTERNAL-COMMANDS", "yes"))
        self.nodes = []          # RedisServer, in start order
        self._client = None
        self._conns = {}
        self.create_output = ""

    # ----------------------------------------------------------- lifecycle
    def start(self, timeout=60.0):
        n = self.nprimaries * (1 + self.nreplicas)
        config = {
            "cluster-enabled": "yes",
            "cluster-config-file": "nodes.conf",
            "cluster-node-timeout": str(self.node_timeout_ms),
            # full syncs start at once instead of waiting 5 s for more replicas
            "repl-diskless-sync-delay": "0",
        }
        for i in range(n):
            # servers.py already passes --enable-debug-command yes, --save "" and
            # --appendonly no (save="", appendonly=False are its defaults)
            s = self.mgr.new(name="node-%d" % i, start=False, config=config, save="",
                             appendonly=False, port_offsets=(10000,))
            self.nodes.append(s)
        for s in self.nodes:
            s.start(wait=False)
        for s in self.nodes:
            s.wait_ready()
        args = [REDIS_CLI, "--cluster", "create"]
        args += ["%s:%d" % (s.host, s.port) for s in self.nodes]
        args += ["--cluster-replicas", str(self.nreplicas), "--cluster-yes"]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout)
        self.create_output = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0 or "[OK] All 16384 slots covered" not in self.create_output:
            raise ClusterError("redis-cli --cluster create failed (exit %d):\n%s\n%s"
                               % (p.returncode, self.create_output, self.log_tails()))
        self.wait_stable(timeout=timeout)
        return self

    def stop(self):
        """Kill every node. Returns the nodes that had died by themselves."""
        if self._client is not None:
            try:
                self._client.close()
            except Exception:
                pass
            self._client = None
        for c in self._conns.values():
            try:
                c.close()
                c.connection_pool.disconnect()
            except Exception:
                pass
        self._conns = {}
        return self.mgr.stop_all()

    def died_unexpectedly(self):
        return self.mgr.died_unexpectedly()

    def log_tails(self, nlines=25):
        return self.mgr.log_tails(nlines)

    def check_alive(self):
        dead = self.died_unexpectedly()
        if dead:
            raise ClusterError("node(s) died:\n" + "\n".join(s.log_tail(60) for s in dead))

    # ------------------------------------------------------------- clients
    @property
    def client(self):
        """The shared RedisCluster client (decode_responses=True)."""
        if self._client is None:
            self._client = self.new_client()
        return self._client

    def new_client(self, **kw):
        kw.setdefault("decode_responses", True)
        kw.setdefault("socket_timeout", 10)
        s = self.nodes[0]
        for s in self.nodes:
            if s.running():
                break
        return RedisCluster(host=s.host, port=s.port, **kw)

    def conn(self, node, decode_responses=True):
        """A plain (non-cluster) client of one node (cached; closed by stop())."""
        k = (node.port, decode_responses)
        c = self._conns.get(k)
        if c is None:
            c = redis.Redis(host=node.host, port=node.port, decode_responses=decode_responses,
                            socket_timeout=10, socket_connect_timeout=5)
            self._conns[k] = c
        return c

    # ------------------------------------------------------------ topology
    def by_port(self, port):
        for s in self.nodes:
            if s.port == int(port):
                return s
        raise KeyError(port)

    def node_id(self, node):
        return self.conn(node).execute_command("CLUSTER", "MYID")

    def cluster_nodes(self, node):
        """Parsed CLUSTER NODES as seen by `node`: list of dicts with id, port,
        flags (set), master (id or None), slots (set of ints), open (list of
        '[slot->-id]' / '[slot-<-id]' entries)."""
        text = self.conn(node).execute_command("CLUSTER", "NODES")
        out = []
        for line in text.strip().splitlines():
            f = line.split()
            addr = f[1].split("@")[0]
            port = int(addr.rsplit(":", 1)[1]) if ":" in addr and addr.rsplit(":", 1)[1] else 0
            slots, open_ = set(), []
            for item in f[8:]:
                if item.startswith("["):
                    open_.append(item)
                elif "-" in item:
                    a, b_ = item.split("-")
                    slots.update(range(int(a), int(b_) + 1))
                else:
                    slots.add(int(item))
            out.append({"id": f[0], "port": port, "flags": set(f[2].split(",")),
                        "master": None if f[3] == "-" else f[3],
                        "link": f[7], "slots": slots, "open": open_})
        return out

    def topology(self, node=None):
        """(primaries, replica_of) from the point of view of `node` (default: any
        running one). primaries: list of RedisServer owning slots; replica_of:
        {primary port: [replica RedisServer]}."""
        view = self.cluster_nodes(node or self._any_running())
        primaries, replica_of = [], {}
        by_id = {e["id"]: e for e in view}
        for e in view:
            if "master" in e["flags"] and e["slots"]:
                primaries.append(self.by_port(e["port"]))
        for e in view:
            if "slave" in e["flags"] and e["master"] in by_id:
                replica_of.setdefault(by_id[e["master"]]["port"], []).append(
                    self.by_port(e["port"]))
        primaries.sort(key=lambda s: min(by_id[self._id_of(view, s)]["slots"]))
        return primaries, replica_of

    @staticmethod
    def _id_of(view, node):
        for e in view:
            if e["port"] == node.port:
                return e["id"]
        raise KeyError(node.port)

    def primaries(self):
        return self.topology()[0]

    def replicas_of(self, primary):
        return self.topology()[1].get(primary.port, [])

    def slots_of(self, node):
        """Slots owned by `node` (a primary), as seen by itself."""
        for e in self.cluster_nodes(node):
            if "myself" in e["flags"]:
                return sorted(e["slots"])
        raise KeyError(node.port)

    def owner_of_slot(self, slot):
        view = self.cluster_nodes(self._any_running())
        for e in view:
            if "master" in e["flags"] and slot in e["slots"]:
                return self.by_port(e["port"])
        raise ClusterError("no node owns slot %d" % slot)

    def owner_of(self, name):
        """The primary that owns the slot of `name`."""
        return self.owner_of_slot(key_slot(name))

    def _any_running(self):
        for s in self.nodes:
            if s.running():
                return s
        raise ClusterError("no node is running")

    # ---------------------------------------------------------------- waits
    def _state(self):
        """None when the cluster is stable, else a description of what is not."""
        views = {}
        for s in self.nodes:
            if not s.running():
                continue
            info = parse_info(self.conn(s).execute_command("CLUSTER", "INFO"))
            if info.get("cluster_state") != "ok":
                return "node %d: cluster_state:%s" % (s.port, info.get("cluster_state"))
            if info.get("cluster_slots_assigned") != str(NSLOTS) or \
                    info.get("cluster_slots_ok") != str(NSLOTS):
                return "node %d: slots assigned %s ok %s" % (
                    s.port, info.get("cluster_slots_assigned"), info.get("cluster_slots_ok"))
            view = self.cluster_nodes(s)
            for e in view:
                if "fail" in e["flags"] or "fail?" in e["flags"] or "handshake" in e["flags"]:
                    return "node %d sees %d as %s" % (s.port, e["port"], ",".join(e["flags"]))
                if e["open"]:
                    return "node %d has open slots %s" % (e["port"], e["open"])
            # who owns what, and who replicates whom, must be the same everywhere
            views[s.port] = sorted(
                (e["port"], "master" if "master" in e["flags"] else "slave",
                 e["master"] and self._port_of(view, e["master"]), tuple(sorted(e["slots"])))
                for e in view)
        distinct = {repr(v) for v in views.values()}
        if len(distinct) != 1:
            return "nodes do not agree on the configuration"
        return None

    @staticmethod
    def _port_of(view, node_id):
        for e in view:
            if e["id"] == node_id:
                return e["port"]
        return None

    def wait_stable(self, timeout=30.0):
        """Wait until every running node says cluster_state:ok, all agree on the
        slot owners and roles, no slot is open, and every replica is in sync
        with its primary."""
        deadline = time.time() + timeout
        why = None
        while time.time() < deadline:
            self.check_alive()
            try:
                why = self._state()
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as e:
                why = repr(e)
            if why is None:
                break
            time.sleep(0.05)
        else:
            raise ClusterError("cluster not stable after %.0fs: %s\n%s"
                               % (timeout, why, self.describe()))
        primaries, replica_of = self.topology()
        for p in primaries:
            reps = replica_of.get(p.port, [])
            if len(reps) != self.nreplicas:
                raise ClusterError("primary %d has replicas %r\n%s"
                                   % (p.port, [r.port for r in reps], self.describe()))
            self.wait_replicas_synced(p, reps, timeout=max(1.0, deadline - time.time()))
        return self

    def _info(self, node, section):
        # redis-py already parses INFO into a dict
        return self.conn(node).info(section)

    def wait_replicas_synced(self, primary, replicas, timeout=20.0):
        """Wait until every replica's link is up, WAIT acknowledges them, and
        their replication offsets equal the primary's.

        (servers.wait_replicas_synced is not used: its RedisServer.info() hands
        redis-py's already parsed INFO dict to parse_info() and fails.)"""
        deadline = time.time() + timeout
        for r in replicas:
            while True:
                self.check_alive()
                i = self._info(r, "replication")
                if i.get("role") == "slave" and i.get("master_link_status") == "up" \
                        and str(i.get("master_sync_in_progress", 0)) == "0" \
                        and int(i.get("master_port", 0)) == primary.port:
                    break
                if time.time() > deadline:
                    raise ClusterError("replica %d of %d: link not up after %.0fs: %r\n%s"
                                       % (r.port, primary.port, timeout, i, self.describe()))
                time.sleep(0.02)
        n = self.conn(primary).execute_command("WAIT", len(replicas), 5000)
        if n < len(replicas):
            raise ClusterError("WAIT %d 5000 on %d acknowledged only %d replicas\n%s"
                               % (len(replicas), primary.port, n, self.describe()))
        while True:
            p_off = self._info(primary, "replication").get("master_repl_offset")
            offs = [self._info(r, "replication").get("master_repl_offset") for r in replicas]
            if all(o == p_off for o in offs) and \
                    self._info(primary, "replication").get("master_repl_offset") == p_off:
                return
            if time.time() > deadline:
                raise ClusterError("replication offsets differ after %.0fs: primary %d %s, "
                                   "replicas %s\n%s" % (timeout, primary.port, p_off, offs,
                                                         self.describe()))
            time.sleep(0.02)

    def describe(self):
        """CLUSTER NODES of one node plus the log tails of all (for failures)."""
        parts = []
        try:
            parts.append(self.conn(self._any_running()).execute_command("CLUSTER", "NODES"))
        except Exception as e:
            parts.append("<CLUSTER NODES failed: %r>" % e)
        parts.append(self.log_tails())
        return "\n".join(parts)

    # ---------------------------------------------------------- operations
    def reshard(self, src, dst, nslots, timeout=60.0):
        """`redis-cli --cluster reshard` of `nslots` slots from src to dst (it takes
        src's lowest-numbered slots). Returns redis-cli's output."""
        args = [REDIS_CLI, "--cluster", "reshard", "%s:%d" % (src.host, src.port),
                "--cluster-from", self.node_id(src), "--cluster-to", self.node_id(dst),
                "--cluster-slots", str(nslots), "--cluster-yes"]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=timeout)
        out = p.stdout.decode("utf-8", "replace")
        if p.returncode != 0 or "[ERR]" in out:
            raise ClusterError("redis-cli --cluster reshard failed (exit %d):\n%s\n%s"
                               % (p.returncode, out, self.describe()))
        return out

    def migrate_slot_by_hand(self, slot, src, dst, between=None):
        """Move one slot with CLUSTER SETSLOT IMPORTING/MIGRATING, MIGRATE of every
        key, then SETSLOT NODE on dst, src and every other primary. Returns the
        number of keys moved.

        between(stage) is called with "open" once both sides are set (before any
        key moved) and with "moved" after the keys were migrated (before the slot
        is handed over). If anything fails (`between`, or MIGRATE -- e.g. BUSYKEY
        because dst already holds a key of that name), the slot is still handed
        over -- remaining keys are moved with MIGRATE ... REPLACE -- so that the
        cluster stays usable, and the first error is raised."""
        sc, dc = self.conn(src), self.conn(dst)
        src_id, dst_id = self.node_id(src), self.node_id(dst)
        dc.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        sc.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        moved = 0

        def move_all(replace):
            n = 0
            while True:
                keys = sc.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100)
                if not keys:
                    return n
                opt = ["REPLACE"] if replace else []
                sc.execute_command("MIGRATE", dst.host, dst.port, "", 0, 5000, *opt,
                                   "KEYS", *keys)
                n += len(keys)

        try:
            if between:
                between("open")
            moved = move_all(replace=False)
            if between:
                between("moved")
        except BaseException as e:
            try:
                move_all(replace=True)
            except Exception as e2:
                raise ClusterError("migrating slot %d failed (%r), and so did MIGRATE REPLACE "
                                   "(%r)\n%s" % (slot, e, e2, self.describe())) from e
            raise
        finally:
            dc.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
            sc.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
            for p in self.primaries():
                if p.port not in (src.port, dst.port):
                    try:
                        self.conn(p).execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
                    except redis.ResponseError:
                        pass
        return moved

    def failover(self, replica, timeout=30.0):
        """CLUSTER FAILOVER on `replica`; wait until it is a primary, its old
        primary a replica of it, and the cluster stable."""
        old_primaries = {p.port for p in self.primaries()}
        self.conn(replica).execute_command("CLUSTER", "FAILOVER")
        deadline = time.time() + timeout
        while time.time() < deadline:
            self.check_alive()
            role = self.conn(replica).execute_command("ROLE")[0]
            if role == "master":
                prims = {p.port for p in self.primaries()}
                if replica.port in prims and len(prims & old_primaries) == self.nprimaries - 1:
                    break
            time.sleep(0.05)
        else:
            raise ClusterError("failover to %d did not happen within %.0fs\n%s"
                               % (replica.port, timeout, self.describe()))
        self.wait_stable(timeout=max(5.0, deadline - time.time()))

    def dbsizes(self, nodes=None):
        return {s.port: self.conn(s).dbsize() for s in (nodes or self.nodes) if s.running()}

    def flush(self):
        """FLUSHALL on every primary; wait until the replicas have it."""
        for p in self.primaries():
            self.conn(p).flushall()
        self.wait_stable()


# --------------------------------------------------------------------- fixture
def _module_path():
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(os.path.dirname(os.path.dirname(here)), "build", "mcaptcha_cache.so")
    return os.path.abspath(os.environ.get("MCAPTCHA_MODULE") or default)


@pytest.fixture(scope="module")
def redis_cluster(tmp_path_factory):
    """A started 3x2 Cluster with the module; every node is killed at teardown.
    A node that died by itself fails the teardown with its log tail."""
    module = _module_path()
    if not os.path.isfile(module):
        pytest.fail("module not found: %s (build it with `make`, or set MCAPTCHA_MODULE)"
                    % module, pytrace=False)
    base = str(tmp_path_factory.mktemp("cluster"))
    c = Cluster(module, base_dir=base)
    try:
        c.start()
    except BaseException:
        c.stop()
        raise
    try:
        yield c
    finally:
        dead = c.stop()
        if dead:
            pytest.fail("cluster node(s) died during the tests (crash?):\n"
                        + "\n".join(s.log_tail(60) for s in dead), pytrace=False)
