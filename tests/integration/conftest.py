# SPDX-License-Identifier: BSD-3-Clause
"""pytest fixtures for the mcaptcha-cache integration tests.

The module is read from $MCAPTCHA_MODULE, default <repo root>/build/mcaptcha_cache.so.
A missing module fails every test at setup (it does not skip).

Servers load it with INTERNAL_ARGS (the internal commands open to clients, so
tests may write exact states with LOCK.STATE, RL.GCRA_SET, ...); a test of the
default refusal starts its server with ``servers.new(module_args=())``.
"""

import os

import logging

import pytest

from servers import ServerManager, wait_replicas_synced

# The load option that lets clients call the internal commands (server/internal.h).
INTERNAL_ARGS = ("INTERNAL-COMMANDS", "yes")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_MODULE = os.path.join(REPO_ROOT, "build", "mcaptcha_cache.so")


def _module_path():
    return os.path.abspath(os.environ.get("MCAPTCHA_MODULE") or DEFAULT_MODULE)


@pytest.fixture(scope="session")
def module_path():
    p = _module_path()
    if not os.path.isfile(p):
        pytest.fail("module not found: %s (build it with `make` in %s, or set MCAPTCHA_MODULE)"
                    % (p, REPO_ROOT), pytrace=False)
    return p


# --------------------------------------------------------- failure reporting
_MANAGERS_KEY = "_redis_managers"


def _register_manager(node, mgr):
    lst = getattr(node, _MANAGERS_KEY, None)
    if lst is None:
        lst = []
        setattr(node, _MANAGERS_KEY, lst)
    lst.append(mgr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and rep.when in ("call", "setup", "teardown"):
        tails = []
        for mgr in getattr(item, _MANAGERS_KEY, []):
            try:
                t = mgr.log_tails(25)
            except Exception as e:  # pragma: no cover
                t = "<no logs: %r>" % e
            if t:
                tails.append(t)
        if tails:
            rep.sections.append(("redis server logs", "\n".join(tails)))


def _finish(mgr):
    dead = mgr.stop_all()
    if dead:
        pytest.fail("redis-server died during the test (crash?):\n"
                    + "\n".join(s.log_tail(60) for s in dead), pytrace=False)


# ----------------------------------------------------------------- factories
@pytest.fixture
def servers(module_path, tmp_path, request):
    """A ServerManager for this test: servers.new(**options) starts one.
    Every server is killed at teardown; one that died by itself fails the test."""
    mgr = ServerManager(module=module_path, base_dir=str(tmp_path / "servers"), module_args=INTERNAL_ARGS)
    _register_manager(request.node, mgr)
    yield mgr
    _finish(mgr)


class _SharedServer:
    def __init__(self, module_path, base_dir):
        self.mgr = ServerManager(module=module_path, base_dir=base_dir, prefix="shared",
                                 module_args=INTERNAL_ARGS)
        self.server = None

    def get(self):
        if self.server is None or not self.server.running():
            self.server = self.mgr.new()
        return self.server


@pytest.fixture(scope="module")
def _shared_server(module_path, tmp_path_factory):
    sh = _SharedServer(module_path, str(tmp_path_factory.mktemp("shared")))
    yield sh
    sh.mgr.stop_all()


@pytest.fixture
def server(_shared_server, request):
    """A plain standalone server (shared by the tests of one file), empty at start."""
    s = _shared_server.get()
    _register_manager(request.node, _shared_server.mgr)
    s.client().flushall()
    yield s
    if not s.running():
        s.expected_down = True  # a new one is started for the next test
        pytest.fail("the shared redis-server died during this test:\n" + s.log_tail(60),
                    pytrace=False)


@pytest.fixture
def r(server):
    """A client (bytes replies) of `server`."""
    return server.client()


@pytest.fixture
def replica_pair(servers):
    """(primary, replica), linked and in sync."""
    primary = servers.new(name="primary")
    replica = servers.replica_of(primary, name="replica")
    return primary, replica


@pytest.fixture
def aof_server(servers):
    """Factory: aof_server(preamble=True|False, **options) -> a started server with
    appendonly yes, appendfsync always, whose start-up AOF rewrite has finished."""

    def make(preamble=True, **kw):
        kw.setdefault("appendfsync", "always")
        s = servers.new(appendonly=True, aof_preamble=preamble, **kw)
        s.wait_aof_rewrite_done()
        return s

    return make


@pytest.fixture
def sync():
    """sync(primary, replica...) waits until the replicas have everything."""

    def do(primary, *replicas):
        wait_replicas_synced(primary, list(replicas))

    return do


# A 6-node Redis Cluster (cluster.py), one per test file that uses it.
from cluster import redis_cluster  # noqa: E402,F401 (fixture)


@pytest.fixture
def cluster(redis_cluster, request):
    """The shared cluster, flushed and stable; its log tails go into failure reports."""
    _register_manager(request.node, redis_cluster)
    # redis-py logs every redirect it retries (MOVED/ASK) with a traceback at
    # ERROR level; the tests record what reaches the caller themselves
    log = logging.getLogger("redis.cluster")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        redis_cluster.flush()
        yield redis_cluster
        redis_cluster.check_alive()
    finally:
        log.setLevel(level)
