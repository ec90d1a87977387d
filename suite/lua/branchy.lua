-- branchy: sum over i of (v[i] > 0 ? v[i]^2 : 0.01 v[i]) with a branch per
-- element (programs/bench/branchy.adasm), v[i] = sin(i), 1000 elements.
-- Prints microseconds per call, the median of 7 rounds of `reps` calls (CPU
-- time, os.clock), for the .adasm's `while` loop and the idiomatic `for`.
--   lua5.4 branchy.lua [reps]      luajit -joff branchy.lua [reps]
local reps = tonumber(arg and arg[1]) or 10000

local function branchy_while(v)
  local n = #v
  local i = 1
  local s = 0.0
  while i <= n do
    local x = v[i]
    local t
    if x > 0.0 then t = x * x else t = x * 0.01 end
    s = s + t
    i = i + 1
  end
  return s
end

local function branchy_for(v)
  local s = 0.0
  for i = 1, #v do
    local x = v[i]
    if x > 0.0 then s = s + x * x else s = s + x * 0.01 end
  end
  return s
end

local v = {}
for i = 0, 999 do v[i + 1] = math.sin(i) end

local function time(f)
  local rounds = {}
  local y
  for round = 1, 7 do
    local t0 = os.clock()
    for _ = 1, reps do
      y = f(v)
    end
    rounds[round] = (os.clock() - t0) / reps * 1e6
  end
  table.sort(rounds)
  return rounds[4], y
end

local want = 246.57419208275957
for _, case in ipairs({ { "while", branchy_while }, { "for", branchy_for } }) do
  local us, y = time(case[2])
  assert(math.abs(y - want) < 1e-9 * want, "wrong value " .. y)
  print(string.format("branchy %-5s %9.3f us/call  (value %.17g)", case[1], us, y))
end
