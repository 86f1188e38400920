-- work.lua — wrk script: a worker loop over HTTP. Each connection reserves from tube "work"
-- (POST /v1/reserve, no wait) and then deletes what it got (DELETE /v1/jobs/{id}); a reserve
-- that finds nothing (204) is followed by another reserve. With RESERVE_COUNT=N in the
-- environment, each reserve asks for up to N jobs ("count"), then deletes them one by one. Used
-- by bench/http-load.sh, which fills the tube first. Counts: every request is one of the two;
-- jobs done = deletes answered 200.
local pending = {}
local done = 0
local count = tonumber(os.getenv("RESERVE_COUNT") or "")
local reserve_body = count and ('{"tubes":["work"],"count":' .. count .. '}') or '{"tubes":["work"]}'

function request()
  local id = table.remove(pending)
  if id then
    return wrk.format("DELETE", "/v1/jobs/" .. id)
  end
  return wrk.format("POST", "/v1/reserve", {["Content-Type"] = "application/json"}, reserve_body)
end

function response(status, headers, body)
  if status == 200 then
    if body:find('"deleted"', 1, true) then
      done = done + 1
      return
    end
    for id in body:gmatch('{"id":(%d+),"tube":"work","state":"reserved"') do
      table.insert(pending, id)
    end
  end
end
