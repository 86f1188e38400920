-- batch.lua — wrk script: every request puts 100 small jobs with a one-hour delay into tube
-- "batch" (POST /v1/jobs). Used by bench/http-load.sh; jobs a second are 100 times its requests.
wrk.method = "POST"
wrk.path = "/v1/jobs"
wrk.headers["Content-Type"] = "application/json"
local job = '{"tube":"batch","body":"order 12345: cancel if unpaid","delay":"1h"}'
local jobs = {}
for i = 1, 100 do jobs[i] = job end
wrk.body = '{"jobs":[' .. table.concat(jobs, ",") .. ']}'
