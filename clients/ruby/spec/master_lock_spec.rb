# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# spec/master_lock_spec.rb -- MasterLock's documented behaviour, example by example (the
# gem's own specs and YARD docs), on a standalone server and on a Redis Cluster; plus what
# the module adds (fencing tokens, FIFO waiting on the server, the key's type).
require_relative "spec_helper"
require "mcaptcha_cache/master_lock"
require "stringio"

RSpec.shared_examples "MasterLock" do
  let(:log) { StringIO.new }

  before do
    MasterLock.configure do |config|
      config.redis = client
      config.sleep_time = 0.025
      config.logger = Logger.new(log)
      config.logger.level = :debug
    end
    MasterLock.start
  end

  it "does not allow a lock to be acquired multiple times" do
    MasterLock.synchronize("test") do
      expect { MasterLock.synchronize("test", acquire_timeout: 0) {} }.to raise_error(MasterLock::LockNotAcquiredError)
    end
  end

  it "refuses a nested synchronize on the same key in the same thread (one owner per thread), at once" do
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    MasterLock.synchronize("test") do
      expect { MasterLock.synchronize("test", acquire_timeout: 2) {} }.to raise_error(MasterLock::LockNotAcquiredError)
    end
    expect(Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0).to be < 1.5
  end

  it "allows a lock to be acquired after it was released" do
    MasterLock.synchronize("test") {}
    expect { MasterLock.synchronize("test", acquire_timeout: 0) {} }.not_to raise_error
  end

  it "releases the lock when the block raises" do
    expect { MasterLock.synchronize("test") { raise "boom" } }.to raise_error(RuntimeError, "boom")
    expect { MasterLock.synchronize("test", acquire_timeout: 0) {} }.not_to raise_error
  end

  it "extends held locks automatically" do
    MasterLock.synchronize("test", ttl: 0.6, extend_interval: 0.05) do
      # hold it for 2.5 times its ttl: the renewals keep it
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 1.5
      wait_until(what: "2.5 ttl") { Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline }
      expect { MasterLock.synchronize("test", acquire_timeout: 0) {} }.to raise_error(MasterLock::LockNotAcquiredError)
      expect(client.call("LOCK.INSPECT", "masterlock:test")[3][0][1]).to be > 0
    end
  end

  it "lets a lock expire when its thread dies without releasing it" do
    t = Thread.new do
      MasterLock.synchronize("test", ttl: 0.3, extend_interval: 0.05) { Thread.current.kill }
    end
    t.join
    # the kill ran the ensure: released at once
    expect { MasterLock.synchronize("test", acquire_timeout: 0) {} }.not_to raise_error
  end

  it "waits on the server for the holder's release (first come, first served)" do
    order = Queue.new
    holder_in = Queue.new
    go = Queue.new
    holder = Thread.new { MasterLock.synchronize("fifo") { holder_in << 1; go.pop; order << :holder } }
    holder_in.pop
    waiters = %i[w1 w2].map do |w|
      th = Thread.new { MasterLock.synchronize("fifo", acquire_timeout: 10) { order << w } }
      wait_until(what: "#{w} queued") { client.call("LOCK.INSPECT", "masterlock:fifo")[2] == (w == :w1 ? 1 : 2) }
      th
    end
    go << 1
    [holder, *waiters].each(&:join)
    expect(Array.new(3) { order.pop }).to eq %i[holder w1 w2]
  end

  it "raises LockNotAcquiredError after acquire_timeout while another thread holds it" do
    inside = Queue.new
    done = Queue.new
    t = Thread.new { MasterLock.synchronize("test") { inside << 1; done.pop } }
    inside.pop
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    expect { MasterLock.synchronize("test", acquire_timeout: 0.3) {} }.to raise_error(MasterLock::LockNotAcquiredError)
    expect(Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0).to be >= 0.29
    done << 1
    t.join
  end

  describe ".synchronize" do
    it "returns the result of the block" do
      expect(MasterLock.synchronize("test") { 42 }).to eq 42
    end

    it "gives a block that takes an argument the fencing token, larger at each grant" do
      a = MasterLock.synchronize("test") { |token| token }
      b = MasterLock.synchronize("test") { |token| token }
      expect(a).to be_a(Integer)
      expect(b).to be > a
    end

    it "raises an ArgumentError when ttl is less than extend_interval" do
      expect { MasterLock.synchronize("test", ttl: 1, extend_interval: 2) {} }.to raise_error(ArgumentError)
    end

    it "raises an ArgumentError when ttl equals extend_interval" do
      expect { MasterLock.synchronize("test", ttl: 2, extend_interval: 2) {} }.to raise_error(ArgumentError)
    end

    it "raises an ArgumentError when extend_interval is negative" do
      expect { MasterLock.synchronize("test", extend_interval: -1) {} }.to raise_error(ArgumentError)
    end

    context "when the :if option is false" do
      it "does not obtain the lock" do
        MasterLock.synchronize("test_lock", if: false, acquire_timeout: 0) do
          expect { MasterLock.synchronize("test_lock", if: true, acquire_timeout: 0) {} }.not_to raise_error
        end
      end

      it "returns the result of the block" do
        expect(MasterLock.synchronize("test_lock", if: false) { 42 }).to eq 42
      end
    end

    context "when the :unless option is true" do
      it "does not obtain the lock" do
        MasterLock.synchronize("test_lock", unless: true, acquire_timeout: 0) do
          expect(client.exists?("masterlock:test_lock")).to be false
        end
      end
    end

    it "holds the lock on the key key_prefix:key, a module type (GET answers WRONGTYPE)" do
      MasterLock.synchronize("test") do
        expect(client.call("TYPE", "masterlock:test")).to eq "mcap-lock"
        expect { client.get("masterlock:test") }.to raise_error(Redis::CommandError, /WRONGTYPE/)
        owner = client.call("LOCK.INSPECT", "masterlock:test")[3][0][0]
        expect(owner).to eq "#{MasterLock.config.hostname}:#{Process.pid}:#{Thread.current.object_id}"
      end
      expect(client.call("LOCK.INSPECT", "masterlock:test")[3]).to eq []
    end

    it "logs an error when the lease was lost while the block ran" do
      MasterLock.synchronize("test", ttl: 0.5, extend_interval: 0.05) do
        client.del("masterlock:test")
        wait_until(what: "the loss logged") { log.string.include?("Lost lock test") }
      end
      expect(log.string).to include("Failed to release lock test")
    end
  end

  describe MasterLock::RedisLock do
    # The gem's specs use a 0.1 s ttl; here the leases outlive every example (10 s), so an
    # example that needs the lock held never finds it expired on a slow machine. The one
    # about a lease ending (#acquire waits for it) takes a short lease of its own.
    let(:lock1) { described_class.new(config: MasterLock.config, key: "key", owner: "owner1", ttl: 10) }
    let(:lock2) { described_class.new(config: MasterLock.config, key: "key", owner: "owner2", ttl: 10) }

    # Calls of LOCK.ACQUIRE so far, summed over the servers the client uses.
    def acquire_calls
      ports = client._client.is_a?(Redis::Cluster) ? TestServers.cluster : [TestServers.standalone]
      ports.sum do |p|
        Redis.new(port: p, host: "127.0.0.1").call("INFO", "commandstats")[/cmdstat_LOCK\.ACQUIRE:calls=(\d+)/, 1].to_i
      end
    end

    describe "#acquire" do
      it "returns true when lock can be acquired" do
        expect(lock1.acquire(timeout: 0)).to eq true
      end

      it "returns false when lock can not be acquired" do
        expect(lock1.acquire(timeout: 0)).to eq true
        expect(lock2.acquire(timeout: 0)).to eq false
      end

      it "returns false if the same owner already has the lock" do
        expect(lock1.acquire(timeout: 0)).to eq true
        expect(lock1.acquire(timeout: 0)).to eq false
      end

      it "waits for the lock until timeout (here: the holder's lease ends)" do
        holder = described_class.new(config: MasterLock.config, key: "key", owner: "owner1", ttl: 0.5)
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        expect(holder.acquire(timeout: 0)).to eq true
        # the timeout only bounds the wait from above: generous, so a loaded machine does not
        # run it out; the grant comes when the 0.5 s lease ends, not before (a lower bound,
        # which load cannot break)
        expect(lock2.acquire(timeout: 10)).to eq true
        expect(Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0).to be >= 0.49
        expect(client.call("LOCK.INSPECT", "masterlock:key")[3].map(&:first)).to eq ["owner2"]
      end

      it "waits on the server in rounds shorter than the client's read timeout" do
        # A 1.5 s read timeout: rounds of 1.2 s, so the server's answer at a round's end has
        # 300 ms to arrive before the read times out (with 0.5 s: 100 ms, too little on a
        # loaded machine). The wait, 3.2 s, is over twice the read timeout: one WAIT that
        # long would time out the read, so it takes several rounds (1.2 + 1.2 + 0.8 s).
        config = MasterLock.config.dup
        config.redis = client._client.is_a?(Redis::Cluster) ?
          Redis.new(cluster: TestServers.cluster.map { |p| "redis://127.0.0.1:#{p}" }, timeout: 1.5) :
          Redis.new(host: "127.0.0.1", port: TestServers.standalone, timeout: 1.5)
        expect(McaptchaCache::Common.round_cap_ms(config.redis)).to eq 1200
        holder = described_class.new(config: config, key: "key", owner: "h", ttl: 10)
        expect(holder.acquire(timeout: 0)).to eq true
        waiter = described_class.new(config: config, key: "key", owner: "w", ttl: 10)
        calls = acquire_calls
        t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        expect(waiter.acquire(timeout: 3.2)).to eq false
        # at least the whole wait (a lower bound); at most 6 s more (an upper bound only
        # against a hang, generous for a loaded machine)
        expect(Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0).to be_between(3.15, 9.2)
        # more than one WAIT: each round ends before the read timeout (1.5 s), the wait lasts
        # 3.2 s (3 rounds on an idle machine; 2 if a delay before a round ate its share)
        expect(acquire_calls - calls).to be >= 2
        expect(holder.release).to eq true
      end

      it "accepts the older gem's redis: form (key prefix masterlock)" do
        old_style = described_class.new(redis: client, key: "key", owner: "o", ttl: 10)
        expect(old_style.acquire(timeout: 0)).to eq true
        expect(lock1.acquire(timeout: 0)).to eq false
        expect(old_style.release).to eq true
      end

      it "uses the key \"key_prefix:key\"" do
        lock1.acquire(timeout: 0)
        expect(client.call("LOCK.INSPECT", "masterlock:key")[3][0][0]).to eq "owner1"
      end
    end

    describe "#extend" do
      it "returns true when lock is held by owner" do
        lock1.acquire(timeout: 0)
        expect(lock1.extend).to eq true
      end

      it "returns false when lock is held by another owner" do
        lock2.acquire(timeout: 0)
        expect(lock1.extend).to eq false
      end

      it "returns false when lock is not held" do
        expect(lock1.extend).to eq false
      end

      it "resets the expiration time" do
        lock = described_class.new(config: MasterLock.config, key: "key", owner: "owner1", ttl: 5)
        lock.acquire(timeout: 0)
        # shorten it (to 2 s: still held when #extend runs, on a slow machine too)
        client.call("LOCK.EXTEND", "masterlock:key", "owner1", 2000)
        expect(lock.extend).to eq true
        expect(client.call("LOCK.INSPECT", "masterlock:key")[3][0][1]).to be > 4000
        client.call("LOCK.EXTEND", "masterlock:key", "owner1", 50)
        wait_until(what: "the lease to end") { client.call("LOCK.INSPECT", "masterlock:key")[3].empty? }
        expect(lock.extend).to eq false
      end
    end

    describe "#release" do
      it "returns true when lock is held by owner" do
        lock1.acquire(timeout: 0)
        expect(lock1.release).to eq true
      end

      it "returns false when lock is held by another owner" do
        lock2.acquire(timeout: 0)
        expect(lock1.release).to eq false
      end

      it "returns false when lock is not held" do
        expect(lock1.release).to eq false
      end

      it "changes the lock to be unowned" do
        lock1.acquire(timeout: 0)
        expect(lock1.release).to eq true
        expect(lock1.release).to eq false
        expect(lock2.acquire(timeout: 0)).to eq true
      end
    end
  end
end

RSpec.describe MasterLock do
  def with_fresh_master_lock
    saved = %i[@config @registry].to_h { |v| [v, MasterLock.instance_variable_get(v)] }
    saved.each_key { |v| MasterLock.remove_instance_variable(v) if MasterLock.instance_variable_defined?(v) }
    MasterLock.instance_variable_set(:@registry, nil)
    yield
  ensure
    saved.each { |v, val| MasterLock.instance_variable_set(v, val) }
  end

  it "raises UnconfiguredError without redis, NotStartedError before start" do
    with_fresh_master_lock do
      MasterLock.config.logger.level = :warn
      expect { MasterLock.synchronize("x") {} }.to raise_error(MasterLock::UnconfiguredError)
      MasterLock.configure do |c|
        c.redis = redis
        c.sleep_time = 0.025 # the renewal thread sleeps this long before it reads the next value
      end
      expect(MasterLock.started?).to be false
      expect { MasterLock.synchronize("x") {} }.to raise_error(MasterLock::NotStartedError)
      MasterLock.start
      expect(MasterLock.started?).to be true
      expect(MasterLock.synchronize("x") { :ran }).to eq :ran
    end
  end

  it "has the gem's defaults" do
    with_fresh_master_lock do
      c = MasterLock.config
      expect([c.ttl, c.acquire_timeout, c.extend_interval, c.sleep_time, c.key_prefix])
        .to eq [60, 5, 15, 5, "masterlock"]
      expect(c.hostname).to eq Socket.gethostname
      expect(c.logger).to be_a(Logger)
    end
  end

  context "on a standalone server" do
    let(:client) { redis }

    include_examples "MasterLock"
  end

  context "on a Redis Cluster", cluster: true do
    let(:client) { cluster_redis }

    include_examples "MasterLock"

    it "spreads locks over the cluster's primaries" do
      MasterLock.configure { |c| c.redis = cluster_redis }
      MasterLock.start
      keys = Array.new(20) { |i| "k#{i}" }
      MasterLock.synchronize(keys[0]) do
        keys[1..].each { |k| MasterLock.synchronize(k) {} }
      end
      nodes = TestServers.cluster.count do |p|
        Redis.new(port: p, host: "127.0.0.1").call("INFO", "commandstats").include?("cmdstat_LOCK.ACQUIRE")
      end
      expect(nodes).to eq 3
    end
  end
end
