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
  # #visit returns the difficulty that applies after counting this visit.
  class Captcha
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

    # Count one visit; the difficulty factor (Integer).
    def visit
      visit_info.first
    end

    # Count one visit; [difficulty_factor, duration].
    def visit_info
      d = JSON.parse(Common.call(client, "MCAPTCHA_CACHE.ADD_VISITOR", name))
      [d["difficulty_factor"].to_i, d["duration"].to_i]
    end

    # The visits still counting.
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
