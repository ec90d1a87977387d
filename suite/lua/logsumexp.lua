-- logsumexp: m = max v, s = sum exp(v[i] - m), result m + log s, as two
-- loops (programs/bench/logsumexp.adasm), v[i] = sin(i), 1000 elements. The
-- max keeps the running maximum unless the next element is greater, as the
-- .adasm's `max` does. Prints microseconds per call, the median of 7 rounds
-- of `reps` calls (CPU time, os.clock), for the .adasm's `while` loops and
-- the idiomatic `for`; exp and log are held in locals in both.
--   lua5.4 logsumexp.lua [reps]      luajit -joff logsumexp.lua [reps]
local reps = tonumber(arg and arg[1]) or 2000

local exp, log = math.exp, math.log

local function logsumexp_while(v)
  local n = #v
  local m = v[1]
  local i = 2
  while i <= n do
    local e = v[i]
    if e > m then m = e end
    i = i + 1
  end
  local j = 1
  local s = 0.0
  while j <= n do
    local x = v[j]
    s = s + exp(x - m)
    j = j + 1
  end
  return m + log(s)
end

local function logsumexp_for(v)
  local n = #v
  local m = v[1]
  for i = 2, n do
    local e = v[i]
    if e > m then m = e end
  end
  local s = 0.0
  for j = 1, n do
    s = s + exp(v[j] - m)
  end
  return m + log(s)
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

local want = 7.143453155999233
for _, case in ipairs({ { "while", logsumexp_while }, { "for", logsumexp_for } }) do
  local us, y = time(case[2])
  assert(math.abs(y - want) < 1e-12 * want, "wrong value " .. y)
  print(string.format("logsumexp %-5s %9.3f us/call  (value %.17g)", case[1], us, y))
end
