-- work.lua — wrk script: a worker loop over HTTP. Each connection reserves a job from tube
-- "work" (POST /v1/reserve, no wait) and then deletes it (DELETE /v1/jobs/{id}); a reserve that
-- finds nothing (204) is followed by another reserve. Used by bench/http-load.sh, which fills
-- the tube first. Counts: every request is one of the two; jobs done = deletes answered 200.
local pending = {}
local done = 0

function request()
  local id = table.remove(pending)
  if id then
    return wrk.format("DELETE", "/v1/jobs/" .. id)
  end
  return wrk.format("POST", "/v1/reserve", {["Content-Type"] = "application/json"},
                    '{"tubes":["work"]}')
end

function response(status, headers, body)
  if status == 200 then
    local id = body:match('^{"id":(%d+),')
    if id and body:find('"state":"reserved"', 1, true) then
      table.insert(pending, id)
    elseif body:find('"deleted"', 1, true) then
      done = done + 1
    end
  end
end
