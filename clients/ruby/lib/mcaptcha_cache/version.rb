# frozen_string_literal: true

# mcaptcha_cache/version.rb -- the gem's version (one place: the gemspec reads it).
# SPDX-License-Identifier: BSD-3-Clause
module McaptchaCache
  VERSION = "0.2.0"
end
