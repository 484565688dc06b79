-- GET /healthz: the platform's ceiling (routing, middleware, one `SELECT 1`).
package.path = debug.getinfo(1, "S").source:match("@(.*/)") .. "?.lua;" .. package.path
require("statuses")
