# frozen_string_literal: true

# mcaptcha_cache/errors.rb -- the exception classes of the gem and the mapping from the
# module's error replies (Redis::CommandError) to them, so callers rescue by meaning.
# SPDX-License-Identifier: BSD-3-Clause
#
#   McaptchaCache::Error (StandardError)
#   +-- ServerError                 an error reply not mapped to anything narrower (#reply)
#   |   +-- InvalidArgument         range errors, unknown options, bad owner, cost too large
#   |   +-- WrongType               WRONGTYPE: the key holds another type
#   |   +-- CrossSlot               CROSSSLOT: keys of one command in different slots
#   +-- LockError
#   |   +-- LockNotOwned            this owner does not hold the lock
#   |   |   +-- LockLost            it did, and lost it (lease ended, key deleted, session closed)
#   |   +-- LockNotAcquired         #synchronize could not get it within the wait
#   |   +-- PermitsMismatch         PERMITS differs from the held semaphore's size
#   +-- RateLimited                 refused by a limiter (#result)
#   +-- CaptchaError
#       +-- CaptchaNotFound, CaptchaExists, ChallengeNotFound, ChallengeExists
#       +-- InvalidCaptchaConfig
require "redis"

module McaptchaCache
  class Error < StandardError; end

  # An error reply of the server; #reply is its text.
  class ServerError < Error
    attr_reader :reply

    def initialize(message = nil, reply: nil)
      super(message)
      @reply = reply || message
    end
  end

  class InvalidArgument < ServerError; end
  class WrongType < ServerError; end
  class CrossSlot < ServerError; end

  class LockError < Error; end
  class LockNotOwned < LockError; end
  class LockLost < LockNotOwned; end
  class LockNotAcquired < LockError; end
  class PermitsMismatch < LockError; end

  # A limiter refused the call; #result is the refused Result.
  class RateLimited < Error
    attr_reader :result

    def initialize(result, key = nil)
      @result = result
      super(result.retry_after ? "rate limited (#{key}): retry after #{result.retry_after} s" :
                                 "rate limited (#{key}): the cost can never fit")
    end
  end

  class CaptchaError < Error; end
  class CaptchaNotFound < CaptchaError; end
  class CaptchaExists < CaptchaError; end
  class ChallengeNotFound < CaptchaError; end
  class ChallengeExists < CaptchaError; end
  class InvalidCaptchaConfig < CaptchaError; end

  EXACT_ERRORS = {
    "Captcha not found" => CaptchaNotFound,
    "Challenge not found" => ChallengeNotFound,
    "Challenge already exists" => ChallengeExists
  }.freeze
  PREFIX_ERRORS = [
    ["WRONGTYPE", WrongType], ["CROSSSLOT", CrossSlot],
    ["the lock is not held by this owner", LockNotOwned],
    ["the locks are not all held by this owner", LockNotOwned],
    ["PERMITS differs", PermitsMismatch],
    ["captcha already exists", CaptchaExists], ["target captcha already exists", CaptchaExists],
    ["invalid JSON", InvalidCaptchaConfig], ["invalid config", InvalidCaptchaConfig],
    ["invalid challenge", InvalidCaptchaConfig],
    ["unknown option", InvalidArgument], ["owner must be", InvalidArgument],
    ["cost too large", InvalidArgument], ["no such policy", InvalidArgument], ["policy ", InvalidArgument]
  ].freeze

  # The gem's exception for a Redis::CommandError from the module (any other error as is).
  def self.map_error(err)
    return err unless err.is_a?(Redis::CommandError)

    msg = err.message
    msg = msg[4..] if msg.start_with?("ERR ")
    cls = EXACT_ERRORS[msg]
    cls ||= PREFIX_ERRORS.find { |prefix, _| msg.start_with?(prefix) }&.last
    cls ||= InvalidArgument if msg.include?(" must be ") || msg.include?(" needs a value")
    cls ||= ServerError
    cls <= ServerError ? cls.new(msg, reply: msg) : cls.new(msg)
  end
end
