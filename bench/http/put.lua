-- put.lua — wrk script: every request puts one small job with a one-hour delay into tube
-- "load" (POST /v1/tubes/load/jobs). Used by bench/http-load.sh. No response() callback (it
-- would slow wrk down): wrk itself counts answers that are not 2xx ("Non-2xx or 3xx").
wrk.method = "POST"
wrk.path = "/v1/tubes/load/jobs"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"body":"order 12345: cancel if unpaid","delay":"1h"}'
