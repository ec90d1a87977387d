-- logreg: logistic-regression loss (1/N) sum_k log(1 + exp(-y[k] * X[k,:].w))
-- with X row-major N x D (programs/bench/logreg.adasm), N = 100, D = 10,
-- X[k,j] = sin(k*D + j + 1), y[k] = +1 for even k else -1, w[j] = 0.1 cos(j)
-- (k, j from 0; Lua's tables hold element i at index i + 1). Prints
-- microseconds per call, the median of 7 rounds of `reps` calls (CPU time,
-- os.clock), for the .adasm's `while` loops and the idiomatic `for`; exp
-- and log are held in locals in both. Row k starts after (k - 1) * D
-- elements of X: one subtraction per row more than the .adasm's k * D.
--   lua5.4 logreg.lua [reps]      luajit -joff logreg.lua [reps]
local reps = tonumber(arg and arg[1]) or 3000

local exp, log = math.exp, math.log

local function logreg_while(X, y, w, N, D)
  local k = 1
  local loss = 0.0
  while k <= N do
    local base = (k - 1) * D
    local j = 1
    local dot = 0.0
    while j <= D do
      dot = dot + X[base + j] * w[j]
      j = j + 1
    end
    local e = exp(-(y[k] * dot))
    loss = loss + log(e + 1.0)
    k = k + 1
  end
  return loss / N
end

local function logreg_for(X, y, w, N, D)
  local loss = 0.0
  for k = 1, N do
    local base = (k - 1) * D
    local dot = 0.0
    for j = 1, D do
      dot = dot + X[base + j] * w[j]
    end
    loss = loss + log(exp(-(y[k] * dot)) + 1.0)
  end
  return loss / N
end

local N, D = 100, 10
local X, y, w = {}, {}, {}
for i = 0, N * D - 1 do X[i + 1] = math.sin(i + 1) end
for k = 0, N - 1 do
  if k % 2 == 0 then y[k + 1] = 1.0 else y[k + 1] = -1.0 end
end
for j = 0, D - 1 do w[j + 1] = 0.1 * math.cos(j) end

local function time(f)
  local rounds = {}
  local r
  for round = 1, 7 do
    local t0 = os.clock()
    for _ = 1, reps do
      r = f(X, y, w, N, D)
    end
    rounds[round] = (os.clock() - t0) / reps * 1e6
  end
  table.sort(rounds)
  return rounds[4], r
end

local want = 0.7066841469262802
for _, case in ipairs({ { "while", logreg_while }, { "for", logreg_for } }) do
  local us, r = time(case[2])
  assert(math.abs(r - want) < 1e-12 * want, "wrong value " .. r)
  print(string.format("logreg %-5s %9.3f us/call  (value %.17g)", case[1], us, r))
end
