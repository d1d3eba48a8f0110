# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache/traffic_jam/limit_group.rb -- TrafficJam::LimitGroup: several limits
# incremented all or none (those already incremented are decremented at the same time when
# a later one refuses), nested groups flattened.

module TrafficJam
  # A group of limits (or groups) incremented together, all or none.
  class LimitGroup
    attr_reader :limits

    # LimitGroup.new(limit1, limit2) or LimitGroup.new([limit1, limit2]);
    # +ignore_nil_values+ drops the limits whose value is nil.
    def initialize(*limits, ignore_nil_values: false)
      @limits = limits.flatten
      @ignore_nil_values = ignore_nil_values
      @limits.reject! { |l| l.respond_to?(:value) && l.value.nil? } if @ignore_nil_values
    end

    def <<(limit)
      limits << limit unless @ignore_nil_values && limit.respond_to?(:value) && limit.value.nil?
    end

    # Increment every limit, or none when any would be exceeded.
    def increment(amount = 1, time: Time.now)
      refused = limits.find_index { |l| !l.increment(amount, time: time) }
      limits[0...refused].each { |l| l.decrement(amount, time: time) } if refused
      refused.nil?
    end

    # Like #increment, raising the refusing limit's LimitExceededError. With a block: runs it
    # after the increments and returns its value; the increments are taken back when the
    # block raises or returns false.
    def increment!(amount = 1, time: Time.now)
      error = nil
      refused = limits.find_index do |l|
        l.increment!(amount, time: time)
        false
      rescue TrafficJam::LimitExceededError => e
        error = e
        true
      end
      if refused
        limits[0...refused].each { |l| l.decrement(amount, time: time) }
        raise error
      end
      return unless block_given?

      begin
        result = yield
      rescue StandardError
        decrement(amount, time: time)
        raise
      end
      decrement(amount, time: time) if result == false
      result
    end

    def decrement(amount = 1, time: Time.now)
      limits.all? { |l| l.decrement(amount, time: time) }
    end

    def exceeded?(amount = 1)
      limits.any? { |l| l.exceeded?(amount) }
    end

    # The first limit that incrementing by +amount+ would exceed, or nil.
    def limit_exceeded(amount = 1)
      limits.each do |l|
        found = l.limit_exceeded(amount)
        return found if found
      end
      nil
    end

    def reset
      limits.each(&:reset)
      nil
    end

    # The smallest remaining of the limits.
    def remaining
      limits.map(&:remaining).min
    end

    def flatten
      limits.map(&:flatten).flatten
    end
  end
end
