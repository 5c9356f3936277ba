#!/bin/bash
# kernel-nfsd.sh: runs INSIDE the Soft-RoCE guest (guest/test-kernel puts it in the share).
# Starts the Linux kernel's NFS server (nfsd, with svcrdma from the rpcrdma module) listening
# for RPC-over-RDMA on 10.0.2.15:20049, then runs CMD [ARG...] and exits with its status.
#
#   bash kernel-nfsd.sh [CMD [ARG...]]
#
# What it sets up (see /work/shared/ORACLES.md, "The Linux kernel's own RPC-over-RDMA"):
# rpcbind -w (nfsd cannot register without it), the nfsd filesystem, one export of a tmpfs
# folder (/srv/nfs, fsid=0 so that it is also NFSv4's pseudo-root, insecure because an
# rdma_cm source port is not a reserved one) holding a file "hello" whose content CMD may read,
# and "data64k" (64 KiB of "k", for guest/bench-kernel),
# rpc.mountd, rpc.nfsd with a 10 s NFSv4 grace period, then `rdma 20049` in
# /proc/fs/nfsd/portlist, and waits (bounded) until the kernel lists the RDMA listener.
# If the server cannot be started it says why, shows the kernel's last words, and exits 3.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
PORT=20049
ADDR=${RDMA_TEST_ADDR:-10.0.2.15}
T0=$(cut -d' ' -f1 /proc/uptime)
say() { echo "kernel-nfsd [$(cut -d' ' -f1 /proc/uptime) s]: $*" >&2; }
fail() {
    say "FAILED: the kernel NFS server could not be started: $*"
    echo "--- dmesg (last 30 lines) ---" >&2
    dmesg 2>/dev/null | tail -n 30 >&2
    exit 3
}
run() { # run CMD, failing with its output when it fails
    local out
    out=$("$@" 2>&1) || fail "'$*' failed: $out"
    [ -z "$out" ] || say "$*: $out"
}

say "starting (booted $T0 s ago)"
for m in sunrpc rpcrdma nfsd; do
    run modprobe "$m"
done

mkdir -p /run/rpcbind /var/lib/nfs/rpc_pipefs /var/lib/nfs/v4recovery /srv/nfs
run rpcbind -w
mountpoint -q /proc/fs/nfsd || run mount -t nfsd nfsd /proc/fs/nfsd
mountpoint -q /srv/nfs || run mount -t tmpfs -o size=160m tmpfs /srv/nfs
printf 'hello from the kernel NFS server over RPC-over-RDMA\n' >/srv/nfs/hello || fail "cannot write /srv/nfs/hello"
# 64 KiB of 'k' for guest/bench-kernel's Write-chunk READs.
head -c 65536 /dev/zero | tr '\0' k >/srv/nfs/data64k || fail "cannot write /srv/nfs/data64k"
echo "/srv/nfs *(rw,fsid=0,insecure,no_subtree_check,no_root_squash,sync)" >/etc/exports ||
    fail "cannot write /etc/exports"
run exportfs -ra
# On a fixed TCP port, so that kernel_nfs3_data can MNT without asking rpcbind. (160 MiB of
# tmpfs: kernel_nfs3_data writes 16 MiB, guest/bench-nfs3 64 MiB.)
run rpc.mountd -p 20048
# A short NFSv4 grace period (default 90 s): nothing here recovers state.
echo 10 >/proc/fs/nfsd/nfsv4gracetime 2>/dev/null || true
echo 10 >/proc/fs/nfsd/nfsv4leasetime 2>/dev/null || true
run rpc.nfsd 1
echo "rdma $PORT" >/proc/fs/nfsd/portlist 2>/tmp/portlist.err ||
    fail "echo 'rdma $PORT' > /proc/fs/nfsd/portlist: $(cat /tmp/portlist.err) (is rpcrdma loaded? $(lsmod | grep -c '^rpcrdma') )"

# Listening: the portlist names the RDMA transport and rdma_cm has a listener on the port.
ready=0
for _ in $(seq 1 300); do
    if grep -q "^rdma $PORT\$" /proc/fs/nfsd/portlist 2>/dev/null; then
        if ! command -v rdma >/dev/null 2>&1 || ! rdma resource show cm_id >/dev/null 2>&1 ||
           rdma resource show cm_id 2>/dev/null | grep -q "LISTEN.*:$PORT\b"; then
            ready=1
            break
        fi
    fi
    sleep 0.1
done
[ "$ready" = 1 ] || fail "no RDMA listener on port $PORT after 30 s (portlist: $(tr '\n' ' ' </proc/fs/nfsd/portlist); cm_ids: $(rdma resource show cm_id 2>&1 | tr '\n' ' '))"
# End the NFSv4 grace period now (READ with the anonymous stateid gets NFS4ERR_GRACE in it).
echo Y >/proc/fs/nfsd/v4_end_grace 2>/dev/null || say "cannot end the grace period early (no v4_end_grace)"
say "listening: portlist '$(tr '\n' ' ' </proc/fs/nfsd/portlist)', versions '$(cat /proc/fs/nfsd/versions 2>/dev/null)', export /srv/nfs on $ADDR:$PORT"
rdma resource show cm_id 2>/dev/null | grep ":$PORT" | sed 's/^/kernel-nfsd: cm_id: /' >&2

# The kernel's rpcrdma tracepoints explain what svcrdma did with each message (Reply chunk,
# Write chunks, Send With Invalidate): shown after CMD when KERNEL_NFSD_TRACE=1.
TRACE=/sys/kernel/tracing
if [ "${KERNEL_NFSD_TRACE:-0}" = 1 ]; then
    mountpoint -q "$TRACE" || mount -t tracefs nodev "$TRACE" 2>/dev/null || true
    if [ -d "$TRACE/events/rpcrdma" ]; then
        echo 4096 >"$TRACE/buffer_size_kb" 2>/dev/null || true
        echo 1 >"$TRACE/events/rpcrdma/enable" || say "cannot enable the rpcrdma tracepoints"
    else
        say "no rpcrdma tracepoints in $TRACE"
    fi
fi

[ $# -gt 0 ] || exit 0
"$@"
status=$?
if [ "${KERNEL_NFSD_TRACE:-0}" = 1 ] && [ -r "$TRACE/trace" ]; then
    echo "--- rpcrdma trace ---" >&2
    # without the Receives posted and flushed at connect and disconnect
    grep -v -e '^#' -e 'svcrdma_post_recv:' -e 'svcrdma_wc_recv_flush:' "$TRACE/trace" | sed -e 's/^ *//' >&2
fi
if [ "$status" != 0 ]; then
    echo "--- dmesg (last 20 lines) ---" >&2
    dmesg 2>/dev/null | tail -n 20 >&2
fi
exit "$status"
