# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache/traffic_jam/limit.rb -- TrafficJam::Limit, a continuously regenerating
# limit: the amount used falls at max/period per second and never counts above max. It is a
# GCRA on the module (RL.GCRA / RL.GCRA_PEEK / RL.REFUND, all with AT = the process clock),
# in fractions of a unit: the rate is max * scale per period, so an amount discounted by the
# time since a past `time:` keeps its fraction.

module TrafficJam
  # A limit on an (action, value) pair: +max+ per +period+ seconds, regenerating.
  class Limit
    # @!attribute [r] action  the name of the action limited
    # @!attribute [r] value   the target (its to_rate_limit_value, else to_s, names the key)
    # @!attribute [r] max     the cap of the amount
    # @!attribute [r] period  seconds to regenerate from max used to 0
    attr_reader :action, :max, :period, :value

    # @raise [ArgumentError] if max or period is nil
    def initialize(action, value, max: nil, period: nil)
      raise ArgumentError, "Max is required" if max.nil?
      raise ArgumentError, "Period is required" if period.nil?

      @action = action
      @value = value
      @max = max
      @period = period
    end

    # Whether incrementing by +amount+ would exceed the limit (changes nothing).
    def exceeded?(amount = 1)
      used + amount > max
    end

    # self when incrementing by +amount+ would exceed the limit, else nil.
    def limit_exceeded(amount = 1)
      self if exceeded?(amount)
    end

    # Increment the amount used by +amount+, unless that would exceed the limit (then nothing
    # changes). +time+: when the increment happens; one in the past is discounted by what
    # would have regenerated since (a no-op once that reaches zero), which is how a
    # decrement(amount, time: t) rolls back an increment made at t.
    # @return [Boolean] whether the increment was made
    def increment(amount = 1, time: Time.now)
      return amount <= 0 if max.zero?
      raise ArgumentError, "Amount must be an integer" if amount != amount.to_i

      amount = amount.to_i
      return true if amount.zero?

      at, units = discounted(amount.abs, time)
      return true if units <= 0

      if amount.positive?
        return false if units > scaled_max

        reply = call("RL.GCRA", key, scaled_max, period_ms, "BURST", scaled_max, "COST", units, "AT", at)
        reply[0].to_i == 1
      else
        call("RL.REFUND", key, units, "AT", at)
        true
      end
    end

    # Like #increment, raising LimitExceededError (after logging to config.logger) instead of
    # answering false.
    def increment!(amount = 1, time: Time.now)
      return if increment(amount, time: time)

      config.logger&.info("Exceeded Limit - Action: #{action}, Value: #{value}, Max: #{max}")
      raise TrafficJam::LimitExceededError, self
    end

    # Decrement the amount used (never below 0); +time+ as for #increment.
    # @return [true]
    def decrement(amount = 1, time: Time.now)
      increment(-amount, time: time)
    end

    # Reset the amount used to 0.
    def reset
      redis.del(key)
      nil
    end

    # The amount used now, regeneration included, at most max.
    def used
      return 0 if max.zero?

      reply = call("RL.GCRA_PEEK", key, scaled_max, period_ms, "BURST", scaled_max, "COST", 0,
                   "AT", McaptchaCache::Common.now_ms)
      max - reply[1].to_i / scale
    end

    # max - used.
    def remaining
      max - used
    end

    def flatten
      [self]
    end

    # The Redis key: "#{key_prefix}:#{action}:#{hash of value}".
    def key
      @key ||= begin
        v = value.respond_to?(:to_rate_limit_value) ? value.to_rate_limit_value : value
        "#{key_prefix}:#{action}:#{Digest::MD5.base64digest(v.to_s)[0...config.hash_length]}"
      end
    end

    def key_prefix
      config.key_prefix
    end

    private

    def config
      TrafficJam.config
    end

    def redis
      config.redis
    end

    def call(*args)
      McaptchaCache::Common.call(redis, *args)
    end

    def period_ms
      [(period * 1000).round, 1].max
    end

    # Fractions of a unit the GCRA counts (1 to 1000), so each fraction still lasts at least
    # 100 µs of the period.
    def scale
      @scale ||= (period_ms * 1000 / (max * 100)).clamp(1, 1000)
    end

    def scaled_max
      max * scale
    end

    # [AT ms, units] for +amount+ at +time+: a past time is discounted by what regenerated
    # since (now - time) * max / period; a future one is sent as is.
    def discounted(amount, time)
      now = Time.now
      ago = now.to_r - time.to_r
      return [McaptchaCache::Common.now_ms(time), amount * scale] unless ago.positive?

      left = amount - ago * max / period.to_r
      [McaptchaCache::Common.now_ms(now), (left * scale).round]
    end
  end
end
