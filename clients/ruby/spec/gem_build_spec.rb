# frozen_string_literal: true

# spec/gem_build_spec.rb -- the gemspec packs offline (gem build), with every lib file, the
# README and the license, and its version is the library's.
# SPDX-License-Identifier: BSD-3-Clause
require "tmpdir"
require "open3"
require "rubygems/package"
require_relative "spec_helper"

RSpec.describe "gem build" do
  it "packs mcaptcha_cache-VERSION.gem offline with the library's files" do
    root = File.expand_path("..", __dir__)
    Dir.mktmpdir do |dir|
      out, status = Open3.capture2e("gem", "build", File.join(root, "mcaptcha_cache.gemspec"), "--output",
                                    File.join(dir, "m.gem"), chdir: root)
      expect(status).to be_success, out
      spec = Gem::Package.new(File.join(dir, "m.gem")).spec
      expect(spec.name).to eq "mcaptcha_cache"
      expect(spec.version.to_s).to eq McaptchaCache::VERSION
      expect(spec.license).to eq "BSD-3-Clause"
      libs = Dir.chdir(root) { Dir["lib/**/*.rb"] }
      expect(spec.files).to include(*libs, "README.md", "LICENSE")
      expect(spec.dependencies.map(&:name)).to eq ["redis"]
    end
  end
end
