-- SPDX-License-Identifier: BSD-3-Clause
-- GCRA the way go-redis/redis_rate (v10, Go; its Lua derives from rwz/redis-gcra) does it:
-- the allowN script in redis_rate's lua.go. redis_rate is a Go module, so no npm package
-- ships this script: this is a rendering of its published algorithm, written for the bench.
-- Same Redis calls as the library: TIME (server clock), GET the TAT, SET the new TAT with EX.
--   KEYS[1] limiter key   ARGV: burst, rate, period (seconds), cost
-- Reply: {allowed (cost or 0), remaining, retry_after (s, string), reset_after (s, string)}
redis.replicate_commands()  -- effects replication (a no-op on Redis >= 7, kept as the library has it)

local key    = KEYS[1]
local burst  = tonumber(ARGV[1])
local rate   = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost   = tonumber(ARGV[4])

local interval = period / rate          -- emission interval, seconds
local increment = interval * cost
local tolerance = interval * burst      -- burst offset

-- Server time as float seconds counted from 2017-01-01 (as redis_rate does, to keep
-- the float's 16 digits for the fraction).
local t = redis.call("TIME")
local now = (t[1] - 1483228800) + t[2] / 1000000

local tat = tonumber(redis.call("GET", key) or now)
if tat < now then tat = now end

local new_tat = tat + increment
local diff = now - (new_tat - tolerance)
local remaining = math.floor(diff / interval + 0.5)

if remaining < 0 then
  return {0, 0, tostring(-diff), tostring(tat - now)}
end

local reset_after = new_tat - now
redis.call("SET", key, new_tat, "EX", math.ceil(reset_after))
return {cost, remaining, tostring(-1), tostring(reset_after)}
