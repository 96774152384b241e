"""Lua scripts: each store or flight step that reads and writes several
keys runs as one script, so replicas never see it half done. Every script's
keys share one hash tag (cluster.names): one slot of a Redis Cluster."""

# The shard's clock (KEYS: its clock key): Redis's time in microseconds,
# never less than one past the last it gave, so the orders it makes (creation,
# use) hold within a shard and, across shards, as far as the nodes' clocks
# agree.
_TICK = """
local function tick(key)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = tonumber(redis.call('GET', key) or '0')
  if now <= last then now = last + 1 end
  local s = string.format('%d', now)
  redis.call('SET', key, s)
  return s
end
"""

# KEYS: entry, leases, key index, scope set, all, lru, clock (all of the scope's shard)
# ARGV: entry id, key field, then the entry's field/value pairs
PUT = _TICK + """
redis.call('HSET', KEYS[1], unpack(ARGV, 3))
redis.call('DEL', KEYS[2])
if redis.call('HGET', KEYS[1], 'ret') == '0' then redis.call('HSET', KEYS[3], ARGV[2], ARGV[1]) end
redis.call('SADD', KEYS[4], ARGV[1])
local now = tick(KEYS[7])
redis.call('ZADD', KEYS[5], now, ARGV[1])
redis.call('ZADD', KEYS[6], now, ARGV[1])
return 1
"""

_RETURN_ENTRY = """
return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2])}
"""

# KEYS: entry, leases, key index. ARGV: entry id
RETIRE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[1], 'ret', '1')
local kf = redis.call('HGET', KEYS[1], 'kf')
if redis.call('HGET', KEYS[3], kf) == ARGV[1] then redis.call('HDEL', KEYS[3], kf) end
""" + _RETURN_ENTRY

# KEYS: entry, leases, key index, scope set, all, lru, tombstone. ARGV: id, reason, tombstone ttl
REMOVE = """
local h = redis.call('HGETALL', KEYS[1])
if #h == 0 then return false end
local l = redis.call('HGETALL', KEYS[2])
local kf = redis.call('HGET', KEYS[1], 'kf')
if redis.call('HGET', KEYS[3], kf) == ARGV[1] then redis.call('HDEL', KEYS[3], kf) end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
redis.call('SET', KEYS[7], ARGV[2], 'EX', ARGV[3])
return {h, l}
"""

# KEYS: entry, leases, lru, clock. ARGV: id, lease id, expiry, now
ADD_LEASE = _TICK + """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('HINCRBY', KEYS[1], 'uses', 1)
redis.call('HSET', KEYS[1], 'lu', ARGV[4])
redis.call('ZADD', KEYS[3], tick(KEYS[4]), ARGV[1])
""" + _RETURN_ENTRY

# KEYS: entry, leases
GET_ENTRY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
""" + _RETURN_ENTRY

# KEYS: scope set. ARGV: entry key prefix, leases key prefix (the scope's shard)
# Every entry of the scope, as {id, entry hash, leases hash}.
SCOPE_ENTRIES = """
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local h = redis.call('HGETALL', ARGV[1] .. id)
  if #h > 0 then out[#out + 1] = {id, h, redis.call('HGETALL', ARGV[2] .. id)} end
end
return out
"""

# KEYS: the shard's all. ARGV: entry key prefix, leases key prefix
# Every entry of the shard, oldest first, as {id, entry hash, leases hash, created}.
SHARD_ENTRIES = """
local out = {}
local ranked = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #ranked, 2 do
  local id = ranked[i]
  local h = redis.call('HGETALL', ARGV[1] .. id)
  if #h > 0 then out[#out + 1] = {id, h, redis.call('HGETALL', ARGV[2] .. id), ranked[i + 1]} end
end
return out
"""

# KEYS: entry, leases. ARGV: lease id
DROP_LEASE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HDEL', KEYS[2], ARGV[1])
""" + _RETURN_ENTRY

# KEYS: holder entries, entry holders, entry. ARGV: holder, entry id, wall, keep s, max holders per entry
# Returns the entry the holder used before; records the new use if the entry
# exists, keeping the entry's most recent holders and, in field '#', how
# many of its leases named one (see domain.memory_store).
SWAP_HOLDER = """
local prev = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if ARGV[2] == '' or redis.call('EXISTS', KEYS[3]) == 0 then return prev end
local keep = math.ceil(tonumber(ARGV[4]))
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('EXPIRE', KEYS[1], keep)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HINCRBY', KEYS[2], '#', 1)
if redis.call('HLEN', KEYS[2]) > tonumber(ARGV[5]) + 1 then
  local all = redis.call('HGETALL', KEYS[2])
  local oldest, at = nil, nil
  for i = 1, #all, 2 do
    if all[i] ~= '#' then
      local t = tonumber(all[i + 1])
      if at == nil or t < at then oldest, at = all[i], t end
    end
  end
  redis.call('HDEL', KEYS[2], oldest)
end
redis.call('EXPIRE', KEYS[2], keep)
return prev
"""

# KEYS: key index. ARGV: entry key prefix, leases key prefix, then key fields
# (longest prefix first). Every entry a field names, in that order, as
# {id, entry hash, leases hash}: first_match in one round trip.
FIRST_MATCH = """
local out = {}
for i = 3, #ARGV do
  local id = redis.call('HGET', KEYS[1], ARGV[i])
  if id then
    local h = redis.call('HGETALL', ARGV[1] .. id)
    if #h > 0 then
      out[#out + 1] = {id, h, redis.call('HGETALL', ARGV[2] .. id)}
    end
  end
end
return out
"""

# KEYS: entry, leases. ARGV: wall time
DROP_EXPIRED = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local l = redis.call('HGETALL', KEYS[2])
for i = 1, #l, 2 do
  if tonumber(l[i + 1]) <= tonumber(ARGV[1]) then redis.call('HDEL', KEYS[2], l[i]) end
end
""" + _RETURN_ENTRY

# KEYS: entry, leases. ARGV: expire time
SET_EXPIRY = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSET', KEYS[1], 'exp', ARGV[1])
""" + _RETURN_ENTRY

# KEYS: scope sightings, order, seq (the scope's shard). ARGV: max kept in the shard, key prefix of the shard's
# sightings, scope fp, now, horizon, gaps kept, then the chain's fields (history length 0 first). A field holds
# when it was last seen; '~prev' the previous request's field; '~gaps', '~hgaps' the scope's recent
# conversation and head gaps, '~cont' whether its recent requests had a history ('1' or '0' each); '~pend' its
# pending first sightings ('<when>@<field>' each), '~first' their resolved outcomes (seconds until agreed with,
# 1e18: domain.policy.MISS, or below 0: domain.policy.censored, written by earlier versions); a new first
# sighting is pending only while fewer than 'gaps kept' are. Returns {agreeing age or '', previous agrees
# (0/1), gaps, head gaps, cont, firsts, the pending ones' ages, outcomes resolved now}: the caller adds the
# outcomes to the server's and the app's pools, keys of other slots.
RECORD_SIGHTING = """
local now, horizon, kept = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local function age(field)
  local t = redis.call('HGET', KEYS[1], field)
  if t and now - tonumber(t) < horizon then return math.max(0, now - tonumber(t)) end
  return nil
end
local agreeing = nil
for i = #ARGV, 7, -1 do
  agreeing = age(ARGV[i])
  if agreeing then break end
end
local head = age(ARGV[7])
local prev = redis.call('HGET', KEYS[1], '~prev')
local prev_agrees = 0
if prev then for i = 7, #ARGV do if ARGV[i] == prev then prev_agrees = 1; break end end end
local function push(name, value)
  local list = {}
  for g in string.gmatch(redis.call('HGET', KEYS[1], name) or '', '[^,]+') do list[#list + 1] = g end
  if value then list[#list + 1] = value end
  while #list > kept do table.remove(list, 1) end
  local joined = table.concat(list, ',')
  redis.call('HSET', KEYS[1], name, joined)
  return joined
end
local history = #ARGV > 7
local gaps = push('~gaps', (history and agreeing) and string.format('%.6f', agreeing) or nil)
local hgaps = push('~hgaps', head and string.format('%.6f', head) or nil)
local cont = push('~cont', history and '1' or '0')
local function list_of(value)
  local list = {}
  for g in string.gmatch(value or '', '[^,]+') do list[#list + 1] = g end
  return list
end
local function append(list, values, cap)
  for _, v in ipairs(values) do list[#list + 1] = v end
  while #list > cap do table.remove(list, 1) end
  return list
end
-- First sightings: resolve the pending ones this request agrees with or that passed the horizon.
local outcomes, pend = {}, {}
for _, item in ipairs(list_of(redis.call('HGET', KEYS[1], '~pend'))) do
  local at = string.find(item, '@', 1, true)
  local field = string.sub(item, at + 1)
  local n = tonumber(string.sub(field, 1, string.find(field, ':', 1, true) - 1))
  local seen = tonumber(string.sub(item, 1, at - 1))
  if now - seen >= horizon then outcomes[#outcomes + 1] = '1e18'
  elseif 7 + n <= #ARGV and ARGV[7 + n] == field then
    outcomes[#outcomes + 1] = string.format('%.6f', math.max(0, now - seen))
  else pend[#pend + 1] = item end
end
local firsts = append(list_of(redis.call('HGET', KEYS[1], '~first')), outcomes, kept)
local ages = {}
for i, item in ipairs(pend) do
  ages[i] = string.format('%.6f', math.max(0, now - tonumber(string.sub(item, 1, string.find(item, '@', 1, true) - 1))))
end
local result_firsts, result_pending = table.concat(firsts, ','), table.concat(ages, ',')
if not agreeing then
  -- Tracked while fewer than ``kept`` are pending (or already pending): a sample kept until resolved.
  local mine, known = ARGV[#ARGV], false
  for i = #pend, 1, -1 do
    if string.sub(pend[i], string.find(pend[i], '@', 1, true) + 1) == mine then table.remove(pend, i); known = true end
  end
  if known or #pend < kept then pend[#pend + 1] = ARGV[4] .. '@' .. mine end
end
redis.call('HSET', KEYS[1], '~pend', table.concat(pend, ','), '~first', table.concat(firsts, ','))
redis.call('HSET', KEYS[1], '~prev', ARGV[#ARGV], ARGV[#ARGV], ARGV[4], ARGV[7], ARGV[4])
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[3] .. '|' .. ARGV[7])
redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[3]), ARGV[3] .. '|' .. ARGV[#ARGV])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[1])
if over > 0 then
  for _, m in ipairs(redis.call('ZPOPMIN', KEYS[2], over)) do
    local bar = string.find(m, '|', 1, true)
    if bar then
      local key = ARGV[2] .. string.sub(m, 1, bar - 1)
      redis.call('HDEL', key, string.sub(m, bar + 1))
      -- Only the scope's '~' fields left: the scope is forgotten.
      if redis.call('HLEN', key) <= 6 then redis.call('DEL', key) end
    end
  end
end
return {agreeing and string.format('%.6f', agreeing) or '', prev_agrees, gaps, hgaps, cont, result_firsts,
        result_pending, table.concat(outcomes, ',')}
"""

# KEYS: the scope's loss account (domain.policy.Account, rule 8: 'b' its balance, 'p:<entry id>' until when
# a NAMED entry's storage is paid). ARGV: opening balance, amount, keep ms, entry id or '', storage rate per
# second, paid until, start or '', now, entries kept. Applies one domain.policy.Booking as Account.apply does
# (the earliest paid entry dropped beyond the bound) and returns the new balance.
BOOK_LOSS = """
local b = tonumber(redis.call('HGET', KEYS[1], 'b') or ARGV[1]) + tonumber(ARGV[2])
if ARGV[4] ~= '' then
  local field = 'p:' .. ARGV[4]
  local start = ARGV[7]
  if start == '' then start = redis.call('HGET', KEYS[1], field) or ARGV[8] end
  local unpaid = tonumber(ARGV[6]) - tonumber(start)
  if unpaid > 0 then b = b - tonumber(ARGV[5]) * unpaid end
  redis.call('HSET', KEYS[1], field, ARGV[6])
  if redis.call('HLEN', KEYS[1]) > tonumber(ARGV[9]) + 1 then
    local all, oldest, least = redis.call('HGETALL', KEYS[1]), nil, nil
    for i = 1, #all, 2 do
      if all[i] ~= 'b' and (least == nil or tonumber(all[i + 1]) < least) then
        oldest, least = all[i], tonumber(all[i + 1])
      end
    end
    redis.call('HDEL', KEYS[1], oldest)
  end
end
local balance = string.format('%.17g', b)
redis.call('HSET', KEYS[1], 'b', balance)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return balance
"""

# KEYS: scope sightings, order. ARGV: scope fingerprint
FORGET_SIGHTINGS = """
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do redis.call('ZREM', KEYS[2], ARGV[1] .. '|' .. f) end
redis.call('DEL', KEYS[1])
return 1
"""

# The learned floors (KEYS[1]): a field per provider|model, '<floor>:<kept until, wall>' (a value of the old
# form, a bare floor, counts as expired). The live floor of field ARGV[1] at wall time ARGV[3], and until when.
_FLOOR = """
local function live_floor()
  local v = redis.call('HGET', KEYS[1], ARGV[1])
  if not v then return 0, nil end
  local at = string.find(v, ':', 1, true)
  if not at then return 0, nil end
  local until_ = string.sub(v, at + 1)
  if tonumber(until_) <= tonumber(ARGV[3]) then return 0, nil end
  return tonumber(string.sub(v, 1, at - 1)), until_
end
"""

# KEYS: floors. ARGV: field, tokens, now, kept until (domain.ports.RegistryStore.learn_floor)
LEARN_FLOOR = _FLOOR + """
local cur = live_floor()
if tonumber(ARGV[2]) >= cur then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. ARGV[4]) end
return 1
"""

# KEYS: floors. ARGV: field, tokens, now (domain.ports.RegistryStore.lower_floor)
LOWER_FLOOR = _FLOOR + """
local cur, until_ = live_floor()
if until_ and cur > tonumber(ARGV[2]) then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. until_) end
return 1
"""

# KEYS: entry. 1 the first time it is asked of an existing entry (or of one gone), else 0: the NAMED create
# is reported once (domain.ports.RegistryStore.report_create); the field goes with the entry.
REPORT_CREATE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 1 end
return redis.call('HSETNX', KEYS[1], 'wr', '1')
"""

# KEYS: lock, flights, all, result (the scope's shard). ARGV: token, lease ms, max entries, slot ms,
# entries and reserved slots of the other shards (as read just before)
# (the slot is held for ``slot ms``: a create's deadline, so a dead
# holder's slot is freed by then and a live one's never early)
# Reserves the slot and takes the lock in one step: entries plus live
# creates of every replica stay within max_entries (cluster.single_flight:
# within its tolerance, the other shards being read in an earlier step).
CLAIM = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 'TAKEN' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local used = redis.call('ZCARD', KEYS[3]) + redis.call('ZCARD', KEYS[2]) + tonumber(ARGV[5])
if used >= tonumber(ARGV[3]) then return 'FULL' end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[4]), KEYS[1])
redis.call('DEL', KEYS[4])
return 'WON'
"""

# KEYS: result, lock. A waiter's look at a create: {its outcome or false, 1 while it is held else 0}.
PROBE = """
return {redis.call('GET', KEYS[1]), redis.call('EXISTS', KEYS[2])}
"""

# KEYS: lock, flights, result. ARGV: token, outcome, result ttl ms, channel
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then redis.call('SET', KEYS[3], ARGV[2], 'PX', ARGV[3]) end
end
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('PUBLISH', ARGV[4], ARGV[2])
return 1
"""

# The claim's heartbeat: its holder extends the lock while the create runs
# (its slot in flights is reserved for the create's whole deadline at the
# claim); 0 when the lock is no longer this holder's.
# KEYS: lock. ARGV: token, lease ms
RENEW = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""


# --- a hit's steps, each two scripts above run as one --------------------------------
# A hit reads its match and records its sighting, then takes its lease and
# records its holder's use: composed from the scripts above, their text
# unchanged (each a Lua function of its own KEYS and ARGV), so each pair
# is one round trip and still means what its two halves mean.


def _function(name: str, script: str) -> str:
    return f"local function {name}(KEYS, ARGV)\n{script}\nend\n"


_SLICE = """
local function slice(from, to)
  local out = {}
  for i = from, to do out[#out + 1] = ARGV[i] end
  return out
end
"""

# KEYS: key index, then RECORD_SIGHTING's. ARGV: how many are FIRST_MATCH's, FIRST_MATCH's, RECORD_SIGHTING's.
# Returns {FIRST_MATCH's reply, RECORD_SIGHTING's}.
MATCH_AND_SIGHT = _function("first_match", FIRST_MATCH) + _function("record_sighting", RECORD_SIGHTING) + _SLICE + """
local n = tonumber(ARGV[1])
return {first_match({KEYS[1]}, slice(2, n + 1)), record_sighting({KEYS[2], KEYS[3], KEYS[4]}, slice(n + 2, #ARGV))}
"""

# KEYS: MATCH_AND_SIGHT's (4), then the scope's loss account. ARGV: how many are FIRST_MATCH's, how many
# RECORD_SIGHTING's, then FIRST_MATCH's, RECORD_SIGHTING's, BOOK_LOSS's. Returns {FIRST_MATCH's reply,
# RECORD_SIGHTING's, BOOK_LOSS's}: an acquire's first step with its credit on the account (rule 8).
MATCH_SIGHT_AND_CREDIT = (_function("first_match", FIRST_MATCH) + _function("record_sighting", RECORD_SIGHTING)
                          + _function("book_loss", BOOK_LOSS) + _SLICE + """
local n, m = tonumber(ARGV[1]), tonumber(ARGV[2])
return {first_match({KEYS[1]}, slice(3, n + 2)), record_sighting({KEYS[2], KEYS[3], KEYS[4]}, slice(n + 3, n + m + 2)),
        book_loss({KEYS[5]}, slice(n + m + 3, #ARGV))}
""")

# KEYS: ADD_LEASE's (entry, leases, lru, clock), then holder entries, entry holders. ARGV: ADD_LEASE's (4), then
# SWAP_HOLDER's. Returns {ADD_LEASE's reply, SWAP_HOLDER's}.
LEASE_AND_SWAP_HOLDER = _function("add_lease", ADD_LEASE) + _function("swap_holder", SWAP_HOLDER) + _SLICE + """
return {add_lease({KEYS[1], KEYS[2], KEYS[3], KEYS[4]}, slice(1, 4)),
        swap_holder({KEYS[5], KEYS[6], KEYS[1]}, slice(5, #ARGV))}
"""

# FIRST_MATCH's reply, BOOK_LOSS's, and the hit's terms (domain.ports.HitTerms, HitLease): wall, expiry margin,
# tokens, history length, grow share, head share, head floor, lease id, until, now, ... (TAKE_HIT's ARGV).
# Returns the id of the first usable entry found and its lease's expiry if the policy serves it as it is
# (domain.policy.serves_as_is, HitTerms.takes), else nothing.
_CHOOSE_HIT = """
local function choose_hit(found, balance, t)
  for _, f in ipairs(found) do
    local h = {}
    for i = 1, #f[2], 2 do h[f[2][i]] = f[2][i + 1] end
    local meta = cjson.decode(h['meta'])
    local exp = tonumber(h['exp'])
    if h['ret'] ~= '1' and exp - math.min(tonumber(t[2]), tonumber(meta['ttl']) / 10) > tonumber(t[1]) then
      local tok, hl, b = tonumber(meta['tok']), tonumber(meta['hl']), tonumber(balance)
      local share = tonumber(t[5])
      if hl == 0 then share = tonumber(t[6]) end
      if not (hl >= tonumber(t[4]) or tonumber(t[3]) - tok <= share * tok or b < 0) then return nil end
      if hl == 0 and tok < tonumber(t[7]) and b < 0 then return nil end
      if tonumber(t[9]) < exp then return f[1], t[9] end
      return f[1], h['exp']
    end
  end
  return nil
end
"""

# KEYS: MATCH_SIGHT_AND_CREDIT's (5), then the scope shard's lru and clock, the scope's holder entries. ARGV: how
# many are FIRST_MATCH's, RECORD_SIGHTING's and BOOK_LOSS's, then those, then the hit's terms: wall, expiry margin,
# tokens, history length, grow share, head share, head floor, lease id, until, now (monotonic), holder ('' none),
# holder wall, keep s, max holders per entry, the shard's entry holders key prefix.
# MATCH_SIGHT_AND_CREDIT, then on the first usable match, when the policy serves it as it is, ADD_LEASE (and
# SWAP_HOLDER with a holder): a warm hit in one round trip. Returns {FIRST_MATCH's reply (false when the lease was
# taken), RECORD_SIGHTING's, BOOK_LOSS's, false or {the entry id, ADD_LEASE's reply, SWAP_HOLDER's ('' with no
# holder)}}.
MATCH_CREDIT_AND_TAKE_HIT = (
    _function("first_match", FIRST_MATCH) + _function("record_sighting", RECORD_SIGHTING)
    + _function("book_loss", BOOK_LOSS) + _function("add_lease", ADD_LEASE) + _function("swap_holder", SWAP_HOLDER)
    + _CHOOSE_HIT + _SLICE + """
local n, m, k = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local match_args = slice(4, n + 3)
local found = first_match({KEYS[1]}, match_args)
local sighting = record_sighting({KEYS[2], KEYS[3], KEYS[4]}, slice(n + 4, n + m + 3))
local balance = book_loss({KEYS[5]}, slice(n + m + 4, n + m + k + 3))
local t = slice(n + m + k + 4, #ARGV)
local id, expires = choose_hit(found, balance, t)
if not id then return {found, sighting, balance, false} end
local entry = match_args[1] .. id
local leased = add_lease({entry, match_args[2] .. id, KEYS[6], KEYS[7]}, {id, t[8], expires, t[10]})
local previous = ''
if t[11] ~= '' then previous = swap_holder({KEYS[8], t[15] .. id, entry}, {t[11], id, t[12], t[13], t[14]}) end
return {false, sighting, balance, {id, leased[1], leased[2], previous}}
""")
