#!/usr/bin/env python3
"""Write the seed corpus: a few valid RPC-over-RDMA Version One headers, the
same set for every target (fuzz/seeds/<target>/<name>). Run from fuzz/."""
import os
import struct


def words(*ws):
    return b"".join(struct.pack(">I", w) for w in ws)


def rpc_call(xid):
    # xid, CALL, rpcvers 2, NFS, version 3, procedure 0 (NULL)
    return words(xid, 0, 2, 100003, 3, 0)


SEEDS = {
    # RDMA_MSG, no chunks, an RPC call inline.
    "plain_msg": words(7, 1, 32, 0, 0, 0, 0) + rpc_call(7),
    # RDMA_MSG with a read chunk at 96, a 2-segment write chunk and a reply chunk.
    "chunked_msg": words(
        7, 1, 32, 0,
        1, 96, 0x11, 4096, 0, 0x1000, 0,
        1, 2, 0x21, 8192, 0, 0x2000, 0x22, 8192, 0, 0x4000, 0,
        1, 1, 0x31, 65536, 0, 0x8000,
    ) + rpc_call(7),
    # RDMA_NOMSG long call: the whole RPC call in a Position-zero read chunk.
    "nomsg_long_call": words(7, 1, 32, 1, 1, 0, 9, 4096, 0, 0, 0, 0, 0),
    # RDMA_NOMSG long reply: a reply chunk only.
    "nomsg_long_reply": words(7, 1, 32, 1, 0, 0, 1, 1, 9, 4096, 0, 0),
    # RDMA_MSG call with a 5-byte Read chunk at Position 8 of the inline call.
    "msg_read_chunk_in_payload": words(7, 1, 32, 0, 1, 8, 0x11, 5, 0, 0x1000, 0, 0, 0) + rpc_call(7),
    # RDMA_MSG reply whose 5-byte result went into a Write chunk: the reduced
    # stream keeps the result's length word at offset 4.
    "msg_reply_write_chunk": words(7, 1, 32, 0, 0, 1, 1, 0x21, 5, 0, 0x2000, 0, 0, 7, 5),
    # RDMA_ERROR / ERR_VERS, versions 1..1.
    "err_vers": words(7, 1, 32, 4, 1, 1, 1),
    # RDMA_ERROR / ERR_CHUNK.
    "err_chunk": words(7, 1, 32, 4, 2),
    # A version 2 probe (answered with ERR_VERS).
    "vers2_probe": words(9, 2, 1, 0),
}

for target in ("header_decode", "verdict", "reassembly"):
    os.makedirs(os.path.join("seeds", target), exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join("seeds", target, name), "wb") as f:
            f.write(data)


# The TCP backend's frames after the handshake (verbs::tcp::frame; integers little-endian):
# valid ones, the floods and lies a hostile peer sends, and bytes of another protocol.
def le(*ws):
    return b"".join(struct.pack("<I", w) for w in ws)


def rdma(tag, addr, rkey, length):
    return bytes([tag]) + struct.pack("<Q", addr) + le(rkey, length)


TCP_FRAMES = {
    "send_small": bytes([1]) + le(8) + b"12345678",
    "send_too_big": bytes([1]) + le(64) + bytes(64),
    "write_zero_len_flood": rdma(3, 0, 0, 0) * 64,
    "read_req_zero": rdma(4, 0, 0, 0),
    "ack_unsolicited": bytes([5]),
    "read_resp_unsolicited": bytes([6]) + le(4) + b"abcd",
    "nak": bytes([7, 1]),
    "bad_tag": b"GET / HTTP/1.1\r\n\r\n",
    "send_inv_bogus": bytes([2]) + le(0xDEADBEEF, 4) + b"wxyz",
}

os.makedirs(os.path.join("seeds", "tcp_frames"), exist_ok=True)
for name, data in TCP_FRAMES.items():
    with open(os.path.join("seeds", "tcp_frames", name), "wb") as f:
        f.write(data)
