# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache/master_lock.rb -- `MasterLock`, the public API and documented behaviour of
# Coinbase's MasterLock gem (configure/config, start/started?, synchronize, RedisLock),
# on the module's leased locks instead of SET NX PX and Lua: waiting happens on the server
# (LOCK.ACQUIRE ... WAIT, first come first served) in rounds shorter than redis-rb's read
# timeout, each grant carries a fencing token, and a lease found lost is logged as an error.
# Change `require 'master_lock'` to `require 'mcaptcha_cache/master_lock'`.
require "logger"
require "socket"
require_relative "../mcaptcha_cache"

# Interprocess locking: a block wrapped in MasterLock.synchronize runs in one thread at a
# time across every process sharing the Redis server. A lock is held until the block ends or
# the thread that took it dies; its lease (ttl) is renewed by a background thread (MasterLock.start)
# while the thread lives, so it expires only when its holder is gone.
module MasterLock
  class UnconfiguredError < StandardError; end
  class NotStartedError < StandardError; end
  class LockNotAcquiredError < StandardError; end

  DEFAULT_ACQUIRE_TIMEOUT = 5
  DEFAULT_EXTEND_INTERVAL = 15
  DEFAULT_KEY_PREFIX = "masterlock"
  DEFAULT_SLEEP_TIME = 5
  DEFAULT_TTL = 60

  Config = Struct.new(:acquire_timeout, :extend_interval, :hostname, :logger, :key_prefix, :redis,
                      :sleep_time, :ttl, :cluster)

  # One lock on the key "#{key_prefix}:#{key}" for one owner (LOCK.ACQUIRE / LOCK.EXTEND /
  # LOCK.RELEASE). Times in seconds.
  class RedisLock
    # @return [Config] the configuration (its redis and key_prefix)
    attr_reader :config
    # @return [String] the identifier of the locked resource (without the prefix)
    attr_reader :key
    # @return [String] the owner's identity
    attr_reader :owner
    # @return [Numeric] the lease, in seconds
    attr_reader :ttl
    # @return [Integer, nil] the fencing token of the last grant
    attr_reader :token

    # +config+: a Config (its redis and key_prefix). The older gem's form,
    # RedisLock.new(redis:, key:, owner:, ttl:), is accepted too (key_prefix "masterlock").
    def initialize(key:, owner:, ttl:, config: nil, redis: nil, sleep_interval: nil) # rubocop:disable Lint/UnusedMethodArgument
      raise ArgumentError, "config: (or redis:) is required" if config.nil? && redis.nil?

      config ||= Config.new.tap do |c|
        c.redis = redis
        c.key_prefix = DEFAULT_KEY_PREFIX
      end
      @config = config
      @key = key
      @owner = owner.to_s
      @ttl = ttl
      @token = nil
    end

    def redis
      config.redis
    end

    # The Redis key: "#{key_prefix}:#{key}".
    def redis_key
      "#{config.key_prefix}:#{key}"
    end

    # Acquire, waiting up to +timeout+ seconds on the server (first come first served).
    # @return [Boolean] whether it was acquired (false also when this owner holds it already)
    def acquire(timeout:)
      wait_ms = [(timeout * 1000).round, 0].max
      McaptchaCache::WaitBudget.new(wait_ms, McaptchaCache::Common.round_cap_ms(redis)).run do |rnd|
        args = ["LOCK.ACQUIRE", redis_key, owner, ttl_ms]
        args.push("WAIT", rnd) if rnd.positive?
        started = McaptchaCache::Common.monotonic
        reply = if rnd.positive?
                  McaptchaCache::Common.with_waiter(redis) { |c| McaptchaCache::Common.call(c, *args) }
                else
                  McaptchaCache::Common.call(redis, *args)
                end
        ok = reply[0].to_i == 1
        @token = reply[1].to_i if ok
        # a WAIT refused long before its end: this owner holds the lock already
        [ok || McaptchaCache::Common.refused_early?(rnd, started), ok]
      end
    end

    # Renew the lease to +ttl+ from now if this owner still holds it.
    # @return [Boolean] whether it was extended
    def extend
      McaptchaCache::Common.call(redis, "LOCK.EXTEND", redis_key, owner, ttl_ms)
      true
    rescue McaptchaCache::LockNotOwned
      false
    end

    # Release if this owner still holds it.
    # @return [Boolean] whether it was released
    def release
      McaptchaCache::Common.call(redis, "LOCK.RELEASE", redis_key, owner)
      true
    rescue McaptchaCache::LockNotOwned
      false
    end

    private

    def ttl_ms
      [(ttl * 1000).to_i, 1].max
    end
  end

  # The held locks, renewed by the background thread started by MasterLock.start.
  class Registry
    Registration = Struct.new(:lock, :mutex, :thread, :acquired_at, :released, :extend_interval)

    attr_reader :locks

    def initialize
      @locks = []
      @locks_mutex = Mutex.new
    end

    # Register a held lock, to be renewed every +extend_interval+ seconds.
    def register(lock, extend_interval)
      r = Registration.new(lock, Mutex.new, Thread.current, Time.now, false, extend_interval)
      @locks_mutex.synchronize { @locks << r }
      r
    end

    # No more renewals of that lock (no renewal runs after this returns).
    def unregister(registration)
      registration.mutex.synchronize { registration.released = true }
    end

    # Renew every registered lock held longer than its extend_interval; forget the released
    # ones, and those whose thread died (their lease then runs out).
    def extend_locks
      @locks_mutex.synchronize { @locks.dup }.each { |r| extend_lock(r) }
      @locks_mutex.synchronize { @locks.delete_if(&:released) }
    end

    private

    def extend_lock(registration)
      registration.mutex.synchronize do
        now = Time.now
        if !registration.thread.alive?
          registration.released = true
        elsif !registration.released && registration.acquired_at + registration.extend_interval < now
          if registration.lock.extend
            registration.acquired_at = now
          else
            registration.released = true
            MasterLock.logger.error("Lost lock #{registration.lock.key} (token #{registration.lock.token}): " \
                                    "its lease ended before a renewal")
          end
        end
      end
    rescue StandardError => e
      MasterLock.logger.warn("Failed to extend lock #{registration.lock.key}: #{e.class}: #{e.message}")
    end
  end

  class << self
    # Obtain a mutex around a critical section: only one thread on any machine runs the block
    # at a time. Returns the block's value (a block taking an argument gets the fencing token).
    #
    # @option options [Numeric] :ttl (60) seconds before the lock expires unless renewed
    # @option options [Numeric] :acquire_timeout (5) seconds to wait for the lock
    # @option options [Numeric] :extend_interval (15) seconds between renewals
    # @option options [Boolean] :if when falsey, run the block without the lock
    # @option options [Boolean] :unless when truthy, run the block without the lock
    # @raise [UnconfiguredError] without config.redis
    # @raise [NotStartedError] before MasterLock.start
    # @raise [ArgumentError] extend_interval < 0, or ttl <= extend_interval
    # @raise [LockNotAcquiredError] when the lock was not acquired within acquire_timeout
    def synchronize(key, options = {}, &blk)
      raise UnconfiguredError, "redis must be configured" unless config.redis
      raise NotStartedError unless @registry

      ttl = options[:ttl] || config.ttl
      acquire_timeout = options[:acquire_timeout] || config.acquire_timeout
      extend_interval = options[:extend_interval] || config.extend_interval
      raise ArgumentError, "extend_interval cannot be negative" if extend_interval.negative?
      raise ArgumentError, "ttl must be greater than extend_interval" if ttl <= extend_interval

      if (options.include?(:if) && !options[:if]) || (options.include?(:unless) && options[:unless])
        return call_block(blk, nil)
      end

      lock = RedisLock.new(config: config, key: key, ttl: ttl, owner: generate_owner)
      raise LockNotAcquiredError, key unless lock.acquire(timeout: acquire_timeout)

      registration = @registry.register(lock, extend_interval)
      logger.debug("Acquired lock #{key} (token #{lock.token})")
      begin
        call_block(blk, lock.token)
      ensure
        @registry.unregister(registration)
        if lock.release
          logger.debug("Released lock #{key}")
        else
          logger.warn("Failed to release lock #{key}: not held any more (token #{lock.token})")
        end
      end
    end

    # Start the background thread that renews the held locks (every config.sleep_time
    # seconds it extends those held longer than their extend_interval). Call once at boot.
    def start
      @registry = Registry.new
      @thread_lock ||= Mutex.new
      @thread_lock.synchronize do
        return if @thread&.alive?

        @thread = Thread.new do
          loop do
            @registry.extend_locks
            sleep(config.sleep_time)
          end
        end
      end
      nil
    end

    # @return [Boolean] whether MasterLock.start was called
    def started?
      !@registry.nil?
    end

    def registry
      @registry
    end

    # @return [Logger]
    def logger
      config.logger
    end

    # @return [Config] the settings: redis, logger, ttl (60), acquire_timeout (5),
    #   extend_interval (15), sleep_time (5), key_prefix ("masterlock"), hostname
    def config
      @config ||= begin
        c = Config.new
        c.acquire_timeout = DEFAULT_ACQUIRE_TIMEOUT
        c.extend_interval = DEFAULT_EXTEND_INTERVAL
        c.hostname = Socket.gethostname
        c.logger = Logger.new($stdout)
        c.logger.progname = name
        c.key_prefix = DEFAULT_KEY_PREFIX
        c.sleep_time = DEFAULT_SLEEP_TIME
        c.ttl = DEFAULT_TTL
        c.cluster = false
        c
      end
    end

    # Yields config to the block.
    def configure
      yield config
    end

    private

    def call_block(blk, token)
      blk.arity.zero? ? blk.call : blk.call(token)
    end

    # One owner per process and thread: a nested synchronize on the same key in the same
    # thread is refused (LockNotAcquiredError), not re-entered.
    def generate_owner
      "#{config.hostname}:#{Process.pid}:#{Thread.current.object_id}"
    end
  end
end
