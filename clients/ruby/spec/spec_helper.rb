# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# spec/spec_helper.rb -- the suite's setup: the gem from lib/, Timecop, the servers
# (spec/support/servers.rb) and the helpers every spec uses (a fresh standalone client, a
# Cluster client, flushing between examples).
$LOAD_PATH.unshift File.expand_path("../lib", __dir__)
require "mcaptcha_cache"
require "timecop"
require "timeout"
require_relative "support/servers"

module SpecHelpers
  def redis
    @redis ||= Redis.new(host: "127.0.0.1", port: TestServers.standalone)
  end

  def cluster_redis
    @cluster_redis ||= Redis.new(cluster: TestServers.cluster.map { |p| "redis://127.0.0.1:#{p}" })
  end

  # Flush every primary of the cluster.
  def flush_cluster
    TestServers.cluster.each { |p| Redis.new(host: "127.0.0.1", port: p).flushall }
  end

  def wait_until(timeout: 20, what: "state", &blk)
    TestServers.wait_until(timeout: timeout, what: what, &blk)
  end

  # Whether the module accepts AT on the _PEEK commands and RL.REFUND (module change from
  # branch rlcore; until it is merged, the tests needing it fail with that error).
  def self.peek_at?
    @peek_at ||= begin
      r = Redis.new(host: "127.0.0.1", port: TestServers.standalone)
      r.call("RL.GCRA_PEEK", "peek-at-probe", 1, 1000, "AT", 1)
      :yes
    rescue Redis::CommandError
      :no
    end
    @peek_at == :yes
  end
end

RSpec.configure do |config|
  config.include SpecHelpers
  config.disable_monkey_patching!
  config.order = :defined
  config.before(:each) { redis.flushall }
  config.before(:each, cluster: true) { flush_cluster }
  config.after(:each) { Timecop.return }
  # no example may hang the suite (a mutant that breaks a handoff fails instead)
  config.around(:each) { |example| Timeout.timeout(60) { example.run } }
  config.after(:suite) do
    unless SpecHelpers.peek_at?
      warn "\nNOTE: this module build refuses AT on RL.GCRA_PEEK / RL.WINDOW_PEEK / RL.REFUND: the examples " \
           "tagged at: :rlcore fail until that module change (branch rlcore) is merged."
    end
  end
end
