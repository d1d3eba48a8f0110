# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# spec/traffic_jam_spec.rb -- TrafficJam's documented behaviour, example by example (the
# gem's README and its specs of Limit, LimitGroup, RollingLimit, GCRALimit, SimpleLimit,
# LifetimeLimit and the configuration), on a standalone server and on a Redis Cluster.
# Time moves with Timecop: the client sends its clock as AT unix-ms.
#
# Examples tagged `at: :rlcore` need AT on RL.GCRA_PEEK / RL.WINDOW_PEEK / RL.REFUND and the
# finer rolling window (module work on branch rlcore): until that is merged into main they
# fail with "unknown option 'AT'". They are not skipped.
require_relative "spec_helper"
require "mcaptcha_cache/traffic_jam"

RSpec.shared_examples "TrafficJam" do
  before do
    TrafficJam.configure do |config|
      config.redis = client
      config.register(:test, 3, 60)
      config.register(:test4, 4, 60)
    end
  end

  let(:period) { 60 * 60 }

  describe "README" do
    it "increments to the cap, raises with increment!, regenerates after the period", at: :rlcore do
      # The clock stands still (every call sends the frozen Time.now as AT) and moves only
      # when the example moves it: with a 1 s period, one unit comes back every 333 ms, which
      # a loaded machine can spend between two calls under a running clock. Frozen an hour
      # ahead of the server's clock, which runs on: the key's TTL is then counted to that
      # hour (with AT in the past it would expire by the server's clock, between two calls).
      Timecop.freeze(Time.now + 3600)
      limit = TrafficJam::Limit.new(:requests_per_user, "u1", max: 3, period: 1)
      expect(limit.increment).to be true
      expect(limit.increment(2)).to be true
      expect(limit.increment).to be false
      expect { limit.increment! }.to raise_error(TrafficJam::LimitExceededError)
      Timecop.freeze(Time.now + 1)
      expect(limit.increment(2)).to be true
      expect(limit.exceeded?).to be false
      expect(limit.exceeded?(2)).to be true
      expect(limit.used).to eq 2
      expect(limit.remaining).to eq 1
    end

    it "registers fixed limits; every instance method is on the class", at: :rlcore do
      # A 1 s period: the clock stands still, an hour ahead of the server's (see the example
      # above); also because RL.REFUND AT a past time takes off what came back since by the
      # server's clock, and AT at or after it gives back all (docs/ratelimit.md).
      Timecop.freeze(Time.now + 3600)
      TrafficJam.configure { |c| c.register(:requests_per_user, 3, 1) }
      limit = TrafficJam.limit(:requests_per_user, "user1")
      expect(limit.increment(2)).to be true
      expect(TrafficJam.increment(:requests_per_user, "user1", 1)).to be true
      expect(TrafficJam.used(:requests_per_user, "user1")).to eq 3
      expect(TrafficJam.remaining(:requests_per_user, "user1")).to eq 0
      expect(TrafficJam.exceeded?(:requests_per_user, "user1")).to be true
      expect { TrafficJam.increment!(:requests_per_user, "user1") }.to raise_error(TrafficJam::LimitExceededError)
      TrafficJam.decrement(:requests_per_user, "user1", 2)
      expect(TrafficJam.used(:requests_per_user, "user1")).to eq 1
      TrafficJam.reset(:requests_per_user, "user1")
      expect(TrafficJam.used(:requests_per_user, "user1")).to eq 0
    end

    it "changing the cap: a lowered max never counts above max (a full limit stays full)", at: :rlcore do
      TrafficJam::Limit.new(:requests_per_user, "u", max: 10, period: 3600).increment(10)
      Timecop.travel(60)
      lower = TrafficJam::Limit.new(:requests_per_user, "u", max: 5, period: 3600)
      expect(lower.used).to eq 5
      expect(lower.increment(1)).to be false
    end

    it "changing the cap: the stored debt is time, so the amount scales with max (documented difference)",
       at: :rlcore do
      TrafficJam::Limit.new(:requests_per_user, "u", max: 10, period: 3600).increment(8)
      Timecop.travel(60)
      lower = TrafficJam::Limit.new(:requests_per_user, "u", max: 5, period: 3600)
      expect(lower.used).to eq 4 # 7.83 * 5 / 10, rounded up; TrafficJam caps the amount: 5
    end

    it "changing the cap: a raised max raises what the stored debt stands for (documented difference)",
       at: :rlcore do
      TrafficJam::Limit.new(:requests_per_user, "u", max: 10, period: 3600).increment(8)
      raised = TrafficJam::Limit.new(:requests_per_user, "u", max: 20, period: 3600)
      expect(raised.used).to eq 16 # TrafficJam keeps the amount: 8
      expect(raised.increment(4)).to be true
      expect(raised.increment(1)).to be false
    end
  end

  describe "configuration" do
    it "has the gem's defaults" do
      expect(TrafficJam.config.key_prefix).to eq "traffic_jam"
      expect(TrafficJam.config.hash_length).to eq 22
    end

    it "returns a limit instance with the registered limits" do
      limit = TrafficJam.limit(:test, "user1")
      expect([limit.action, limit.value, limit.max, limit.period]).to eq [:test, "user1", 3, 60]
      expect(TrafficJam.config.limits(:test)).to eq(max: 3, period: 60)
      expect(TrafficJam.config.max(:test4)).to eq 4
    end

    it "raises LimitNotFound for an action not registered" do
      expect { TrafficJam.limit(:test2, "user1") }.to raise_error(TrafficJam::LimitNotFound)
      expect { TrafficJam.increment(:test2, "user1", 1) }.to raise_error(TrafficJam::LimitNotFound)
      TrafficJam.config.unregister(:test4)
      expect { TrafficJam.limit(:test4, "user1") }.to raise_error(TrafficJam::LimitNotFound)
    end

    it "calls methods with registered limits", at: :rlcore do
      TrafficJam.increment(:test, "user1", 1)
      expect(TrafficJam.used(:test, "user1")).to eq 1
    end

    it "keys a limit by prefix, action and a hash of the value (to_rate_limit_value first)" do
      obj = Object.new
      def obj.to_rate_limit_value
        "user1"
      end
      a = TrafficJam::Limit.new(:test, "user1", max: 3, period: 60)
      b = TrafficJam::Limit.new(:test, obj, max: 3, period: 60)
      a.increment
      expect(a.key).to eq b.key
      expect(a.key).to match(%r{\Atraffic_jam:test:[A-Za-z0-9+/]{22}\z})
      expect(client.call("TYPE", a.key)).to eq "mcap-gcra"
      expect { client.get(a.key) }.to raise_error(Redis::CommandError, /WRONGTYPE/)
    end

    it "resets all rate limits", at: :rlcore do
      TrafficJam.increment!(:test, "user1")
      TrafficJam.increment!(:test4, "user1")
      expect(TrafficJam.used(:test, "user1")).to eq 1
      expect(TrafficJam.used(:test4, "user1")).to eq 1
      TrafficJam.reset_all
      expect(TrafficJam.used(:test, "user1")).to eq 0
      expect(TrafficJam.used(:test4, "user1")).to eq 0
    end

    it "resets all rate limits for one action", at: :rlcore do
      TrafficJam.increment!(:test, "user1")
      TrafficJam.increment!(:test4, "user1")
      TrafficJam.reset_all(action: :test)
      expect(TrafficJam.used(:test, "user1")).to eq 0
      expect(TrafficJam.used(:test4, "user1")).to eq 1
    end
  end

  describe TrafficJam::Limit do
    let(:limit) { TrafficJam::Limit.new(:test, "user1", max: 3, period: period) }

    it "raises an ArgumentError on a missing max or period" do
      expect { TrafficJam::Limit.new(:test, "user1", period: period) }.to raise_error(ArgumentError)
      expect { TrafficJam::Limit.new(:test, "user1", max: 3) }.to raise_error(ArgumentError)
    end

    describe "#increment" do
      it "is true when the rate limit is not exceeded" do
        expect(limit.increment(1)).to be true
      end

      it "is false when the rate limit is exceeded" do
        expect(limit.increment(1)).to be true
        expect(limit.increment(2)).to be true
        expect(limit.increment(1)).to be false
      end

      it "raises an ArgumentError if given a float" do
        expect { limit.increment(1.5) }.to raise_error(ArgumentError)
      end

      it "is a no-op when the limit would be exceeded" do
        limit.increment(2)
        expect(limit.increment(2)).to be false
        expect(limit.increment(1)).to be true
      end

      it "is true when sufficient time passes" do
        expect(limit.increment(3)).to be true
        Timecop.travel(period / 2)
        expect(limit.increment(1)).to be true
        Timecop.travel(period)
        expect(limit.increment(3)).to be true
      end

      it "sends the process clock: a frozen clock regenerates nothing", at: :rlcore do
        Timecop.freeze(Time.now) do
          expect(limit.increment(3)).to be true
          expect(limit.used).to eq 3
          expect(limit.increment(1)).to be false
        end
      end

      it "discounts an increment at a past time by the time drift", at: :rlcore do
        time = Time.now
        limit.increment(1, time: time)
        limit.increment(2, time: time - period / 3)
        expect(limit.used).to eq 2
      end

      it "discounts an increment at a past time: what fits shows it" do
        expect(limit.increment(1)).to be true
        # 3 units 20 minutes ago count as 2 now (1 regenerated): 1 + 2 fits in 3
        expect(limit.increment(3, time: Time.now - period / 3)).to be true
        expect(limit.increment(1)).to be false
      end

      it "is a no-op once the discount reaches the amount", at: :rlcore do
        limit.increment(1)
        expect(limit.increment(2, time: Time.now - period)).to be true
        expect(limit.used).to eq 1
      end

      it "discounts a decrement at a past time by the time drift", at: :rlcore do
        time = Time.now
        limit.increment(2, time: time - period / 3)
        limit.increment(2, time: time)
        expect(limit.used).to eq 3
        limit.decrement(2, time: time - period / 3)
        expect(limit.used).to eq 2
      end

      it "is false for any positive amount when max is zero" do
        zero = TrafficJam::Limit.new(:test, "user1", max: 0, period: period)
        expect(zero.increment).to be false
        expect(zero.increment(0)).to be true
        expect(zero.used).to eq 0
      end

      it "still expires after the period when max is changed to a lower amount", at: :rlcore do
        TrafficJam::Limit.new(:test, "user1", max: 4, period: 60).increment!(4)
        lowered = TrafficJam::Limit.new(:test, "user1", max: 2, period: 60)
        lowered.increment!(0)
        Timecop.travel(period)
        expect(lowered.used).to eq 0
      end
    end

    describe "#increment!" do
      it "does not raise when the rate limit is not exceeded" do
        expect { limit.increment!(1) }.not_to raise_error
      end

      it "raises LimitExceededError (with the limit) when the rate limit is exceeded" do
        limit.increment!(3)
        expect { limit.increment!(1) }.to raise_error(TrafficJam::LimitExceededError) { |e| expect(e.limit).to be limit }
      end
    end

    describe "#exceeded? and #limit_exceeded", at: :rlcore do
      it "is true when the amount would exceed the limit" do
        limit.increment(2)
        expect(limit.exceeded?(2)).to be true
        expect(limit.limit_exceeded(2)).to be limit
      end

      it "is false when the amount would not exceed the limit" do
        limit.increment(2)
        expect(limit.exceeded?(1)).to be false
        expect(limit.limit_exceeded(1)).to be_nil
      end
    end

    describe "#used", at: :rlcore do
      it "is 0 when there has been no incrementing" do
        expect(limit.used).to eq 0
      end

      it "is the amount used" do
        limit.increment(1)
        expect(limit.used).to eq 1
      end

      it "decreases over time" do
        limit.increment(2)
        Timecop.travel(period / 2)
        expect(limit.used).to eq 1
      end

      it "does not exceed the maximum when the limit changes" do
        limit.increment!(3)
        expect(TrafficJam::Limit.new(:test, "user1", max: 2, period: period).used).to eq 2
      end
    end

    describe "#reset", at: :rlcore do
      it "resets the current count to 0" do
        limit.increment(3)
        expect(limit.used).to eq 3
        limit.reset
        expect(limit.used).to eq 0
      end
    end

    describe "#decrement", at: :rlcore do
      it "reduces the amount used" do
        limit.increment(3)
        limit.decrement(2)
        expect(limit.used).to eq 1
      end

      it "does not lower the amount used below 0" do
        limit.decrement(2)
        expect(limit.increment(4)).to be false
        expect(limit.used).to eq 0
        expect(limit.increment(3)).to be true
      end
    end

    it "flattens to itself" do
      expect(limit.flatten).to eq [limit]
    end
  end

  describe TrafficJam::LimitGroup do
    let(:limit1) { TrafficJam::Limit.new(:test, "user1", max: 3, period: period) }
    let(:limit2) { TrafficJam::Limit.new(:test, "user2", max: 2, period: period) }
    let(:limit_group) { TrafficJam::LimitGroup.new([limit1, limit2]) }

    it "accepts an array, a splat or nothing" do
      expect(TrafficJam::LimitGroup.new([limit1, limit2]).limits.size).to eq 2
      expect(TrafficJam::LimitGroup.new(limit1, limit2).limits.size).to eq 2
      expect(TrafficJam::LimitGroup.new.limits.size).to eq 0
    end

    it "drops the limits whose value is nil with ignore_nil_values" do
      nil_limit = TrafficJam::Limit.new(:test, nil, max: 2, period: period)
      group = TrafficJam::LimitGroup.new([limit1, nil_limit], ignore_nil_values: true)
      expect(group.limits.size).to eq 1
      group << nil_limit
      expect(group.limits.size).to eq 1
      group << limit2
      expect(group.limits.size).to eq 2
    end

    describe "#increment", at: :rlcore do
      it "is true when no limit is exceeded, false when any is" do
        expect(limit_group.increment(2)).to be true
        expect(limit_group.increment(1)).to be false
      end

      it "increments all limits when none is exceeded" do
        limit_group.increment(2)
        expect([limit1.used, limit2.used]).to eq [2, 2]
      end

      it "is a no-op when a limit would be exceeded" do
        expect(limit_group.increment(3)).to be false
        expect([limit1.used, limit2.used]).to eq [0, 0]
      end
    end

    describe "#increment!", at: :rlcore do
      it "increments all limits when none is exceeded" do
        limit_group.increment!(2)
        expect([limit1.used, limit2.used]).to eq [2, 2]
      end

      it "is a no-op when a limit would be exceeded" do
        expect { limit_group.increment!(3) }.to raise_error(TrafficJam::LimitExceededError)
        expect([limit1.used, limit2.used]).to eq [0, 0]
      end

      it "returns the block's result" do
        called = false
        expect(limit_group.increment!(2) { called = true; :result }).to eq :result
        expect(called).to be true
      end

      it "does not run the block when a limit is exceeded" do
        called = false
        expect { limit_group.increment!(3) { called = true } }.to raise_error(TrafficJam::LimitExceededError)
        expect(called).to be false
      end

      it "takes the increments back when the block raises" do
        expect { limit_group.increment!(2) { raise StandardError } }.to raise_error(StandardError)
        expect([limit1.used, limit2.used]).to eq [0, 0]
      end

      it "takes the increments back when the block evaluates to false" do
        limit_group.increment!(2) { false }
        expect([limit1.used, limit2.used]).to eq [0, 0]
      end

      it "keeps the increments when the block evaluates to nil" do
        limit_group.increment!(2) { nil }
        expect([limit1.used, limit2.used]).to eq [2, 2]
      end

      it "raises the error of the limit exceeded, from a group of groups" do
        meta = TrafficJam::LimitGroup.new(limit_group)
        expect { meta.increment!(3) }.to raise_error(TrafficJam::LimitExceededError) { |e| expect(e.limit).to be limit2 }
      end
    end

    describe "queries", at: :rlcore do
      it "exceeded? is true when a limit would be exceeded" do
        limit_group.increment(2)
        expect(limit_group.exceeded?(1)).to be true
        limit_group.reset
        limit_group.increment(1)
        expect(limit_group.exceeded?(1)).to be false
      end

      it "limit_exceeded is the limit that would be exceeded, or nil" do
        limit_group.increment(2)
        expect(limit_group.limit_exceeded(1)).to be limit2
        limit_group.reset
        limit_group.increment(1)
        expect(limit_group.limit_exceeded(1)).to be_nil
      end

      it "remaining is the smallest remaining" do
        expect(limit_group.remaining).to eq 2
        limit1.increment!(2)
        expect(limit_group.remaining).to eq 1
      end

      it "reset resets every limit" do
        limit1.increment(2)
        limit2.increment(1)
        limit_group.reset
        expect([limit1.used, limit2.used]).to eq [0, 0]
      end

      it "decrement reduces every limit" do
        limit_group.increment(2)
        limit_group.decrement(1)
        expect([limit1.used, limit2.used]).to eq [1, 1]
      end
    end

    it "flattens groups of groups" do
      expect(TrafficJam::LimitGroup.new(limit_group).flatten).to eq [limit1, limit2]
    end
  end

  describe TrafficJam::RollingLimit do
    let(:max) { 3 }
    let(:limit) { TrafficJam::RollingLimit.new(:test, "user1", max: max, period: period) }

    it "raises an ArgumentError if given a float" do
      expect { limit.increment(1.5) }.to raise_error(ArgumentError)
    end

    it "is false for any positive amount when max is zero" do
      expect(TrafficJam::RollingLimit.new(:test, "user1", max: 0, period: period).increment).to be false
    end

    context "with period 0 (each request compared to max)" do
      let(:period) { 0 }

      it "compares each increment to max alone, storing nothing" do
        expect(limit.increment(1)).to be true
        expect(limit.increment(3)).to be true
        expect(limit.increment(3)).to be true
        expect(limit.increment(4)).to be false
        expect(limit.used).to eq 0
        expect(client.keys("traffic_jam:*")).to eq []
      end
    end

    context "with a timeframe" do
      it "is false when the limit is exceeded, and a no-op" do
        expect(limit.increment(1)).to be true
        expect(limit.increment(2)).to be true
        expect(limit.increment(1)).to be false
        limit.reset
        expect(limit.increment(2)).to be true
        expect(limit.increment(2)).to be false
        expect(limit.increment(1)).to be true
      end

      it "is true again only once the period has passed (no regeneration within it)" do
        expect(limit.increment(3)).to be true
        Timecop.travel(period / 2)
        expect(limit.increment(1)).to be false
        Timecop.travel(period)
        expect(limit.increment(3)).to be true
      end

      it "forgets a hit at most one second after its period", at: :rlcore do
        t0 = Time.now
        Timecop.freeze(t0) { expect(limit.increment(3)).to be true }
        Timecop.freeze(t0 + period - 1) { expect(limit.used).to eq 3 }
        Timecop.freeze(t0 + period + 1) { expect(limit.used).to eq 0 }
      end

      it "still expires after the period when max is changed to a lower amount", at: :rlcore do
        TrafficJam::RollingLimit.new(:test, "user1", max: 4, period: period).increment!(4)
        lowered = TrafficJam::RollingLimit.new(:test, "user1", max: 2, period: period)
        expect(lowered.increment).to be false
        Timecop.travel(period + 1)
        expect(lowered.used).to eq 0
      end

      describe "#used", at: :rlcore do
        it "is 0 without increments, then the amount used" do
          expect(limit.used).to eq 0
          limit.increment(1)
          expect(limit.used).to eq 1
        end

        it "does not decrease over time within the period" do
          limit.increment(2)
          Timecop.travel(period / 2)
          expect(limit.used).to eq 2
        end

        it "does not exceed the maximum when the limit changes" do
          limit.increment!(3)
          expect(TrafficJam::RollingLimit.new(:test, "user1", max: 2, period: period).used).to eq 2
        end

        it "keys a window (module type)" do
          limit.increment
          expect(client.call("TYPE", limit.key)).to eq "mcap-wndw"
        end
      end
    end
  end

  describe TrafficJam::GCRALimit do
    let(:limit) { TrafficJam::GCRALimit.new(:test, "user1", max: 3, period: period) }

    it "increments to max, then refuses; regenerates at max/period", at: :rlcore do
      expect(limit.increment(2)).to be true
      expect(limit.increment(1)).to be true
      expect(limit.increment(1)).to be false
      expect(limit.used).to eq 3
      Timecop.travel(period / 3)
      expect(limit.used).to eq 2
      expect(limit.increment(1)).to be true
    end

    it "is true for 0, false above max or with max 0, and refuses negatives and floats" do
      expect(limit.increment(0)).to be true
      expect(limit.increment(4)).to be false
      expect(TrafficJam::GCRALimit.new(:test, "u", max: 0, period: 1).increment).to be false
      expect { limit.increment(-1) }.to raise_error(ArgumentError)
      expect { limit.increment(1.5) }.to raise_error(ArgumentError)
    end

    it "has no decrement" do
      expect { limit.decrement(1) }.to raise_error(NotImplementedError)
    end

    it "keys under key_prefix:s" do
      limit.increment
      expect(limit.key).to start_with("traffic_jam:s:test:")
      expect(client.exists?(limit.key)).to be true
    end
  end

  describe TrafficJam::SimpleLimit do
    let(:limit) { TrafficJam::SimpleLimit.new(:test, "user1", max: 5, period: 10) }

    it "counts increments until max, regenerating at max/period", at: :rlcore do
      expect(limit.increment(1)).to be true
      expect(limit.increment(4)).to be true
      expect(limit.increment(1)).to be false
      expect(limit.used).to eq 5
      Timecop.travel(2)
      expect(limit.used).to eq 4
      expect(limit.increment(1)).to be true
      expect { limit.decrement }.to raise_error(NotImplementedError)
    end
  end

  describe TrafficJam::LifetimeLimit do
    let(:limit) { TrafficJam::LifetimeLimit.new(:test, "user1", max: 3) }

    it "counts up to max for ever" do
      expect(limit.increment(2)).to be true
      expect(limit.increment(2)).to be false
      expect(limit.increment(1)).to be true
      Timecop.travel(10 * 365 * 86_400)
      expect(limit.used).to eq 3
      expect(limit.increment).to be false
      limit.decrement(2)
      expect(limit.remaining).to eq 2
      expect { limit.increment(1.5) }.to raise_error(ArgumentError)
      expect(TrafficJam::LifetimeLimit.new(:test, "u", max: 0).increment).to be false
    end
  end
end

RSpec.describe TrafficJam do
  context "on a standalone server" do
    let(:client) { redis }

    include_examples "TrafficJam"
  end

  context "on a Redis Cluster", cluster: true do
    let(:client) { cluster_redis }

    include_examples "TrafficJam"
  end
end
