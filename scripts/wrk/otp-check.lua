-- POST /v1/phone/verifications/check, each request a different pending verification with its right code
-- (from $PIXIE_BENCH_DIR/checks.jsonl): a transaction and, the first time, a hybrid signature. Thread i of n
-- takes lines i, i+n, i+2n, ...; past the end it starts again, and a repeat answers 409 code_already_used.
package.path = debug.getinfo(1, "S").source:match("@(.*/)") .. "?.lua;" .. package.path
require("statuses")

local bodies = {}
for line in io.lines(os.getenv("PIXIE_BENCH_DIR") .. "/checks.jsonl") do
    table.insert(bodies, line)
end

local step, next_index

function init(args)
    step = tonumber(os.getenv("PIXIE_BENCH_THREADS") or "2")
    next_index = id + tonumber(os.getenv("PIXIE_BENCH_FIRST") or "0") + 1
end

function request()
    local body = bodies[next_index]
    next_index = next_index + step
    if next_index > #bodies then next_index = (next_index - 1) % step + 1 end
    return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end
