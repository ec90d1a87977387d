-- powloop: r = x^n by n multiplications (programs/bench/powloop.adasm),
-- x = 1.0001, n = 1000. Prints microseconds per call, the median of 7
-- rounds of `reps` calls (CPU time, os.clock), for two spellings of the
-- loop: `while` (the .adasm's control flow: compare, branch, multiply,
-- decrement) and the idiomatic numeric `for`.
--   lua5.4 powloop.lua [reps]      luajit -joff powloop.lua [reps]
local reps = tonumber(arg and arg[1]) or 20000

local function pow_while(x, n)
  local r = 1.0
  local k = n
  while k > 0 do
    r = r * x
    k = k - 1
  end
  return r
end

local function pow_for(x, n)
  local r = 1.0
  for _ = 1, n do
    r = r * x
  end
  return r
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

local want = 1.1051653926032188
for _, case in ipairs({ { "while", pow_while }, { "for", pow_for } }) do
  local us, y = time(case[2], 1.0001, 1000)
  assert(math.abs(y - want) < 1e-12 * want, "wrong value " .. y)
  print(string.format("powloop %-5s %9.3f us/call  (value %.17g)", case[1], us, y))
end
