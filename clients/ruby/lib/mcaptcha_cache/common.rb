# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache/common.rb -- what every class of the gem shares: sending a command and
# mapping its error, seconds (floats) to the module's milliseconds, the process clock as
# Unix ms (what `AT unix-ms` carries), and server-side waits split into rounds shorter than
# redis-rb's read timeout, run on connections of their own so a blocked WAIT never holds up
# the shared client (renewals, other threads).
require "redis"
require_relative "errors"

module McaptchaCache
  # Largest WAIT the module accepts (ms).
  MAX_WAIT_MS = 1_099_511_627_776
  # One round of an unbounded wait when the client has no read timeout (ms).
  UNBOUNDED_ROUND_MS = 3_600_000

  module Common
    module_function

    # Send one command; a Redis::CommandError becomes the gem's exception.
    def call(client, *args)
      client.call(*args.map { |a| a.is_a?(Symbol) ? a.to_s : a })
    rescue Redis::CommandError => e
      raise McaptchaCache.map_error(e)
    end

    # Seconds (Integer or Float) -> whole milliseconds, at least +minimum+.
    def ms(name, seconds, minimum: 1)
      raise TypeError, "#{name} must be a number of seconds, not #{seconds.inspect}" unless seconds.is_a?(Numeric)

      v = (seconds * 1000).round
      raise ArgumentError, "#{name} must be at least #{minimum} ms, got #{seconds.inspect} s" if v < minimum

      v
    end

    # The process clock (Time.now, which Timecop moves) as Unix milliseconds.
    def now_ms(time = Time.now)
      (time.to_r * 1000).floor
    end

    # Whether a refusal to a WAIT of +round_ms+ sent at +started+ came long before the round's
    # end: the server answers a waiter only when served or at its timeout, so such an answer
    # means the request cannot wait (for a lock: this owner holds it already).
    def refused_early?(round_ms, started)
      round_ms.positive? && monotonic - started < round_ms / 2000.0
    end

    # The clock for measuring waits (not moved by Timecop).
    def monotonic
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    # Longest WAIT (ms) one round may ask for before the client's read timeout fires
    # (the reply to a WAIT comes at its end): the timeout minus 20% (at least 100 ms).
    # nil when the client has no read timeout.
    def round_cap_ms(client)
      c = client.respond_to?(:_client) ? client._client : client
      t = if c.respond_to?(:read_timeout) then c.read_timeout
          elsif c.respond_to?(:timeout) then c.timeout
          end
      return nil if t.nil? || t.to_f <= 0

      total = t.to_f * 1000.0
      [1, (total - [100.0, total * 0.2].max).floor].max
    end

    # A connection of the pool kept beside +client+ for blocking waits (redis-rb serializes
    # every command of one Redis object: a WAIT there would stall the other threads' ones).
    def with_waiter(client)
      conn = WAITERS_LOCK.synchronize { (WAITERS[client] ||= []).pop } || client.dup
      begin
        yield conn
      rescue StandardError
        conn.close rescue nil # rubocop:disable Style/RescueModifier
        conn = nil
        raise
      ensure
        WAITERS_LOCK.synchronize { (WAITERS[client] ||= []) << conn } if conn
      end
    end

    # client => idle waiter connections (weak: they go with the client)
    WAITERS = ObjectSpace::WeakMap.new
    WAITERS_LOCK = Mutex.new
  end

  # Splits a wait of +wait_ms+ (nil: no end) into server-side WAIT rounds, each short enough
  # to be answered before the read timeout. A round is one blocked command: the server
  # queues it and answers when it is served or when the round ends; nothing polls.
  class WaitBudget
    def initialize(wait_ms, cap_ms)
      @wait_ms = wait_ms
      @cap = cap_ms
      @deadline = wait_ms && Common.monotonic + wait_ms / 1000.0
    end

    # The WAIT of the next round in ms (0: answer at once).
    def next_round_ms
      left = if @deadline.nil? then UNBOUNDED_ROUND_MS
             else ((@deadline - Common.monotonic) * 1000).floor
             end
      return 0 if left <= 0

      left = [left, @cap].min if @cap
      left.clamp(0, MAX_WAIT_MS)
    end

    def expired?
      @wait_ms&.zero? || (@deadline && Common.monotonic >= @deadline)
    end

    # Run +block+ with each round's WAIT until it returns a truthy "done" or the budget
    # ends; returns the last reply. +block+ gets the round's ms and returns [done, reply].
    def run
      loop do
        rnd = next_round_ms
        started = Common.monotonic
        done, reply = yield rnd
        return reply if done || expired?
        # answered long before its WAIT ended: never spin
        sleep(0.01) if rnd.positive? && Common.monotonic - started < rnd / 2000.0
      end
    end
  end
end
