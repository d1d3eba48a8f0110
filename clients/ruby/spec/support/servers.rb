# frozen_string_literal: true

# SPDX-License-Identifier: BSD-3-Clause
# spec/support/servers.rb -- real redis-server processes for the suite: one standalone
# server and one 3-primary Redis Cluster (redis-cli --cluster create), each with the module
# loaded, on free ports of 127.0.0.1, in temporary directories, killed at exit.
# The module: $MCAPTCHA_MODULE (default <repo>/build/mcaptcha_cache.so); the server binary:
# $REDIS_SERVER (default redis-server). Waits poll for states, never for a time.
require "socket"
require "tmpdir"
require "fileutils"
require "redis"

module TestServers
  REPO = File.expand_path("../../../..", __dir__)
  MODULE = File.expand_path(ENV.fetch("MCAPTCHA_MODULE", File.join(REPO, "build", "mcaptcha_cache.so")))
  SERVER = ENV.fetch("REDIS_SERVER", "redis-server")
  CLI = ENV.fetch("REDIS_CLI", "redis-cli")

  module_function

  # Poll until the block is truthy; fails after +timeout+ seconds.
  def wait_until(timeout: 20, what: "state")
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    loop do
      v = begin
        yield
      rescue StandardError
        nil
      end
      return v if v
      raise "timed out waiting for #{what}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.02
    end
  end

  # A port free now on 127.0.0.1 (and, for cluster nodes, its bus port + 10000 too).
  def free_port(bus: false)
    loop do
      s = TCPServer.new("127.0.0.1", 0)
      port = s.addr[1]
      s.close
      next if bus && port > 55_000
      next if bus && !port_free?(port + 10_000)

      return port
    end
  end

  def port_free?(port)
    TCPServer.new("127.0.0.1", port).close
    true
  rescue StandardError
    false
  end

  def pids
    @pids ||= []
  end

  def dirs
    @dirs ||= []
  end

  def spawn_server(port, dir, *extra)
    raise "module not built: #{MODULE} (make, or set MCAPTCHA_MODULE)" unless File.exist?(MODULE)

    args = [SERVER, "--port", port.to_s, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no",
            "--loadmodule", MODULE, *extra]
    pid = Process.spawn(*args, out: File.join(dir, "out.log"), err: %i[child out])
    pids << pid
    wait_until(what: "redis-server on #{port}") { Redis.new(port: port, host: "127.0.0.1").ping == "PONG" }
    pid
  end

  # A standalone server: its port.
  def standalone
    @standalone ||= begin
      dir = Dir.mktmpdir("mcaptcha-rb-")
      dirs << dir
      port = free_port
      spawn_server(port, dir)
      port
    end
  end

  # A 3-primary cluster: its ports.
  def cluster
    @cluster ||= begin
      ports = Array.new(3) { free_port(bus: true) }
      ports.each do |p|
        dir = Dir.mktmpdir("mcaptcha-rb-cluster-")
        dirs << dir
        spawn_server(p, dir, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                     "--cluster-node-timeout", "5000")
      end
      out = IO.popen([CLI, "--cluster", "create", *ports.map { |p| "127.0.0.1:#{p}" }, "--cluster-yes"],
                     err: %i[child out], &:read)
      raise "redis-cli --cluster create failed:\n#{out}" unless $?.success?

      ports.each do |p|
        wait_until(what: "cluster_state:ok on #{p}") do
          r = Redis.new(port: p, host: "127.0.0.1")
          r.call("CLUSTER", "INFO").include?("cluster_state:ok") &&
            r.call("CLUSTER", "SLOTS").sum { |s| s[1] - s[0] + 1 } == 16_384
        end
      end
      ports
    end
  end

  def stop_all
    pids.each do |pid|
      Process.kill("KILL", pid)
      Process.wait(pid)
    rescue StandardError
      nil
    end
    pids.clear
    dirs.each { |d| FileUtils.rm_rf(d) }
    dirs.clear
  end
end

at_exit { TestServers.stop_all }
