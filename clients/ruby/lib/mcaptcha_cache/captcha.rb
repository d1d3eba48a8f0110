# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache/captcha.rb -- one mCaptcha captcha on the MCAPTCHA_CACHE.* commands:
# difficulty levels over a leaky-bucket visitor count, and one-shot challenges. Durations
# are whole seconds, as mCaptcha's.
require "json"
require_relative "common"

module McaptchaCache
  # A challenge taken with #get_challenge: difficulty and duration (s).
  Challenge = Struct.new(:difficulty, :duration)

  # Captcha.new(redis, "site-key"); #add(levels: [[threshold, difficulty], ...], duration: 30);
  # #visit counts a visit and returns the difficulty that applies after it; #count reads the
  # visits still counting, counting nothing.
  class Captcha
    VISIT_INFO_DEPRECATED = "McaptchaCache::Captcha#visit_info counts a visit; call visit_with_duration " \
                            "(the same, clearly named) or count (a query that counts nothing)"

    attr_reader :client, :name

    def initialize(client, name)
      @client = client
      @name = name
    end

    # MCAPTCHA_CACHE.ADD_CAPTCHA; +levels+: [[visitor_threshold, difficulty_factor], ...].
    def add(levels:, duration: 30)
      raise TypeError, "duration must be whole seconds" unless duration.is_a?(Integer)

      lv = levels.map do |l|
        t, d = l.is_a?(Hash) ? [l[:visitor_threshold], l[:difficulty_factor]] : l
        { visitor_threshold: Integer(t), difficulty_factor: Integer(d) }
      end
      Common.call(client, "MCAPTCHA_CACHE.ADD_CAPTCHA", name, JSON.generate(levels: lv, duration: duration))
      nil
    end

    # MCAPTCHA_CACHE.ADD_VISITOR: count one visit; the difficulty factor (Integer).
    def visit
      visit_with_duration.first
    end

    # Count one visit, as #visit; [difficulty_factor, duration].
    def visit_with_duration
      d = JSON.parse(Common.call(client, "MCAPTCHA_CACHE.ADD_VISITOR", name))
      [d["difficulty_factor"].to_i, d["duration"].to_i]
    end

    # Deprecated: counts a visit although its name reads like a query (as the Python
    # client's visit_info). The old name of #visit_with_duration, which it calls; warns in
    # the :deprecated category (shown with ruby -W:deprecated or Warning[:deprecated] = true).
    # To read without counting, call #count: the module has no read-only command for the
    # difficulty.
    def visit_info
      warn VISIT_INFO_DEPRECATED, uplevel: 1, category: :deprecated
      visit_with_duration
    end

    # MCAPTCHA_CACHE.GET: the visits still counting. A query: counts nothing (the difficulty
    # for this count is that of the levels given to #add).
    def count
      Common.call(client, "MCAPTCHA_CACHE.GET", name).to_i
    end

    # CAPTCHA_EXISTS answers 0 when it exists (mCaptcha's inverted reply).
    def exists?
      Common.call(client, "MCAPTCHA_CACHE.CAPTCHA_EXISTS", name).to_i.zero?
    end

    def delete
      Common.call(client, "MCAPTCHA_CACHE.DELETE_CAPTCHA", name)
      nil
    end

    # Moves the captcha (live count included); returns the captcha under its new name.
    def rename(new_name)
      Common.call(client, "MCAPTCHA_CACHE.RENAME_CAPTCHA", name, new_name)
      self.class.new(client, new_name)
    end

    def add_challenge(challenge, difficulty:, duration:)
      json = JSON.generate(difficulty: Integer(difficulty), duration: Integer(duration), challenge: challenge.to_s)
      Common.call(client, "MCAPTCHA_CACHE.ADD_CHALLENGE", name, json)
      nil
    end

    # Takes the challenge (one-shot): a Challenge. Raises ChallengeNotFound.
    def get_challenge(challenge)
      d = JSON.parse(Common.call(client, "MCAPTCHA_CACHE.GET_CHALLENGE", name, challenge))
      Challenge.new(d["difficulty_factor"].to_i, d["duration"].to_i)
    end

    def delete_challenge(challenge)
      Common.call(client, "MCAPTCHA_CACHE.DELETE_CHALLENGE", name, challenge)
      nil
    end
  end
end
