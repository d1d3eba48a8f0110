# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache/rate_limiter.rb -- rate limits on RL.GCRA and RL.WINDOW (their _PEEK and
# RL.REFUND), the stored policies (RL.POLICY_*), and the Result every limiter returns:
# allowed?, remaining, retry_after and reset_after in seconds (floats).
require_relative "common"

module McaptchaCache
  # A limiter's answer, from the module's [allowed, remaining, retry_after_ms, reset_after_ms].
  # +retry_after+ is nil when allowed and when the cost can never fit; else seconds until the
  # same request could fit. +reset_after+: seconds until the limiter is full again.
  Result = Struct.new(:allowed, :remaining, :retry_after, :reset_after) do
    def self.from_reply(reply)
      retry_ms = reply[2].to_i
      new(reply[0].to_i == 1, reply[1].to_i, retry_ms.negative? ? nil : retry_ms / 1000.0, reply[3].to_i / 1000.0)
    end

    def allowed?
      allowed
    end
  end

  # A rate limiter on one key.
  #
  #   RateLimiter.new(redis, "api:42", rate: 100, period: 60, burst: 20)  # GCRA (RL.GCRA)
  #   RateLimiter.new(redis, "login:ip", limit: 5, window: 60)           # exact window (RL.WINDOW)
  #   RateLimiter.new(redis, "api:42", policy: "api")                    # a stored GCRA policy
  #   RateLimiter.new(redis, "login:ip", policy: "login", window: true)  # a stored WINDOW policy
  #
  # #acquire(cost: 1, wait: 0, at: nil) returns a Result; +wait+ (s) waits on the server
  # (WAIT, first come first served) for the units to fit (nil: until they do); +at+ (a Time)
  # evaluates at that time instead of the server's clock (AT unix-ms).
  class RateLimiter
    attr_reader :client, :key, :algorithm, :policy

    def initialize(client, key, rate: nil, period: nil, burst: nil, limit: nil, window: nil, policy: nil)
      @client = client
      @key = key
      @policy = policy
      window_kind = window == true || !limit.nil? || (window.is_a?(Numeric) && rate.nil?)
      @algorithm = window_kind ? :window : :gcra
      if policy
        given = { rate: rate, period: period, burst: burst, limit: limit }.reject { |_, v| v.nil? }
        given[:window] = window if window.is_a?(Numeric)
        raise ArgumentError, "policy: replaces #{given.keys.join(', ')}" unless given.empty?

        @numbers = ["POLICY", policy]
      elsif @algorithm == :gcra
        raise ArgumentError, "rate: and period: needed (or policy:)" if rate.nil? || period.nil?

        @numbers = [units("rate", rate), Common.ms("period", period)]
        @numbers.push("BURST", units("burst", burst)) unless burst.nil?
      else
        raise ArgumentError, "limit: and window: needed (or policy:)" if limit.nil? || !window.is_a?(Numeric)

        @numbers = [units("limit", limit), Common.ms("window", window)]
      end
    end

    # Take +cost+ units; a Result. See the class comment for +wait+ and +at+.
    def acquire(cost: 1, wait: 0, at: nil)
      units("cost", cost)
      cmd = @algorithm == :gcra ? "RL.GCRA" : "RL.WINDOW"
      wait_ms = wait.nil? ? nil : Common.ms("wait", wait, minimum: 0)
      WaitBudget.new(wait_ms, Common.round_cap_ms(client)).run do |rnd|
        args = [cmd, key, *@numbers, *cost_args(cost)]
        args.push("WAIT", rnd) if rnd.positive?
        args.push("AT", Common.now_ms(at)) if at
        reply = rnd.positive? ? Common.with_waiter(client) { |c| Common.call(c, *args) } : Common.call(client, *args)
        r = Result.from_reply(reply)
        [r.allowed? || r.retry_after.nil?, r]
      end
    end

    # Like #acquire, raising RateLimited (with the Result) when refused; returns the Result.
    def acquire!(cost: 1, wait: 0, at: nil)
      r = acquire(cost: cost, wait: wait, at: at)
      raise RateLimited.new(r, key) unless r.allowed?

      r
    end

    # What #acquire(cost:) would answer, taking nothing (RL.GCRA_PEEK / RL.WINDOW_PEEK).
    def peek(cost: 1, at: nil)
      units("cost", cost)
      args = [@algorithm == :gcra ? "RL.GCRA_PEEK" : "RL.WINDOW_PEEK", key, *@numbers, *cost_args(cost)]
      args.push("AT", Common.now_ms(at)) if at
      Result.from_reply(Common.call(client, *args))
    end

    # Give up to +n+ units back (RL.REFUND), never below empty; returns the units given back.
    def refund(n, at: nil)
      args = ["RL.REFUND", key, units("n", n)]
      args.push("AT", Common.now_ms(at)) if at
      Common.call(client, *args).to_i
    end

    # Run the block when +cost+ units are taken, else raise RateLimited.
    def limit(cost: 1, wait: 0)
      acquire!(cost: cost, wait: wait)
      yield
    end

    def inspect
      "#<#{self.class.name} #{key.inspect} #{@algorithm}>"
    end

    private

    def cost_args(cost)
      cost == 1 ? [] : ["COST", cost]
    end

    def units(name, v)
      raise ArgumentError, "#{name} must be an Integer >= 0, got #{v.inspect}" unless v.is_a?(Integer) && v >= 0

      v
    end
  end

  # Stored policies (RL.POLICY_*): node-wide, not keys; in Redis Cluster set them on every
  # primary.
  module Policy
    module_function

    # RL.POLICY_SET name GCRA rate period-ms [BURST capacity]
    def set_gcra(client, name, rate:, period:, burst: nil)
      args = ["RL.POLICY_SET", name, "GCRA", rate, Common.ms("period", period)]
      args.push("BURST", burst) if burst
      Common.call(client, *args)
      nil
    end

    # RL.POLICY_SET name WINDOW limit window-ms
    def set_window(client, name, limit:, window:)
      Common.call(client, "RL.POLICY_SET", name, "WINDOW", limit, Common.ms("window", window))
      nil
    end

    # {type: "GCRA", rate:, period: (s), burst: (or nil)} or {type: "WINDOW", limit:, window: (s)},
    # or nil.
    def get(client, name)
      r = Common.call(client, "RL.POLICY_GET", name)
      return nil if r.nil?

      if r[0].to_s.upcase == "GCRA"
        { type: "GCRA", rate: r[1].to_i, period: r[2].to_i / 1000.0, burst: r[4]&.to_i }
      else
        { type: "WINDOW", limit: r[1].to_i, window: r[2].to_i / 1000.0 }
      end
    end

    # true when there was such a policy.
    def delete(client, name)
      Common.call(client, "RL.POLICY_DEL", name).to_i == 1
    end

    def list(client)
      Common.call(client, "RL.POLICY_LIST")
    end
  end
end
