-- SPDX-License-Identifier: BSD-3-Clause
-- TrafficJam's regenerating limit (coinbase/traffic_jam v1.2.0, Ruby: TrafficJam::Limit#increment,
-- scripts/increment.lua). TrafficJam is a Ruby gem, so no npm package ships this script: this is
-- a rendering of its published algorithm, written for the bench, with the library's Redis calls
-- (HGET timestamp, HGET amount, HSET amount, HSET timestamp, EXPIRE).
-- State: a hash {amount (float), timestamp (ms)}; the amount leaks at max per period and the
-- time is supplied by the client.
--   KEYS[1] limiter key   ARGV: timestamp (ms), amount, max, period (ms)
-- Reply: 1 (Lua true) when taken, nil (Lua false) when it would exceed max.
local now    = tonumber(ARGV[1])
local amount = tonumber(ARGV[2])
local max    = tonumber(ARGV[3])
local period = tonumber(ARGV[4])

local last = redis.call("HGET", KEYS[1], "timestamp")
local new_amount, new_time

if not last then
  new_amount, new_time = amount, now
else
  last = tonumber(last)
  local elapsed = now - last
  local drift = elapsed * max / period
  local held = math.min(tonumber(redis.call("HGET", KEYS[1], "amount")), max)
  if elapsed < 0 then
    -- back-dated call (e.g. a rollback): discount it by the drift, keep the newer timestamp
    local change = amount >= 0 and amount + drift or amount - drift
    if (amount >= 0 and change <= 0) or (amount < 0 and change >= 0) then return true end
    new_amount, new_time = held + change, last
  else
    new_amount, new_time = math.max(held - drift, 0) + amount, now
  end
end

if new_amount > max then return false end

redis.call("HSET", KEYS[1], "amount", new_amount)
redis.call("HSET", KEYS[1], "timestamp", new_time)
redis.call("EXPIRE", KEYS[1], period)  -- TrafficJam passes the period in ms to EXPIRE (seconds)
return true
