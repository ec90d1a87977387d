-- mlp: h = tanh(W1 x + b1) (W1 row-major H x D), o = W2 . h + b2, result o^2
-- (programs/bench/mlp.adasm), H = 32, D = 10, x[j] = sin(j + 1),
-- W1[k] = 0.1 sin(10*(k // D) + k % D), b1[i] = 0.01 i, W2[i] = 0.1 cos(i),
-- b2 = 0.05 (indices from 0; Lua's tables hold element i at index i + 1).
-- Prints microseconds per call, the median of 7 rounds of `reps` calls (CPU
-- time, os.clock), for the .adasm's `while` loops and the idiomatic `for`;
-- tanh is held in a local in both. Row i starts after (i - 1) * D elements
-- of W1: one subtraction per row more than the .adasm's i * D.
--   lua5.4 mlp.lua [reps]      luajit -joff mlp.lua [reps]
local reps = tonumber(arg and arg[1]) or 10000

-- Lua 5.4 has math.tanh only when built with LUA_COMPAT_MATHLIB (Debian's
-- is); the fallback rounds differently from libm's tanh, so the value may
-- then differ in its last bits (still well within the 1e-12 check).
local tanh = math.tanh or function(a)
  if a < 0 then
    local e = math.exp(2 * a)
    return (e - 1) / (e + 1)
  end
  local e = math.exp(-2 * a)
  return (1 - e) / (1 + e)
end

local function mlp_while(x, W1, b1, W2, b2)
  local H = #b1
  local D = #x
  local i = 1
  local o = b2
  while i <= H do
    local base = (i - 1) * D
    local acc = b1[i]
    local j = 1
    while j <= D do
      acc = acc + W1[base + j] * x[j]
      j = j + 1
    end
    local h = tanh(acc)
    o = o + W2[i] * h
    i = i + 1
  end
  return o * o
end

local function mlp_for(x, W1, b1, W2, b2)
  local D = #x
  local o = b2
  for i = 1, #b1 do
    local base = (i - 1) * D
    local acc = b1[i]
    for j = 1, D do
      acc = acc + W1[base + j] * x[j]
    end
    o = o + W2[i] * tanh(acc)
  end
  return o * o
end

local H, D = 32, 10
local x, W1, b1, W2 = {}, {}, {}, {}
for j = 0, D - 1 do x[j + 1] = math.sin(j + 1) end
for k = 0, H * D - 1 do
  W1[k + 1] = 0.1 * math.sin(10 * math.floor(k / D) + k % D)
end
for i = 0, H - 1 do
  b1[i + 1] = 0.01 * i
  W2[i + 1] = 0.1 * math.cos(i)
end
local b2 = 0.05

local function time(f)
  local rounds = {}
  local r
  for round = 1, 7 do
    local t0 = os.clock()
    for _ = 1, reps do
      r = f(x, W1, b1, W2, b2)
    end
    rounds[round] = (os.clock() - t0) / reps * 1e6
  end
  table.sort(rounds)
  return rounds[4], r
end

local want = 0.0031897003229076192
for _, case in ipairs({ { "while", mlp_while }, { "for", mlp_for } }) do
  local us, r = time(case[2])
  assert(math.abs(r - want) < 1e-12 * want, "wrong value " .. r)
  print(string.format("mlp %-5s %9.3f us/call  (value %.17g)", case[1], us, r))
end
