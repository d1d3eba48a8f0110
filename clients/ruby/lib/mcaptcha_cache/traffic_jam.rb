# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache/traffic_jam.rb -- `TrafficJam`, the public API and documented behaviour of
# Coinbase's TrafficJam gem (configure/config, register, limit, the class-level helpers,
# reset_all, Limit and its kinds, LimitGroup, the errors), on the module's rate limits
# instead of Lua scripts. Change `require 'traffic_jam'` to `require 'mcaptcha_cache/traffic_jam'`.
# Every amount carries the client's time: time: and the process clock reach the server as
# AT unix-ms (so Timecop moves them too).
require "digest/md5"
require_relative "../mcaptcha_cache"

module TrafficJam
  # The errors (also reachable as TrafficJam::LimitNotFound etc.).
  module Errors
    class LimitNotFound < StandardError; end

    # An increment! refused; #limit is the limit that would have been exceeded.
    class LimitExceededError < StandardError
      attr_accessor :limit

      def initialize(limit)
        super("Rate limit exceeded: #{limit.action}")
        @limit = limit
      end
    end

    class InvalidKeyError < StandardError; end
    class UnknownReturnValue < StandardError; end
  end
  include Errors

  # Settings: redis, key_prefix ("traffic_jam"), hash_length (22), logger; registered limits.
  class Configuration
    OPTIONS = %i[key_prefix hash_length redis logger].freeze
    attr_accessor(*OPTIONS)

    def initialize(options = {})
      OPTIONS.each { |o| send("#{o}=", options[o]) }
    end

    # Register a fixed limit for an action: +max+ per +period+ seconds.
    def register(action, max, period)
      @limits ||= {}
      @limits[action.to_sym] = { max: max, period: period }
    end

    def unregister(action)
      @limits&.delete(action.to_sym)
    end

    def max(action)
      limits(action)[:max]
    end

    def period(action)
      limits(action)[:period]
    end

    # {max:, period:} registered for the action; raises LimitNotFound.
    def limits(action)
      @limits ||= {}
      found = @limits[action.to_sym]
      raise TrafficJam::LimitNotFound, action.to_s if found.nil?

      found
    end
  end

  @config = Configuration.new(key_prefix: "traffic_jam", hash_length: 22)

  class << self
    attr_reader :config

    # Yields config to the block.
    def configure
      yield config
    end

    # A Limit with the action's registered max and period (LimitNotFound if none).
    def limit(action, value)
      TrafficJam::Limit.new(action, value, **config.limits(action.to_sym))
    end

    # Delete every limit's key of the action (every action when nil). Not for production:
    # it scans the keyspace (on every primary in Redis Cluster).
    def reset_all(action: nil)
      pattern = action.nil? ? "#{config.key_prefix}:*" : "#{config.key_prefix}:#{action}:*"
      config.redis.keys(pattern).each { |k| config.redis.del(k) }
      nil
    end

    %w[exceeded? increment increment! decrement reset used remaining].each do |m|
      define_method(m) do |action, value, *args, **kw|
        limit(action, value).send(m, *args, **kw)
      end
    end
  end
end

require_relative "traffic_jam/limit"
require_relative "traffic_jam/limit_kinds"
require_relative "traffic_jam/limit_group"
