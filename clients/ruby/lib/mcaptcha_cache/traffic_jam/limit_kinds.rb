# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache/traffic_jam/limit_kinds.rb -- TrafficJam's other limits: GCRALimit and
# SimpleLimit (increment only, time ignored: a plain GCRA, RL.GCRA), RollingLimit (at most
# max within any period: an exact sliding window, RL.WINDOW) and LifetimeLimit (at most max
# ever: a plain counter).

module TrafficJam
  # A GCRA limit (Generic Cell Rate Algorithm): increments only; +time:+ is ignored (the
  # process clock is used).
  class GCRALimit < Limit
    # @return [Boolean] whether the increment was made
    # @raise [ArgumentError] for a negative or fractional amount
    def increment(amount = 1, time: Time.now) # rubocop:disable Lint/UnusedMethodArgument
      return true if amount.zero?
      return false if max.zero?
      raise ArgumentError, "Amount must be positive" if amount.negative?
      raise ArgumentError, "Amount must be an integer" if amount != amount.to_i
      return false if amount > max

      units = amount.to_i * scale
      reply = call("RL.GCRA", key, scaled_max, period_ms, "BURST", scaled_max, "COST", units,
                   "AT", McaptchaCache::Common.now_ms)
      reply[0].to_i == 1
    end

    # @raise [NotImplementedError] decrement is not defined for this limit
    def decrement(_amount = 1, time: Time.now) # rubocop:disable Lint/UnusedMethodArgument
      raise NotImplementedError, "decrement is not defined for #{self.class.name.split('::').last}"
    end

    def key_prefix
      "#{config.key_prefix}:s"
    end
  end

  # Like GCRALimit: efficient increments, no decrement.
  class SimpleLimit < GCRALimit
  end

  # At most +max+ within any +period+ seconds (an exact sliding window: a hit leaves at most
  # one second after its period). Period 0: each increment is compared to max alone.
  class RollingLimit < Limit
    # Increment unless that would exceed max within the period; +time+ is the hit's time.
    def increment(amount = 1, time: Time.now)
      raise ArgumentError, "Amount must be an integer" if amount != amount.to_i
      return amount <= 0 if max.zero?
      return amount <= max if period.zero?
      return true if amount.zero?
      return false if amount > max

      if amount.negative?
        call("RL.REFUND", key, -amount.to_i, "AT", McaptchaCache::Common.now_ms)
        return true
      end
      reply = call("RL.WINDOW", key, max, period_ms, "COST", amount.to_i, "AT", McaptchaCache::Common.now_ms(time))
      reply[0].to_i == 1
    end

    # The amount within the period now (at most max).
    def used
      return 0 if max.zero? || period.zero?

      reply = call("RL.WINDOW_PEEK", key, max, period_ms, "COST", 0, "AT", McaptchaCache::Common.now_ms)
      max - reply[1].to_i
    end
  end

  # At most +max+ ever (no period): a plain Redis counter (INCRBY, taken back when over).
  class LifetimeLimit < Limit
    def initialize(action, value, max: nil)
      super(action, value, max: max, period: -1)
    end

    def increment(amount = 1, time: Time.now) # rubocop:disable Lint/UnusedMethodArgument
      raise ArgumentError, "Amount must be an integer" if amount != amount.to_i
      return amount <= 0 if max.zero?

      amount = amount.to_i
      after = redis.incrby(key, amount)
      return true if amount <= 0 || after <= max

      redis.decrby(key, amount)
      false
    end

    def used
      return 0 if max.zero?

      [redis.get(key).to_i, max].min
    end
  end
end
