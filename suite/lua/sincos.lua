-- sincos: y = sin(cos(x)) (programs/bench/sincos.adasm), x = 0.9. Prints
-- microseconds per call, the median of 7 rounds of `reps` calls (CPU time,
-- os.clock). The program has no loop, so there is one spelling, `call`: the
-- .adasm's two instructions, cos then sin, each a call of a math function
-- (held in locals, as idiomatic Lua does, so no table lookup per call).
--   lua5.4 sincos.lua [reps]      luajit -joff sincos.lua [reps]
local reps = tonumber(arg and arg[1]) or 1000000

local sin, cos = math.sin, math.cos

local function sincos(x)
  local c = cos(x)
  local s = sin(c)
  return s
end

local function time(f, x)
  local rounds = {}
  local y
  for round = 1, 7 do
    local t0 = os.clock()
    for _ = 1, reps do
      y = f(x)
    end
    rounds[round] = (os.clock() - t0) / reps * 1e6
  end
  table.sort(rounds)
  return rounds[4], y
end

local want = 0.5823447254418763
for _, case in ipairs({ { "call", sincos } }) do
  local us, y = time(case[2], 0.9)
  assert(math.abs(y - want) < 1e-12 * want, "wrong value " .. y)
  print(string.format("sincos %-5s %9.3f us/call  (value %.17g)", case[1], us, y))
end
