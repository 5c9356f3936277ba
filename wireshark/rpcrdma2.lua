-- RPC-over-RDMA Version Two, both drafts, for Wireshark and tshark (4.0 and later).
--
-- draft-cel-nfsv4-rpcrdma-version-two-00 and draft-ietf-nfsv4-rpcrdma-version-two-07 both put
-- 2 in rdma_vers and are not wire-compatible; Wireshark's own RPC-over-RDMA dissector knows
-- Version One only. This plugin takes every InfiniBand/RoCE payload whose second word is 2
-- and tells the dialect from the fourth word (the same rule as rpcrdma_v2::dialect):
--   0 to 3            -00: RDMA_MSG, RDMA_NOMSG (RDMA_MSGP, RDMA_DONE reserved)
--   5 with a body     -00: RDMA_OPTIONAL
--   5, 16 bytes       -07: RDMA2_GRANT
--   6 to 13           -07: CONNPROP, CALL and REPLY types
--   4                 RDMA_ERROR / RDMA2_ERROR (the layout of ERR_VERS is shared; codes 4 to
--                     11 and 100 are -07's)
-- Each field is shown as the draft names it; chunk lists, error arms and transport
-- properties are decoded, and a header that ends early is flagged rpcrdma2.malformed.
--
-- Use:  tshark -X lua_script:wireshark/rpcrdma2.lua -r capture.pcap -V
-- or copy it into Wireshark's personal Lua plugins folder (Help > About > Folders).
-- Tested by interop-tests/tests/tshark_v2.rs, field by field against rpcrdma_v2's own views.

local p = Proto("rpcrdma2", "RPC-over-RDMA Version Two")

local HTYPES = {
  [4] = "RDMA2_ERROR", [5] = "RDMA2_GRANT", [6] = "RDMA2_CONNPROP_MIDDLE", [7] = "RDMA2_CONNPROP_FINAL",
  [8] = "RDMA2_CALL_EXTERNAL", [9] = "RDMA2_CALL_MIDDLE", [10] = "RDMA2_CALL_INLINE",
  [11] = "RDMA2_REPLY_EXTERNAL", [12] = "RDMA2_REPLY_MIDDLE", [13] = "RDMA2_REPLY_INLINE",
}
local PROCS = {
  [0] = "RDMA_MSG", [1] = "RDMA_NOMSG", [2] = "RDMA_MSGP", [3] = "RDMA_DONE", [4] = "RDMA_ERROR",
  [5] = "RDMA_OPTIONAL",
}
local ERRORS = {
  [1] = "ERR_VERS", [2] = "BAD_HEADER (-00) / RDMA2_ERR_BAD_XDR (-07)",
  [3] = "INVAL_OPTION (-00) / RDMA2_ERR_BAD_PROPVAL (-07)", [4] = "RDMA2_ERR_INVAL_HTYPE",
  [5] = "RDMA2_ERR_INVAL_CONT", [6] = "RDMA2_ERR_READ_CHUNKS", [7] = "RDMA2_ERR_WRITE_CHUNKS",
  [8] = "RDMA2_ERR_SEGMENTS", [9] = "RDMA2_ERR_WRITE_RESOURCE", [10] = "RDMA2_ERR_REPLY_RESOURCE",
  [11] = "RDMA2_ERR_VERS_MISMATCH", [100] = "RDMA2_ERR_SYSTEM",
}
local PROPS = {
  [1] = "RDMA2_PROPID_SBSIZ", [2] = "RDMA2_PROPID_RBSIZ", [3] = "RDMA2_PROPID_RSSIZ",
  [4] = "RDMA2_PROPID_RCSIZ", [5] = "RDMA2_PROPID_BRS", [6] = "RDMA2_PROPID_HOSTAUTH",
}

local f = {
  xid = ProtoField.uint32("rpcrdma2.xid", "rdma_xid", base.HEX),
  vers = ProtoField.uint32("rpcrdma2.vers", "rdma_vers"),
  credit = ProtoField.uint32("rpcrdma2.credit", "rdma_credit"),
  dialect = ProtoField.string("rpcrdma2.dialect", "Dialect"),
  proc = ProtoField.uint32("rpcrdma2.proc", "rdma_proc (-00)", base.DEC, PROCS),
  htype = ProtoField.uint32("rpcrdma2.htype", "rdma_htype (-07)", base.DEC, HTYPES),
  inv_handle = ProtoField.uint32("rpcrdma2.inv_handle", "rdma_inv_handle", base.HEX),
  remaining = ProtoField.uint32("rpcrdma2.remaining", "rdma_remaining"),
  reads_count = ProtoField.uint32("rpcrdma2.reads_count", "Read segments"),
  call_count = ProtoField.uint32("rpcrdma2.call_count", "Call chunk segments"),
  writes_count = ProtoField.uint32("rpcrdma2.writes_count", "Write chunks"),
  reply_count = ProtoField.uint32("rpcrdma2.reply_count", "Reply chunks"),
  position = ProtoField.uint32("rpcrdma2.position", "rdma_position"),
  handle = ProtoField.uint32("rpcrdma2.handle", "rdma_handle", base.HEX),
  length = ProtoField.uint32("rpcrdma2.length", "rdma_length"),
  offset = ProtoField.uint64("rpcrdma2.offset", "rdma_offset", base.HEX),
  err = ProtoField.uint32("rpcrdma2.err", "rdma_err", base.DEC, ERRORS),
  vers_low = ProtoField.uint32("rpcrdma2.vers_low", "rdma_vers_low"),
  vers_high = ProtoField.uint32("rpcrdma2.vers_high", "rdma_vers_high"),
  max_chunks = ProtoField.uint32("rpcrdma2.max_chunks", "rdma_max_chunks"),
  max_segments = ProtoField.uint32("rpcrdma2.max_segments", "rdma_max_segments"),
  chunk_index = ProtoField.uint32("rpcrdma2.chunk_index", "rdma_chunk_index"),
  length_needed = ProtoField.uint32("rpcrdma2.length_needed", "rdma_length_needed"),
  props_count = ProtoField.uint32("rpcrdma2.props_count", "Properties"),
  prop_which = ProtoField.uint32("rpcrdma2.prop_which", "rdma_which", base.DEC, PROPS),
  prop_data = ProtoField.bytes("rpcrdma2.prop_data", "rdma_data"),
  opttype = ProtoField.uint32("rpcrdma2.opttype", "rdma_opttype"),
  optinfo = ProtoField.bytes("rpcrdma2.optinfo", "rdma_optinfo"),
  payload_len = ProtoField.uint32("rpcrdma2.payload_len", "RPC message bytes"),
  malformed = ProtoField.string("rpcrdma2.malformed", "Malformed"),
}
p.fields = {}
for _, v in pairs(f) do table.insert(p.fields, v) end

-- A cursor over the payload: every read checks the bytes are there, and a short header
-- raises "short", which the dissector turns into rpcrdma2.malformed.
local function cursor(tvb, tree)
  local c = { tvb = tvb, at = 0, tree = tree }
  function c.need(n) if c.at + n > tvb:len() then error("short", 0) end end
  function c.word(field, t)
    c.need(4)
    local r = tvb(c.at, 4)
    c.at = c.at + 4
    if field then (t or c.tree):add(field, r) end
    return r:uint()
  end
  function c.hyper(field, t)
    c.need(8)
    local r = tvb(c.at, 8)
    c.at = c.at + 8
    ;(t or c.tree):add(field, r)
  end
  function c.opaque(field, t)
    local n = c.word(nil)
    local padded = n + (4 - n % 4) % 4
    c.need(padded)
    local tr = t or c.tree
    tr:add(field, tvb(c.at, n))
    c.at = c.at + padded
    return n
  end
  return c
end

-- An XDR optional-data or boolean word: 1 or 0; anything else is not XDR.
local function present(c)
  local w = c.word(nil)
  if w > 1 then error("a list or optional word of " .. w .. ", not 0 or 1", 0) end
  return w == 1
end

local function segment(c, t)
  c.word(f.handle, t)
  c.word(f.length, t)
  c.hyper(f.offset, t)
end

-- A Read list (or -07's Call chunk): an XDR optional-data list of (position, segment).
local function read_list(c, name, count_field)
  local t = c.tree:add(p, c.tvb(c.at, 0), name)
  local n = 0
  while present(c) do
    c.word(f.position, t)
    segment(c, t)
    n = n + 1
  end
  c.tree:add(count_field, n)
  return n
end

-- One Write chunk: a counted array of segments.
local function write_chunk(c, t)
  local n = c.word(nil)
  for _ = 1, n do segment(c, t) end
end

local function write_list(c, name)
  local t = c.tree:add(p, c.tvb(c.at, 0), name)
  local n = 0
  while present(c) do
    write_chunk(c, t)
    n = n + 1
  end
  c.tree:add(f.writes_count, n)
end

local function reply_chunk(c, name)
  local here = present(c)
  c.tree:add(f.reply_count, here and 1 or 0)
  if here then write_chunk(c, c.tree:add(p, c.tvb(c.at, 0), name)) end
end

local function error_body(c)
  local code = c.word(f.err)
  if code == 1 then
    c.word(f.vers_low)
    c.word(f.vers_high)
  elseif code == 6 or code == 7 then
    c.word(f.max_chunks)
  elseif code == 8 then
    c.word(f.max_segments)
  elseif code == 9 then
    c.word(f.chunk_index)
    c.word(f.length_needed)
  elseif code == 10 then
    c.word(f.length_needed)
  end
end

local function props(c)
  local n = c.word(f.props_count)
  for _ = 1, n do
    local t = c.tree:add(p, c.tvb(c.at, 0), "rpcrdma2_propval")
    c.word(f.prop_which, t)
    c.opaque(f.prop_data, t)
  end
end

-- The body of a -07 header type (sections 6.3.1 to 6.3.10).
local function body07(c, htype)
  if htype == 4 then error_body(c)
  elseif htype == 6 or htype == 7 then props(c)
  elseif htype == 8 then
    c.word(f.inv_handle)
    read_list(c, "rdma_call", f.call_count)
    read_list(c, "rdma_reads", f.reads_count)
    write_list(c, "rdma_provisional_writes")
    reply_chunk(c, "rdma_provisional_reply")
  elseif htype == 9 or htype == 12 then c.word(f.remaining)
  elseif htype == 10 then
    c.word(f.inv_handle)
    read_list(c, "rdma_reads", f.reads_count)
    write_list(c, "rdma_provisional_writes")
    reply_chunk(c, "rdma_provisional_reply")
  elseif htype == 11 then
    write_list(c, "rdma_writes")
    reply_chunk(c, "rdma_reply")
  elseif htype == 13 then write_list(c, "rdma_writes")
  end
end

-- The body of a -00 procedure.
local function body00(c, proc)
  if proc == 0 or proc == 1 then
    read_list(c, "rdma_reads", f.reads_count)
    write_list(c, "rdma_writes")
    reply_chunk(c, "rdma_reply")
  elseif proc == 4 then error_body(c)
  elseif proc == 5 then
    c.word(f.opttype)
    c.opaque(f.optinfo)
  end
end

local function dialect_of(tvb)
  local w = tvb(12, 4):uint()
  if w <= 3 then return "-00" end
  if w == 5 then return tvb:len() > 16 and "-00" or "-07" end
  if w >= 6 and w <= 13 then return "-07" end
  if w == 4 then
    local code = tvb:len() >= 20 and tvb(16, 4):uint() or 0
    if (code >= 4 and code <= 11) or code == 100 then return "-07" end
    return "-00 or -07"
  end
  return "unknown"
end

-- The InfiniBand opcodes whose payload starts an RPC-over-RDMA message: RC SEND_FIRST,
-- SEND_ONLY, SEND_ONLY with Immediate, SEND_ONLY with Invalidate. An RDMA Read response or
-- Write, or the middle of a Send, carries data that only looks like a header.
local SENDS = { [0x00] = true, [0x04] = true, [0x05] = true, [0x17] = true }
local bth_opcode = Field.new("infiniband.bth.opcode")

-- The header types (-07) and procedures (-00) that carry an RPC message after the header.
local function carries_payload(dialect, fourth)
  if dialect == "-07" then return fourth == 9 or fourth == 10 or fourth == 12 or fourth == 13 end
  return fourth == 0 or fourth == 5
end

local function heuristic(tvb, pinfo, tree)
  if tvb:len() < 16 or tvb(4, 4):uint() ~= 2 then return false end
  local op = bth_opcode()
  if op and not SENDS[op.value] then return false end
  if dialect_of(tvb) == "unknown" then return false end
  pinfo.cols.protocol = "RPCoRDMAv2"
  local t = tree:add(p, tvb())
  local c = cursor(tvb, t)
  local dialect = dialect_of(tvb)
  c.word(f.xid)
  c.word(f.vers)
  c.word(f.credit)
  t:add(f.dialect, dialect)
  local fourth = tvb(12, 4):uint()
  local ok, why = pcall(function()
    if dialect == "-07" then
      c.word(f.htype)
      body07(c, fourth)
    else
      c.word(f.proc)
      body00(c, fourth)
    end
  end)
  if not ok then
    t:add(f.malformed, why == "short" and "the header ends early" or tostring(why))
    pinfo.cols.info = "RPC-over-RDMA v2 (malformed)"
    return true
  end
  local name = dialect == "-07" and (HTYPES[fourth] or "unknown") or (PROCS[fourth] or "unknown")
  pinfo.cols.info = string.format("RPC-over-RDMA v2 %s %s xid 0x%08x", dialect, name, tvb(0, 4):uint())
  if tvb:len() > c.at then
    if carries_payload(dialect, fourth) then
      t:add(f.payload_len, tvb:len() - c.at)
    else
      t:add(f.malformed, string.format("%d bytes after a header that carries no RPC message", tvb:len() - c.at))
    end
  end
  return true
end

p:register_heuristic("infiniband.payload", heuristic)
