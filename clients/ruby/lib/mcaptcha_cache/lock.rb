# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache/lock.rb -- leased locks on LOCK.ACQUIRE / LOCK.EXTEND / LOCK.RELEASE:
# Lock (a mutex with a fencing token, renewed by a background thread while held),
# Semaphore (PERMITS n, TAKE k) and MultiLock (LOCK.*_ALL: several keys, all or none).
# Times are seconds (Integer or Float); the module's milliseconds stay inside.
require "securerandom"
require_relative "common"

module McaptchaCache
  # One holder of LOCK.INSPECT: owner, lease left (s), token, count (0: a lock-delay).
  Holder = Struct.new(:owner, :lease, :token, :count) do
    def lock_delay?
      count.zero?
    end
  end

  # LOCK.INSPECT: permits, last fencing token, waiters, holders, pool adjustment and size.
  LockInfo = Struct.new(:permits, :last_token, :waiters, :holders, :adjustment, :size) do
    def self.from_reply(reply)
      return nil if reply.nil?

      holders = reply[3].map { |h| Holder.new(h[0].to_s, h[1].to_i / 1000.0, h[2].to_i, h[3].to_i) }
      new(reply[0].to_i, reply[1].to_i, reply[2].to_i, holders, reply[4]&.to_i || 0, reply[5]&.to_i)
    end
  end

  # A leased mutex held on the server.
  #
  #   lock = McaptchaCache::Lock.new(redis, "orders:42", lease: 10, wait: 5)
  #   lock.synchronize { |l| write(fencing_token: l.token) }
  #
  # - +lease+ (s): while held, a background thread renews it (LOCK.EXTEND) every
  #   +renew_every+ (default lease / 3); a crashed holder loses it one lease after its last
  #   renewal.
  # - +wait+ (s): how long #acquire waits for a lock someone else holds: nil (default)
  #   waits indefinitely, 0 tries once. The wait happens on the server (LOCK.ACQUIRE ...
  #   WAIT), first come first served, in rounds shorter than the client's read timeout, on a
  #   connection of its own.
  # - +session+: LOCK.ACQUIRE ... SESSION: the server also releases the lock when the
  #   connection that acquired it closes; the lock then acquires and releases on a
  #   connection of its own (client.dup) for as long as it holds.
  # - +on_lost+: called with the lock (from the renewal thread) when the lease is found lost.
  # - +owner+ (default: random per instance), +lock_delay+ (s, LOCKDELAY), +auto_renew+.
  #
  # After a grant, #token is the fencing token (larger than any the lock granted before).
  # Losing the lease is never silent: #lost? becomes true and the next #release or #extend
  # raises LockLost. One instance is one holder, not reentrant, not shared between threads.
  class Lock
    attr_reader :client, :name, :owner, :token, :lease, :wait, :lost_reason

    def initialize(client, name, lease: 30, wait: nil, session: false, auto_renew: true, renew_every: nil,
                   on_lost: nil, owner: nil, lock_delay: nil)
      @client = client
      @name = name
      @lease = lease
      @lease_ms = Common.ms("lease", lease)
      @wait = wait
      @session = session ? true : false
      @auto_renew = auto_renew
      @renew_every_ms = auto_renew ? renew_ms(renew_every) : nil
      @on_lost = on_lost
      @owner = (owner || SecureRandom.hex(16)).to_s
      @lock_delay_ms = lock_delay && Common.ms("lock_delay", lock_delay)
      @token = nil
      @held = false
      @lost = false
      @lost_reason = nil
      @state = Mutex.new
      @session_conn = nil
      @renewer = nil
      @lease_deadline = 0.0
    end

    def held?
      @held
    end

    def lost?
      @lost
    end

    def session?
      @session
    end

    def inspect
      "#<#{self.class.name} #{name.inspect} owner=#{owner} held=#{@held} lost=#{@lost} token=#{@token.inspect}>"
    end

    # Acquire; true when granted, false when the wait ran out. +wait+ overrides the
    # instance's (nil: indefinitely; 0: try once). Raises LockError if already held here.
    def acquire(wait: @wait)
      raise LockError, "#{name.inspect} is already held by this instance; release it first" if @held

      check_wait(wait)
      stop_renewer
      @lost = false
      @lost_reason = nil
      if @session
        @session_conn ||= client.dup
        grant_on(@session_conn, wait)
      else
        grant_with_rounds(wait)
      end
    end

    # Release (LOCK.RELEASE): the longest waiter gets it. Raises LockLost if the lock was lost
    # while held, LockNotOwned if this instance does not hold it.
    def release
      stop_renewer
      unless @held
        drop_session
        raise LockLost, "lock #{name.inspect} was lost while held: #{@lost_reason}" if @lost

        raise LockNotOwned, "lock #{name.inspect} is not held by this instance"
      end
      begin
        missed = release_missed(Common.call(@session_conn || client, *release_args))
      rescue LockNotOwned, WrongType => e
        lost!("the server answered the release: #{e.message}")
        drop_session
        raise LockLost, "lock #{name.inspect} was lost while held: #{@lost_reason}"
      end
      if missed
        lost!("the server answered the release: #{missed}")
        drop_session
        raise LockLost, "lock #{name.inspect} was lost while held: #{@lost_reason}"
      end
      @state.synchronize { @held = false }
      drop_session
      nil
    end

    # Renew the lease to end +seconds+ from now (default: the lease); returns the new lease
    # (s). Raises LockLost when the server no longer has it for this owner.
    def extend(seconds = nil)
      ms = seconds.nil? ? @lease_ms : Common.ms("seconds", seconds)
      unless @held
        raise LockLost, "lock #{name.inspect} was lost while held: #{@lost_reason}" if @lost

        raise LockNotOwned, "lock #{name.inspect} is not held by this instance"
      end
      sent = Common.monotonic
      begin
        got = Common.call(client, *extend_args(ms)).to_i
      rescue LockNotOwned, WrongType => e
        lost!("the server refused the extension: #{e.message}")
        raise LockLost, "lock #{name.inspect} was lost while held: #{@lost_reason}"
      end
      @lease_deadline = sent + got / 1000.0
      got / 1000.0
    end

    # Acquire, run the block (given the lock), release; returns the block's value. Raises
    # LockNotAcquired when the wait ran out, LockLost (after the block) if the lease was lost.
    def synchronize(wait: @wait)
      raise LockNotAcquired, "could not acquire #{name.inspect} within #{wait.inspect} s" unless acquire(wait: wait)

      begin
        result = yield self
      rescue Exception # rubocop:disable Lint/RescueException
        begin
          release
        rescue LockError
          nil # the block's exception matters more
        end
        raise
      end
      release
      result
    end

    # LOCK.INSPECT: a LockInfo, or nil when the key does not exist.
    def info
      LockInfo.from_reply(Common.call(client, "LOCK.INSPECT", name))
    end

    # Whether the server lists this owner among the holders (a held lock it does not list is
    # marked lost).
    def owned?
      i = info
      mine = !i.nil? && i.holders.any? { |h| h.owner == owner && !h.lock_delay? }
      lost!("LOCK.INSPECT does not list this owner") if @held && !mine
      mine
    end

    # Whether any permit is taken (by a holder or a lock-delay).
    def locked?
      i = info
      !i.nil? && !i.holders.empty?
    end

    private

    def renew_ms(renew_every)
      return [1, @lease_ms / 3].max if renew_every.nil?

      v = Common.ms("renew_every", renew_every)
      raise ArgumentError, "renew_every (#{renew_every}) must be below the lease (#{@lease})" if v >= @lease_ms

      v
    end

    def check_wait(wait)
      return if wait.nil?
      raise TypeError, "wait must be seconds or nil, not #{wait.inspect}" unless wait.is_a?(Numeric)
      raise ArgumentError, "wait must be >= 0 (nil waits indefinitely)" if wait.negative?
    end

    def wait_ms(wait)
      wait.nil? ? nil : (wait * 1000).round
    end

    def acquire_args(round_ms)
      args = ["LOCK.ACQUIRE", name, owner, @lease_ms]
      args.push("SESSION") if @session
      args.push("LOCKDELAY", @lock_delay_ms) if @lock_delay_ms
      args.push("WAIT", round_ms) if round_ms.positive?
      args
    end

    def release_args
      ["LOCK.RELEASE", name, owner]
    end

    def extend_args(ms)
      ["LOCK.EXTEND", name, owner, ms]
    end

    def release_missed(_reply)
      nil
    end

    # Rounds of WAIT, each on a waiter connection (the first try, WAIT 0, on the client).
    def grant_with_rounds(wait)
      budget = WaitBudget.new(wait_ms(wait), Common.round_cap_ms(client))
      budget.run do |rnd|
        started = Common.monotonic
        ok = if rnd.positive?
               Common.with_waiter(client) { |conn| send_acquire(conn, rnd) }
             else
               send_acquire(client, 0)
             end
        # a WAIT refused long before its end: this owner holds it already (another instance)
        [ok || Common.refused_early?(rnd, started), ok]
      end
    end

    def grant_on(conn, wait)
      budget = WaitBudget.new(wait_ms(wait), Common.round_cap_ms(conn))
      ok = budget.run do |rnd|
        started = Common.monotonic
        g = send_acquire(conn, rnd)
        [g || Common.refused_early?(rnd, started), g]
      end
      drop_session unless ok
      ok
    end

    def send_acquire(conn, rnd)
      started = Common.monotonic
      reply = begin
        Common.call(conn, *acquire_args(rnd))
      rescue ServerError, LockError
        drop_session
        raise
      rescue StandardError
        # the reply is lost: a grant may have been made (undo it, best effort)
        begin
          Common.call(conn, *release_args)
        rescue StandardError
          nil
        end
        drop_session
        raise
      end
      return false unless reply[0].to_i == 1

      @token = reply[1].to_i
      @lease_deadline = started + reply[2].to_i / 1000.0
      @state.synchronize { @held = true }
      start_renewer
      true
    end

    def drop_session
      c = @session_conn
      @session_conn = nil
      c&.close
    rescue StandardError
      nil
    end

    def lost!(reason)
      @state.synchronize do
        return unless @held

        @held = false
        @lost = true
        @lost_reason = reason
      end
      @renewer&.stop_soon
      warn "mcaptcha_cache: lock #{name.inspect} (owner #{owner}, token #{token}) lost: #{reason}" if $VERBOSE
      begin
        @on_lost&.call(self)
      rescue StandardError => e
        warn "mcaptcha_cache: on_lost of lock #{name.inspect} failed: #{e.inspect}"
      end
    end

    def start_renewer
      return unless @auto_renew

      @renewer = Renewer.new(@renew_every_ms / 1000.0) { renew_once }
    end

    def stop_renewer
      r = @renewer
      @renewer = nil
      r&.stop
    end

    # One renewal by the background thread; false stops it.
    def renew_once
      return false unless @held

      sent = Common.monotonic
      begin
        got = Common.call(client, *extend_args(@lease_ms)).to_i
        @lease_deadline = sent + got / 1000.0
        true
      rescue LockNotOwned, WrongType => e
        lost!("renewal refused: #{e.message}")
        false
      rescue StandardError => e # connection errors, OOM, READONLY...: retry until the lease ends
        return true if Common.monotonic < @lease_deadline

        lost!("renewals failed until the lease ended: #{e.inspect}")
        false
      end
    end
  end

  # A background thread calling its block every +interval+ seconds until stopped or the
  # block returns false. #stop wakes it and joins it (no call runs after #stop returns).
  class Renewer
    def initialize(interval, &block)
      @interval = interval
      @block = block
      @mutex = Mutex.new
      @cond = ConditionVariable.new
      @stopped = false
      @thread = Thread.new { run }
      @thread.name = "mcaptcha_cache renewer" if @thread.respond_to?(:name=)
    end

    def stop_soon
      @mutex.synchronize do
        @stopped = true
        @cond.broadcast
      end
    end

    def stop
      stop_soon
      @thread.join unless Thread.current == @thread
    end

    private

    def run
      loop do
        @mutex.synchronize do
          deadline = Common.monotonic + @interval
          until @stopped
            left = deadline - Common.monotonic
            break if left <= 0

            @cond.wait(@mutex, left)
          end
        end
        return if @stopped
        return unless @block.call
      end
    end
  end

  # A counting semaphore: at most +permits+ holders at once, each with its own lease,
  # fencing token and renewal (LOCK.ACQUIRE ... PERMITS n [TAKE k]). Every holder must
  # pass the same +permits+ while any holds it (else PermitsMismatch).
  class Semaphore < Lock
    attr_reader :permits, :take

    def initialize(client, name, permits:, take: 1, **kw)
      raise ArgumentError, "permits must be an Integer >= 1" unless permits.is_a?(Integer) && permits >= 1
      raise ArgumentError, "take must be an Integer from 1 to permits" unless take.is_a?(Integer) && take.between?(1, permits)

      @permits = permits
      @take = take
      super(client, name, **kw)
    end

    # LOCK.ADD_PERMITS: change the pool's size by +delta+; returns the size after.
    def add_permits(delta)
      Common.call(client, "LOCK.ADD_PERMITS", name, delta, "PERMITS", permits).to_i
    end

    # LOCK.DRAIN_PERMITS: take every free permit out of the pool; returns how many.
    def drain_permits
      Common.call(client, "LOCK.DRAIN_PERMITS", name, "PERMITS", permits).to_i
    end

    # LOCK.AVAILABLE_PERMITS: the permits free now.
    def available_permits
      Common.call(client, "LOCK.AVAILABLE_PERMITS", name, "PERMITS", permits).to_i
    end

    private

    def acquire_args(round_ms)
      args = ["LOCK.ACQUIRE", name, owner, @lease_ms, "PERMITS", permits]
      args.push("TAKE", take) if take > 1
      args.push("SESSION") if session?
      args.push("LOCKDELAY", @lock_delay_ms) if @lock_delay_ms
      args.push("WAIT", round_ms) if round_ms.positive?
      args
    end
  end

  # Several exclusive locks of one hash slot (use a hash tag: "{acct}:1", "{acct}:2"), taken
  # all or none (LOCK.ACQUIRE_ALL), renewed and released together; one fencing token valid
  # on every key. In Redis Cluster, redis-rb cannot tell these commands' node (their keys are
  # movable): it sends them to any primary and follows the MOVED redirection.
  class MultiLock < Lock
    attr_reader :keys

    def initialize(client, keys, **kw)
      keys = Array(keys).map(&:to_s)
      raise ArgumentError, "a MultiLock needs at least one key" if keys.empty?
      raise ArgumentError, "a MultiLock's keys must be distinct" if keys.uniq.size != keys.size

      @keys = keys
      super(client, keys.first, **kw)
    end

    private

    def acquire_args(round_ms)
      args = ["LOCK.ACQUIRE_ALL", keys.size, *keys, owner, @lease_ms]
      args.push("SESSION") if session?
      args.push("LOCKDELAY", @lock_delay_ms) if @lock_delay_ms
      args.push("WAIT", round_ms) if round_ms.positive?
      args
    end

    def release_args
      ["LOCK.RELEASE_ALL", keys.size, *keys, owner]
    end

    def extend_args(ms)
      ["LOCK.EXTEND_ALL", keys.size, *keys, owner, ms]
    end

    def release_missed(reply)
      gone = keys.zip(reply).select { |_, left| left.to_i.negative? }.map(&:first)
      gone.empty? ? nil : "not held any more at #{gone.join(', ')}"
    end
  end
end
