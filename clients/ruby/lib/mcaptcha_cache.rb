# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache.rb -- the Ruby client of the mcaptcha_cache Redis module (pure Ruby over
# redis-rb): leased locks with fencing tokens (Lock, Semaphore, MultiLock), rate limits
# (RateLimiter, Policy) and mCaptcha captchas (Captcha). The drop-in replacements of the
# MasterLock and TrafficJam gems are separate requires: 'mcaptcha_cache/master_lock' and
# 'mcaptcha_cache/traffic_jam'.
require_relative "mcaptcha_cache/version"
require_relative "mcaptcha_cache/errors"
require_relative "mcaptcha_cache/common"
require_relative "mcaptcha_cache/lock"
require_relative "mcaptcha_cache/rate_limiter"
require_relative "mcaptcha_cache/captcha"
