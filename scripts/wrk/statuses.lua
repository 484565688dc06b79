-- Shared by the scripts in this folder: counts responses by status in each thread and prints the
-- totals after wrk's own summary, as `statuses: 200=N 409=M`.
local threads = {}

function setup(thread)
    thread:set("id", #threads)
    table.insert(threads, thread)
end

counts = {}

function response(status, headers, body)
    counts[status] = (counts[status] or 0) + 1
end

function done(summary, latency, requests)
    local total = {}
    for _, thread in ipairs(threads) do
        for status, n in pairs(thread:get("counts")) do
            total[status] = (total[status] or 0) + n
        end
    end
    local keys = {}
    for status in pairs(total) do table.insert(keys, status) end
    table.sort(keys)
    local parts = {}
    for _, status in ipairs(keys) do table.insert(parts, status .. "=" .. total[status]) end
    io.write("statuses: " .. table.concat(parts, " ") .. "\n")
end
