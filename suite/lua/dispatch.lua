-- Dispatch cost of LuaJIT's (or Lua's) interpreter per simple instruction,
-- shaped like the `dispatch` group of `cargo bench -p advm-bench --bench ad`: a numeric `for`
-- loop of n = 1000 iterations whose body is 8 independent instructions
-- `y = x`, `y = x + x`, `y = x - x` or `y = x * x` (bytecodes MOV, ADDVV,
-- SUBVV, MULVV; `luajit -bl dispatch.lua` lists them), plus the loop's
-- FORL. Prints ns per instruction (the loop's share included, as in the
-- bench): the median of 9 rounds of `reps` calls (CPU time, os.clock).
--   luajit -joff dispatch.lua [reps]      lua5.4 dispatch.lua [reps]
local function copy(n, x)
  local y
  for _ = 1, n do y = x; y = x; y = x; y = x; y = x; y = x; y = x; y = x end
  return y
end
local function add(n, x)
  local y
  for _ = 1, n do y = x + x; y = x + x; y = x + x; y = x + x; y = x + x; y = x + x; y = x + x; y = x + x end
  return y
end
local function sub(n, x)
  local y
  for _ = 1, n do y = x - x; y = x - x; y = x - x; y = x - x; y = x - x; y = x - x; y = x - x; y = x - x end
  return y
end
local function mul(n, x)
  local y
  for _ = 1, n do y = x * x; y = x * x; y = x * x; y = x * x; y = x * x; y = x * x; y = x * x; y = x * x end
  return y
end

local n = 1000
local reps = tonumber(arg and arg[1]) or 20000
for _, case in ipairs({ { "copy", copy }, { "add", add }, { "sub", sub }, { "mul", mul } }) do
  local rounds = {}
  for round = 1, 9 do
    local t0 = os.clock()
    for _ = 1, reps do case[2](n, 1.5) end
    rounds[round] = (os.clock() - t0) / reps / (8 * n) * 1e9
  end
  table.sort(rounds)
  print(string.format("%-5s %.2f ns per instruction", case[1], rounds[5]))
end
