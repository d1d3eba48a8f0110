# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# spec/rate_limiter_spec.rb -- the native rate-limit API: RateLimiter (GCRA, window, stored
# policies, cost, wait, peek, refund, AT) and its Result (allowed?, remaining, retry_after,
# reset_after in seconds); Policy; Captcha.
require_relative "spec_helper"

RSpec.describe McaptchaCache::RateLimiter do
  it "GCRA: a burst, then refusals with retry_after and reset_after in seconds" do
    rl = described_class.new(redis, "api", rate: 2, period: 2, burst: 3)
    r = rl.acquire
    expect(r).to be_allowed
    expect(r.remaining).to eq 2
    expect(r.retry_after).to be_nil
    expect(r.reset_after).to be_within(0.01).of(1.0)
    rl.acquire(cost: 2)
    refused = rl.acquire
    expect(refused).not_to be_allowed
    expect(refused.remaining).to eq 0
    expect(refused.retry_after).to be_within(0.05).of(1.0)
    expect(refused.reset_after).to be_within(0.05).of(3.0)
    expect(redis.call("TYPE", "api")).to eq "mcap-gcra"
  end

  it "a cost that can never fit: refused with retry_after nil" do
    r = described_class.new(redis, "api", rate: 2, period: 1).acquire(cost: 3)
    expect(r).not_to be_allowed
    expect(r.retry_after).to be_nil
  end

  it "window: at most limit within any window" do
    rl = described_class.new(redis, "login", limit: 2, window: 60)
    expect(rl.algorithm).to eq :window
    expect(rl.acquire).to be_allowed
    expect(rl.acquire.remaining).to eq 0
    r = rl.acquire
    expect(r).not_to be_allowed
    expect(r.retry_after).to be_within(1).of(60)
    expect(redis.call("TYPE", "login")).to eq "mcap-wndw"
  end

  it "peek changes nothing; refund gives units back" do
    rl = described_class.new(redis, "api", rate: 3, period: 60)
    rl.acquire(cost: 3)
    expect(rl.peek).not_to be_allowed
    expect(rl.peek(cost: 0).remaining).to eq 0
    expect(rl.refund(2)).to eq 2
    expect(rl.peek.remaining).to eq 1
    expect(rl.acquire(cost: 2)).to be_allowed
  end

  it "at: evaluates at a given time (AT unix-ms)" do
    rl = described_class.new(redis, "api", rate: 1, period: 10)
    t = Time.now
    expect(rl.acquire(at: t)).to be_allowed
    expect(rl.acquire(at: t + 5)).not_to be_allowed
    expect(rl.acquire(at: t + 10)).to be_allowed
  end

  it "peek and refund at: a time (needs AT on _PEEK and RL.REFUND)", at: :rlcore do
    rl = described_class.new(redis, "api", rate: 2, period: 10)
    t = Time.now
    rl.acquire(cost: 2, at: t)
    expect(rl.peek(at: t + 1)).not_to be_allowed
    expect(rl.peek(at: t + 5)).to be_allowed
    expect(rl.refund(1, at: t)).to eq 1
    expect(rl.peek(at: t).remaining).to eq 0
  end

  it "wait: waits on the server until the units fit" do
    rl = described_class.new(redis, "api", rate: 5, period: 1, burst: 1)
    rl.acquire
    t0 = McaptchaCache::Common.monotonic
    r = rl.acquire(wait: 2)
    expect(r).to be_allowed
    expect(McaptchaCache::Common.monotonic - t0).to be_between(0.1, 1.5)
  end

  it "acquire! raises RateLimited with the Result; limit runs a block" do
    rl = described_class.new(redis, "api", rate: 1, period: 60)
    expect(rl.limit { :ran }).to eq :ran
    expect { rl.acquire! }.to raise_error(McaptchaCache::RateLimited) { |e| expect(e.result.retry_after).to be > 50 }
  end

  it "stored policies: set, use, get, list, delete" do
    McaptchaCache::Policy.set_gcra(redis, "api", rate: 2, period: 60, burst: 2)
    McaptchaCache::Policy.set_window(redis, "login", limit: 1, window: 30)
    expect(McaptchaCache::Policy.get(redis, "api")).to eq(type: "GCRA", rate: 2, period: 60.0, burst: 2)
    expect(McaptchaCache::Policy.get(redis, "login")).to eq(type: "WINDOW", limit: 1, window: 30.0)
    expect(McaptchaCache::Policy.list(redis)).to eq %w[api login]
    g = described_class.new(redis, "k1", policy: "api")
    expect(g.acquire(cost: 2)).to be_allowed
    expect(g.acquire).not_to be_allowed
    w = described_class.new(redis, "k2", policy: "login", window: true)
    expect(w.acquire).to be_allowed
    expect(w.acquire).not_to be_allowed
    expect { described_class.new(redis, "k3", policy: "nope").acquire }.to raise_error(McaptchaCache::InvalidArgument)
    expect(McaptchaCache::Policy.delete(redis, "api")).to be true
    expect(McaptchaCache::Policy.get(redis, "api")).to be_nil
    McaptchaCache::Policy.delete(redis, "login")
  end

  it "refuses bad arguments in Ruby, WRONGTYPE from the server" do
    expect { described_class.new(redis, "k", rate: 1) }.to raise_error(ArgumentError)
    expect { described_class.new(redis, "k", policy: "p", rate: 1) }.to raise_error(ArgumentError)
    expect { described_class.new(redis, "k", rate: 1, period: 1).acquire(cost: -1) }.to raise_error(ArgumentError)
    McaptchaCache::Lock.new(redis, "lk", lease: 5).acquire
    expect { described_class.new(redis, "lk", rate: 1, period: 1).acquire }.to raise_error(McaptchaCache::WrongType)
  end

  it "works on a Redis Cluster", cluster: true do
    rl = described_class.new(cluster_redis, "c-api", rate: 1, period: 60)
    expect(rl.acquire).to be_allowed
    expect(rl.acquire).not_to be_allowed
    expect(rl.refund(1)).to eq 1
    expect(rl.acquire).to be_allowed
  end
end

RSpec.describe McaptchaCache::Captcha do
  it "counts visits and answers the difficulty of the level reached" do
    c = described_class.new(redis, "site")
    expect(c.exists?).to be false
    c.add(levels: [[2, 50], [4, 500]], duration: 30)
    expect(c.exists?).to be true
    expect(c.visit).to eq 50
    expect(c.visit).to eq 50
    expect(c.visit).to eq 50
    expect(c.visit_with_duration).to eq [50, 30]
    expect(c.visit).to eq 500
    expect(c.count).to eq 5
    expect { c.add(levels: [[1, 1]]) }.to raise_error(McaptchaCache::CaptchaExists)
    moved = c.rename("site2")
    expect(moved.count).to eq 5
    moved.delete
    expect { moved.count }.to raise_error(McaptchaCache::CaptchaNotFound)
    expect { c.add(levels: [[1, 0]]) }.to raise_error(McaptchaCache::InvalidCaptchaConfig)
  end

  it "count counts nothing; visit and visit_with_duration count one visit; visit_info is deprecated" do
    c = described_class.new(redis, "site")
    c.add(levels: [[1, 10], [2, 20]], duration: 30)
    expect(c.count).to eq 0
    expect(c.count).to eq 0 # a query: counts nothing
    expect(c.visit_with_duration).to eq [10, 30]
    expect(c.count).to eq 1
    expect(c.count).to eq 1
    expect(c.visit).to eq 10
    expect(c.count).to eq 2
    # the old name answers the same and still counts (as the Python client's visit_info),
    # with a warning in the :deprecated category
    saved = Warning[:deprecated]
    begin
      Warning[:deprecated] = true
      expect { expect(c.visit_info).to eq [20, 30] }.to output(/visit_info counts a visit.*visit_with_duration/).to_stderr
    ensure
      Warning[:deprecated] = saved
    end
    expect(c.count).to eq 3
  end

  it "stores one-shot challenges" do
    c = described_class.new(redis, "site")
    c.add_challenge("n0nce", difficulty: 500, duration: 30)
    expect { c.add_challenge("n0nce", difficulty: 500, duration: 30) }.to raise_error(McaptchaCache::ChallengeExists)
    expect(c.get_challenge("n0nce")).to eq McaptchaCache::Challenge.new(500, 30)
    expect { c.get_challenge("n0nce") }.to raise_error(McaptchaCache::ChallengeNotFound)
  end
end
