-- recursion: rec(x, n) = n == 0 ? x : x * sin(rec(x, n - 1)), a recursive
-- function (programs/bench/recursion.adasm), x = 0.9, n = 100. Prints
-- microseconds per call, the median of 7 rounds of `reps` calls (CPU time,
-- os.clock). The program has no loop, so there is one spelling, `call`: the
-- .adasm's blocks (test n == 0, branch, return x; or recurse on n - 1, sin,
-- multiply by x), with sin held in a local as idiomatic Lua does.
--   lua5.4 recursion.lua [reps]      luajit -joff recursion.lua [reps]
local reps = tonumber(arg and arg[1]) or 20000

local sin = math.sin

local function rec(x, n)
  if n == 0 then
    return x
  end
  local r = rec(x, n - 1)
  return x * sin(r)
end

local function time(f, x, n)
  local rounds = {}
  local y
  for round = 1, 7 do
    local t0 = os.clock()
    for _ = 1, reps do
      y = f(x, n)
    end
    rounds[round] = (os.clock() - t0) / reps * 1e6
  end
  table.sort(rounds)
  return rounds[4], y
end

local want = 1.5039599427901016e-05
for _, case in ipairs({ { "call", rec } }) do
  local us, y = time(case[2], 0.9, 100)
  assert(math.abs(y - want) < 1e-12 * want, "wrong value " .. y)
  print(string.format("recursion %-5s %9.3f us/call  (value %.17g)", case[1], us, y))
end
