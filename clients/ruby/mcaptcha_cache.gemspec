# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# mcaptcha_cache.gemspec -- the gem: pure Ruby over redis-rb 4.8 (its Redis::Cluster
# included); the file list is read from the tree (no git needed), so `gem build` packs it
# offline.
require_relative "lib/mcaptcha_cache/version"

Gem::Specification.new do |spec|
  spec.name = "mcaptcha_cache"
  spec.version = McaptchaCache::VERSION
  spec.summary = "Client of the mcaptcha_cache Redis module: leased locks, rate limits, captchas; " \
                 "drop-in MasterLock and TrafficJam"
  spec.description = "Locks with fencing tokens and server-side FIFO waiting, GCRA and sliding-window " \
                     "rate limits and mCaptcha captchas on the mcaptcha_cache Redis module, with " \
                     "MasterLock- and TrafficJam-compatible modules (no Lua)."
  spec.authors = ["mcaptcha-cache developers"]
  spec.license = "BSD-3-Clause"
  spec.required_ruby_version = ">= 3.1"
  spec.files = Dir.chdir(__dir__) { Dir["lib/**/*.rb"] + %w[README.md LICENSE mcaptcha_cache.gemspec] }
  spec.require_paths = ["lib"]
  spec.add_dependency "redis", "~> 4.8"
end
