# frozen_string_literal: true

# spec/lock_spec.rb -- the native lock API: McaptchaCache::Lock (grant, fencing token,
# server-side FIFO wait, renewal thread, lease loss, session), Semaphore and MultiLock.
# SPDX-License-Identifier: BSD-3-Clause
require_relative "spec_helper"

RSpec.describe McaptchaCache::Lock do
  def holders(key = "L")
    redis.call("LOCK.INSPECT", key)&.fetch(3) || []
  end

  def acquire_calls
    redis.call("INFO", "commandstats")[/cmdstat_LOCK\.ACQUIRE:calls=(\d+)/, 1].to_i
  end

  it "grants with a fencing token that grows at each grant, and releases" do
    a = described_class.new(redis, "L", lease: 5)
    expect(a.acquire).to be true
    t1 = a.token
    expect(a).to be_held
    expect(holders.map(&:first)).to eq [a.owner]
    a.release
    expect(a).not_to be_held
    expect(holders).to eq []
    a.acquire
    expect(a.token).to be > t1
    a.release
  end

  it "refuses while another holds it (wait: 0), and is not reentrant" do
    a = described_class.new(redis, "L", lease: 5)
    b = described_class.new(redis, "L", lease: 5)
    a.acquire
    expect(b.acquire(wait: 0)).to be false
    expect { a.acquire }.to raise_error(McaptchaCache::LockError)
    a.release
    expect(b.acquire(wait: 0)).to be true
    b.release
  end

  it "synchronize returns the block's value and raises LockNotAcquired when the wait runs out" do
    a = described_class.new(redis, "L", lease: 5)
    expect(a.synchronize { |l| l.token }).to be_a(Integer)
    a.acquire
    b = described_class.new(redis, "L", lease: 5, wait: 0.2)
    expect { b.synchronize { :never } }.to raise_error(McaptchaCache::LockNotAcquired)
    a.release
  end

  it "waits on the server, first come first served, without polling" do
    a = described_class.new(redis, "L", lease: 10)
    a.acquire
    order = Queue.new
    threads = %w[w1 w2].each_with_index.map do |w, i|
      th = Thread.new do
        l = described_class.new(redis, "L", lease: 10, wait: 10, owner: w)
        l.synchronize { order << w }
      end
      wait_until(what: "#{w} queued") { redis.call("LOCK.INSPECT", "L")[2] == i + 1 }
      th
    end
    calls_before = redis.call("INFO", "commandstats")[/cmdstat_LOCK\.ACQUIRE:calls=(\d+)/, 1].to_i
    a.release
    threads.each(&:join)
    expect([order.pop, order.pop]).to eq %w[w1 w2]
    calls_after = redis.call("INFO", "commandstats")[/cmdstat_LOCK\.ACQUIRE:calls=(\d+)/, 1].to_i
    expect(calls_after - calls_before).to eq 0 # served from the queue: no new ACQUIRE
  end

  it "splits a long wait into rounds shorter than the read timeout" do
    # the cap: the read timeout less 20% (at least 100 ms)
    expect(McaptchaCache::Common.round_cap_ms(Redis.new(host: "127.0.0.1", port: 1, timeout: 0.5))).to eq 400
    # The waits run with a 1.5 s read timeout: rounds of 1.2 s, so the server's answer at a
    # round's end has 300 ms to arrive before the read times out (with 0.5 s: 100 ms, too
    # little on a loaded machine). The wait, 3.2 s, is over twice the read timeout: one WAIT
    # that long would time out the read, so it takes several rounds (1.2 + 1.2 + 0.8 s).
    short = Redis.new(host: "127.0.0.1", port: TestServers.standalone, timeout: 1.5)
    expect(McaptchaCache::Common.round_cap_ms(short)).to eq 1200
    a = described_class.new(short, "L", lease: 10)
    a.acquire
    b = described_class.new(short, "L", lease: 10, wait: 3.2)
    calls = acquire_calls
    t0 = McaptchaCache::Common.monotonic
    expect(b.acquire).to be false
    # at least the whole wait (a lower bound); at most 6 s more (an upper bound only against
    # a hang, generous for a loaded machine)
    expect(McaptchaCache::Common.monotonic - t0).to be_between(3.15, 9.2)
    # more than one WAIT: each round ends before the read timeout (1.5 s), the wait lasts
    # 3.2 s (3 rounds on an idle machine; 2 if a delay before a round ate its share)
    expect(acquire_calls - calls).to be >= 2
    a.release
  end

  it "renews the lease in the background while held" do
    a = described_class.new(redis, "L", lease: 0.3, renew_every: 0.05)
    a.acquire
    deadline = McaptchaCache::Common.monotonic + 0.9
    wait_until(what: "3 leases") { McaptchaCache::Common.monotonic > deadline }
    expect(holders.map(&:first)).to eq [a.owner]
    expect(a).to be_held
    a.release
  end

  it "lets the lease run out without auto_renew" do
    a = described_class.new(redis, "L", lease: 0.1, auto_renew: false)
    a.acquire
    wait_until(what: "lease end") { holders.empty? }
    expect { a.release }.to raise_error(McaptchaCache::LockLost)
  end

  it "reports a lease lost (key deleted): lost?, on_lost, LockLost from release" do
    seen = Queue.new
    a = described_class.new(redis, "L", lease: 1, renew_every: 0.05, on_lost: ->(l) { seen << l })
    a.acquire
    redis.del("L")
    wait_until(what: "on_lost") { !seen.empty? }
    expect(seen.pop).to be a
    expect(a).to be_lost
    expect(a.lost_reason).to match(/renewal refused/)
    expect { a.release }.to raise_error(McaptchaCache::LockLost)
  end

  it "extend renews to the given seconds; raises LockNotOwned when not held" do
    a = described_class.new(redis, "L", lease: 1, auto_renew: false)
    expect { a.extend }.to raise_error(McaptchaCache::LockNotOwned)
    a.acquire
    expect(a.extend(20)).to be_within(0.01).of(20.0)
    expect(holders[0][1]).to be > 19_000
    a.release
  end

  it "with session: the server releases it when the connection closes" do
    a = described_class.new(redis, "L", lease: 30, session: true, auto_renew: false)
    a.acquire
    expect(holders.size).to eq 1
    a.instance_variable_get(:@session_conn).close
    wait_until(what: "session release") { holders.empty? }
  end

  it "keeps a lock-delay after a lost hold (lock_delay)" do
    a = described_class.new(redis, "L", lease: 0.05, lock_delay: 5, auto_renew: false)
    a.acquire
    wait_until(what: "a lock-delay entry") { holders.size == 1 && holders[0][3].zero? }
    expect(described_class.new(redis, "L", lease: 1).acquire(wait: 0)).to be false
    expect(a.info.holders.first).to be_lock_delay
    expect(a).to be_locked
    expect(a.owned?).to be false
  end

  it "maps error replies to exception classes" do
    redis.set("S", "x")
    expect { described_class.new(redis, "S", lease: 1).acquire }.to raise_error(McaptchaCache::WrongType)
    expect { described_class.new(redis, "L", lease: 1, owner: "x" * 300).acquire }
      .to raise_error(McaptchaCache::InvalidArgument)
    expect(McaptchaCache::WrongType.ancestors).to include(McaptchaCache::ServerError, McaptchaCache::Error)
  end

  it "refuses bad arguments in Ruby" do
    expect { described_class.new(redis, "L", lease: 0) }.to raise_error(ArgumentError)
    expect { described_class.new(redis, "L", lease: "1") }.to raise_error(TypeError)
    expect { described_class.new(redis, "L", lease: 1, renew_every: 2) }.to raise_error(ArgumentError)
  end

  it "works on a Redis Cluster", cluster: true do
    a = described_class.new(cluster_redis, "c-lock", lease: 5, renew_every: 0.05)
    b = described_class.new(cluster_redis, "c-lock", lease: 5)
    a.acquire
    expect(b.acquire(wait: 0)).to be false
    t = Thread.new { b.acquire(wait: 10) }
    wait_until(what: "queued") { cluster_redis.call("LOCK.INSPECT", "c-lock")[2] == 1 }
    a.release
    expect(t.value).to be true
    expect(b.token).to be > a.token
    b.release
  end
end

RSpec.describe McaptchaCache::Semaphore do
  it "admits permits holders at once, each with its own token" do
    s = Array.new(3) { described_class.new(redis, "S", permits: 2, lease: 5) }
    expect(s[0].acquire).to be true
    expect(s[1].acquire).to be true
    expect(s[2].acquire(wait: 0)).to be false
    expect(s[0].token).not_to eq s[1].token
    expect(s[0].available_permits).to eq 0
    s[0].release
    expect(s[2].acquire(wait: 0)).to be true
    [s[1], s[2]].each(&:release)
  end

  it "takes several permits at once (take:), and resizes the pool" do
    big = described_class.new(redis, "S", permits: 3, take: 2, lease: 5)
    small = described_class.new(redis, "S", permits: 3, lease: 5)
    expect(big.acquire).to be true
    expect(big.available_permits).to eq 1
    expect(big.add_permits(2)).to eq 5
    expect(small.available_permits).to eq 3
    expect(small.drain_permits).to eq 3
    expect(small.acquire(wait: 0)).to be false
    big.release
  end

  it "raises PermitsMismatch for another size while held" do
    described_class.new(redis, "S", permits: 2, lease: 5).acquire
    expect { described_class.new(redis, "S", permits: 3, lease: 5).acquire }.to raise_error(McaptchaCache::PermitsMismatch)
  end
end

RSpec.describe McaptchaCache::MultiLock do
  it "takes every key or none, with one token, and releases them together" do
    m = described_class.new(redis, %w[{a}:1 {a}:2], lease: 5)
    other = McaptchaCache::Lock.new(redis, "{a}:2", lease: 5)
    other.acquire
    expect(m.acquire(wait: 0)).to be false
    expect(redis.call("LOCK.INSPECT", "{a}:1")).to be_nil
    other.release
    expect(m.acquire(wait: 0)).to be true
    expect(redis.call("LOCK.INSPECT", "{a}:1")[3][0][2]).to eq m.token
    expect(redis.call("LOCK.INSPECT", "{a}:2")[3][0][2]).to eq m.token
    m.release
    expect(redis.call("LOCK.INSPECT", "{a}:2")[3]).to eq []
  end

  it "works on a Redis Cluster (redis-rb follows the MOVED redirection)", cluster: true do
    10.times do |i|
      keys = ["{t#{i}}:1", "{t#{i}}:2"]
      m = described_class.new(cluster_redis, keys, lease: 5)
      expect(m.acquire(wait: 0)).to be true
      expect(m.extend(3)).to be_within(0.01).of(3.0)
      expect(cluster_redis.call("LOCK.INSPECT", keys[1])[3][0][2]).to eq m.token
      m.release
      expect(cluster_redis.call("LOCK.INSPECT", keys[0])[3]).to eq []
    end
  end

  it "raises CrossSlot for keys of different slots" do
    expect { described_class.new(redis, %w[a b], lease: 5).acquire }.to raise_error(McaptchaCache::CrossSlot)
  end

  it "raises LockLost when a key was lost before the release" do
    m = described_class.new(redis, %w[{a}:1 {a}:2], lease: 5, auto_renew: false)
    m.acquire
    redis.del("{a}:2")
    expect { m.release }.to raise_error(McaptchaCache::LockLost, /\{a\}:2/)
  end
end
