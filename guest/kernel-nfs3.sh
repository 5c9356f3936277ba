#!/bin/bash
# kernel-nfs3.sh: runs INSIDE the Soft-RoCE guest (guest/test-kernel-nfs3 puts it in the
# share beside the nfs3-server binary). Serves a folder with our nfs3-server over rdma-core
# (NFSv3 on 10.0.2.15:20049, MOUNT on TCP 20048), mounts it with the kernel's NFS client over
# RPC-over-RDMA, and moves real files through it: ls, stat, cat, cp in and out (4 MiB,
# sha256sum compared, page cache dropped between), dd, mkdir, a 1000-entry directory listed,
# rm. Each step prints "ok:" or "FAIL:"; exits 1 when any failed, 3 when the server or the
# mount could not be started (with the server's log and the kernel's last words).
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ADDR=${RDMA_TEST_ADDR:-10.0.2.15}
PORT=20049
MPORT=20048
EXPORT=/srv/nfs3
MNT=/mnt/nfs3
FAILED=0
say() { echo "kernel-nfs3 [$(cut -d' ' -f1 /proc/uptime) s]: $*" >&2; }
check() { # check NAME CMD...: runs CMD (bounded), ok when it succeeds
    local name=$1 out
    shift
    # SIGKILL: a task waiting on NFS ignores SIGTERM.
    if out=$(timeout -s KILL 150 "$@" 2>&1); then
        echo "ok:   $name"
    else
        echo "FAIL: $name: '$*' -> $out"
        FAILED=$((FAILED + 1))
    fi
}
TRACE=/sys/kernel/tracing
show_trace() { # rxe's counters, and the kernel's rpcrdma tracepoints (what xprtrdma did)
    echo "--- rxe0 counters ---"
    grep -H . /sys/class/infiniband/rxe0/ports/1/hw_counters/* 2>/dev/null | sed 's|.*/||' | tr '\n' ' '
    echo
    [ -r "$TRACE/trace" ] || return 0
    echo "--- rpcrdma trace (last 150 lines, Receives posted left out) ---"
    grep -v -e '^#' -e post_recv -e WR_FLUSH_ERR "$TRACE/trace" | tail -n 150
}
give_up() {
    say "FAILED: $*"
    echo "--- server log ---" >&2
    tail -n 200 /tmp/nfs3-server.log >&2
    echo "--- dmesg (last 40 lines) ---" >&2
    dmesg 2>/dev/null | tail -n 40 >&2
    show_trace >&2
    exit 3
}

for m in sunrpc rpcrdma nfs nfsv3; do modprobe "$m" 2>/dev/null || say "modprobe $m failed"; done
[ -d "$TRACE/events/rpcrdma" ] || mount -t tracefs nodev "$TRACE" 2>/dev/null
echo 8192 >"$TRACE/buffer_size_kb" 2>/dev/null
echo 1 >"$TRACE/events/rpcrdma/enable" 2>/dev/null || say "no rpcrdma tracepoints"
mkdir -p "$EXPORT" "$MNT"
echo "hello from the export" >"$EXPORT/hello.txt"

./nfs3-server --root "$EXPORT" --listen "$ADDR:$PORT" --mount-port "$MPORT" --backend rdma --verbose ${NFS3_SERVER_ARGS:-} >/tmp/nfs3-server.log 2>&1 &
SERVER=$!
for _ in $(seq 1 50); do
    grep -q "listening\|NFSv3 on" /tmp/nfs3-server.log 2>/dev/null && break
    kill -0 "$SERVER" 2>/dev/null || give_up "nfs3-server exited"
    sleep 0.2
done
say "$(cat /tmp/nfs3-server.log)"

# soft: a call the server never answers fails (EIO) instead of hanging the step.
OPTS="vers=3,proto=rdma,port=$PORT,mountport=$MPORT,mountproto=tcp,nolock,soft,timeo=100,retrans=2"
say "mount -t nfs -o $OPTS $ADDR:/ $MNT"
timeout 120 mount -t nfs -o "$OPTS" "$ADDR:/" "$MNT" || give_up "the mount failed (status $?)"
say "mounted: $(grep " $MNT " /proc/mounts)"

check "ls -l" ls -l "$MNT"
check "stat" stat "$MNT/hello.txt"
check "cat" grep -qx "hello from the export" "$MNT/hello.txt"
head -c $((4 << 20)) /dev/urandom >/tmp/src
check "small WRITE (inline, 512 bytes)" dd if=/tmp/src of="$MNT/small.bin" bs=512 count=1 conv=fsync
check "small WRITE on the server" cmp -n 512 /tmp/src "$EXPORT/small.bin"
check "WRITE of 64 KiB (a Read chunk)" dd if=/tmp/src of="$MNT/mid.bin" bs=64k count=1 conv=fsync
check "64 KiB on the server" cmp -n 65536 /tmp/src "$EXPORT/mid.bin"
WANT=$(sha256sum </tmp/src | cut -d' ' -f1)
check "cp in (4 MiB)" cp /tmp/src "$MNT/big"
check "sync" sync
check "sha256 on the server's disk" test "$(sha256sum <"$EXPORT/big" | cut -d' ' -f1)" = "$WANT"
echo 3 >/proc/sys/vm/drop_caches
check "cp out (4 MiB)" cp "$MNT/big" /tmp/back
check "sha256 read back" test "$(sha256sum </tmp/back | cut -d' ' -f1)" = "$WANT"
check "dd (1 MiB blocks)" dd if=/tmp/src of="$MNT/dd.bin" bs=1M count=2 conv=fsync
check "dd size" test "$(stat -c %s "$EXPORT/dd.bin")" = $((2 << 20))
check "mkdir" mkdir "$MNT/dir"
check "1000 files created" bash -c "cd $MNT/dir && for i in \$(seq 1 1000); do : >f\$i; done"
check "1000 files listed" test "$(ls "$MNT/dir" | wc -l)" = 1000
check "ls -l of 1000" bash -c "ls -l $MNT/dir >/dev/null"
check "rm -r" rm -r "$MNT/dir"
check "rm" rm "$MNT/big" "$MNT/dd.bin" "$MNT/small.bin" "$MNT/mid.bin"
check "gone on the server" test ! -e "$EXPORT/dir" -a ! -e "$EXPORT/big"
check "ls after rm" bash -c "test \"\$(ls $MNT)\" = hello.txt"
check "umount" umount "$MNT"
say "server: $(grep 'connections ended' /tmp/nfs3-server.log | tail -n 1)"

kill "$SERVER" 2>/dev/null
if [ "$FAILED" -ne 0 ]; then
    echo "--- server log (last 200 lines) ---"
    tail -n 200 /tmp/nfs3-server.log
    echo "--- dmesg (last 40 lines) ---"
    dmesg 2>/dev/null | tail -n 40
    show_trace
    echo "kernel-nfs3: $FAILED step(s) FAILED"
    exit 1
fi
echo "kernel-nfs3: all steps passed"
