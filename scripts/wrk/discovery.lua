-- POST /v1/discovery/own with one PhoneOwnershipCert for a number that has an account: every request
-- verifies the cert (Ed25519 + ML-DSA-65) and reads one row. The body comes from $PIXIE_BENCH_DIR/discovery.json.
package.path = debug.getinfo(1, "S").source:match("@(.*/)") .. "?.lua;" .. package.path
require("statuses")

local file = assert(io.open(os.getenv("PIXIE_BENCH_DIR") .. "/discovery.json"))
local body = file:read("*a")
file:close()

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = body
