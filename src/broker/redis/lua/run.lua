-- run.lua — the entry point: the call's keys and state, the op, flush().

local function run(keys, args)
  ARGV = args
  caller = table.remove(ARGV)
  base = string.gsub(keys[1], ':seq$', '')
  SEVENTS = base .. ':events'
  SEQ, J, A, T, R, B, KI, G, C, M, P, TUBES, OWNER, EPOCH, TI, TP = keys[1], keys[2], keys[3],
    keys[4], keys[5], keys[6], keys[7], keys[8], keys[9], keys[10], keys[11], keys[12], keys[13],
    keys[14], keys[15], keys[16]
  S, SM, ST = keys[17], keys[18], keys[19]
  F, FG, FW, FZ = keys[20], keys[21], keys[22], keys[23]
  flows, was_head, moved_to, fz_lead, gstates, gdirty = {}, {}, nil, nil, {}, {}
  shard_here = nil
  clock, clock_ms, quiet, leads = nil, nil, false, false
  readied, records, readies, counters, seen, names = {}, {}, {}, {}, {}, {}
  log, moves, logged, ordered, last_t, last_id = {}, {}, 0, true, nil, nil
  added, lapses = {}, {}
  pages, dirty = {}, {}
  local handler = ops[args[1]]
  if not handler then
    return redis.error_reply('ERR delayq: unknown operation ' .. tostring(args[1]))
  end
  local result = handler()
  -- A lookup by key of a tube that lives in another shard (flow.lua): the node asks there.
  if moved_to then result = {'moved', string.format('%d', moved_to)} end
  flush()
  return {result, readied}
end
