#!/bin/bash
# kernel-nfs3.sh: runs INSIDE the Soft-RoCE guest (guest/test-kernel-nfs3 puts it in the
# share beside the nfs3-server binary). Serves a folder with our nfs3-server over rdma-core
# (NFSv3 on 10.0.2.15:20049, MOUNT on TCP 20048), mounts it with the kernel's NFS client over
# RPC-over-RDMA, and moves real files through it: ls, stat, cat, cp in and out (16 MiB,
# sha256sum compared, page cache dropped between), dd, ln -s (a 4000-byte target too) and
# readlink, mv of a file and of a directory (a file opened before still readable), ln, mkdir, a
# 1000-entry directory listed, rm, a Long call (a RENAME); then checks from the kernel's
# rpcrdma trace and our Server's counters that Read, Write and Reply chunks and Long calls
# were used, with remote invalidation and 128 credits. Each step prints "ok:" or "FAIL:";
# exits 1 when any failed, 3 when the server or the mount could not be started (with the
# server's log and the kernel's last words).
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

./nfs3-server --root "$EXPORT" --listen "$ADDR:$PORT" --mount-port "$MPORT" --backend rdma --verbose --no-root-squash ${NFS3_SERVER_ARGS:-} >/tmp/nfs3-server.log 2>&1 &
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
head -c $((16 << 20)) /dev/urandom >/tmp/src
check "small WRITE (inline, 512 bytes)" dd if=/tmp/src of="$MNT/small.bin" bs=512 count=1 conv=fsync
check "small WRITE on the server" cmp -n 512 /tmp/src "$EXPORT/small.bin"
check "WRITE of 64 KiB (a Read chunk)" dd if=/tmp/src of="$MNT/mid.bin" bs=64k count=1 conv=fsync
check "64 KiB on the server" cmp -n 65536 /tmp/src "$EXPORT/mid.bin"
WANT=$(sha256sum </tmp/src | cut -d' ' -f1)
check "cp in (16 MiB)" cp /tmp/src "$MNT/big"
check "sync" sync
check "sha256 on the server's disk" test "$(sha256sum <"$EXPORT/big" | cut -d' ' -f1)" = "$WANT"
echo 3 >/proc/sys/vm/drop_caches
check "cp out (16 MiB)" cp "$MNT/big" /tmp/back
check "sha256 read back" test "$(sha256sum </tmp/back | cut -d' ' -f1)" = "$WANT"
check "dd (1 MiB blocks)" dd if=/tmp/src of="$MNT/dd.bin" bs=1M count=2 conv=fsync
check "dd size" test "$(stat -c %s "$EXPORT/dd.bin")" = $((2 << 20))
# SYMLINK with a 4000-byte path: xprtrdma sends the path through a Read chunk (RFC 8267
# section 3.1.1 makes it DDP-eligible). The link must be made, and READLINK (its reply larger
# than the 4096-byte inline threshold) must give the 4000 bytes back, with the page cache
# dropped first (the client keeps the text it sent).
LONG=$(head -c 4000 /dev/zero | tr '\0' a)
check "SYMLINK of 4000 bytes (a Read chunk)" ln -s "$LONG" "$MNT/longlink"
echo 3 >/proc/sys/vm/drop_caches
check "READLINK gives the 4000 bytes back" test "$(readlink "$MNT/longlink")" = "$LONG"
check "the 4000-byte symlink on the server" test "$(readlink "$EXPORT/longlink")" = "$LONG"
# RENAME (mv) of a file, then of a directory with files inside; a file opened before the
# rename reads on through its handle (page cache dropped, so the READ goes to the server).
check "write m1" bash -c "echo 'moved file' >$MNT/m1"
check "mv of a file" mv "$MNT/m1" "$MNT/m2"
check "cat through the new name" grep -qx "moved file" "$MNT/m2"
check "mv: old name gone, new one there (server)" test ! -e "$EXPORT/m1" -a -e "$EXPORT/m2"
check "a file opened before mv still readable" bash -c \
    "exec 3<$MNT/m2 && mv $MNT/m2 $MNT/m3 && echo 3 >/proc/sys/vm/drop_caches && grep -qx 'moved file' <&3"
check "a directory with files" bash -c \
    "mkdir -p $MNT/tree/sub && echo one >$MNT/tree/a && echo two >$MNT/tree/sub/b"
check "mv of a directory with files inside (one open)" bash -c \
    "exec 3<$MNT/tree/sub/b && mv $MNT/tree $MNT/tree2 && echo 3 >/proc/sys/vm/drop_caches && grep -qx two <&3"
check "cat through the moved directory" bash -c \
    "grep -qx one $MNT/tree2/a && grep -qx two $MNT/tree2/sub/b && test ! -e $MNT/tree"
check "mv of a directory (server)" test -f "$EXPORT/tree2/sub/b" -a ! -e "$EXPORT/tree"
# LINK (ln): two names, link count 2; removing one leaves the other readable.
check "ln (hard link)" ln "$MNT/m3" "$MNT/m3.link"
check "link count 2 (stat -c %h)" test "$(stat -c %h "$MNT/m3")" = 2
check "link count 2 on the server" test "$(stat -c %h "$EXPORT/m3")" = 2
check "rm of one link, cat of the other" bash -c "rm $MNT/m3 && grep -qx 'moved file' $MNT/m3.link"
# SYMLINK (ln -s), READLINK, and a cat through the link (the client follows it).
check "ln -s" ln -s m3.link "$MNT/sym"
echo 3 >/proc/sys/vm/drop_caches
check "readlink" test "$(readlink "$MNT/sym")" = m3.link
check "cat through the symlink" grep -qx "moved file" "$MNT/sym"
check "a symlink on the server" test "$(readlink "$EXPORT/sym")" = m3.link
check "rm what mv, ln and ln -s made" rm -r "$MNT/sym" "$MNT/m3.link" "$MNT/longlink" "$MNT/tree2"
check "mkdir" mkdir "$MNT/dir"
check "1000 files created" bash -c "cd $MNT/dir && for i in \$(seq 1 1000); do : >f\$i; done"
check "1000 files listed" test "$(ls "$MNT/dir" | wc -l)" = 1000
echo 3 >/proc/sys/vm/drop_caches
# ls -l: READDIRPLUS, whose replies are larger than the 4096-byte reply threshold, so the
# kernel offers a Reply chunk (RFC 8166 section 3.5.4). 1001 lines: "total" and 1000 files.
check "ls -l of 1000 (1001 lines)" test "$(ls -l "$MNT/dir" | wc -l)" = 1001
check "rm -r" rm -r "$MNT/dir"
check "rmdir after mkdir" bash -c "mkdir $MNT/d2 && rmdir $MNT/d2 && test ! -e $EXPORT/d2"
check "rm" rm "$MNT/big" "$MNT/dd.bin" "$MNT/small.bin" "$MNT/mid.bin"
check "gone on the server" test ! -e "$EXPORT/dir" -a ! -e "$EXPORT/big"
check "ls after rm" bash -c "test \"\$(ls $MNT)\" = hello.txt"
say "xprtrdma's counters: $(grep -A30 " $MNT " /proc/self/mountstats 2>/dev/null | grep 'xprt:' | head -n 1)"
check "umount (exit 0)" umount "$MNT"

# A Long call (RFC 8166 section 3.5.3: RDMA_NOMSG with the whole call in a Position-Zero
# Read chunk). xprtrdma sends one for a call larger than its inline threshold that carries no
# DDP-eligible data; with a 4096-byte threshold no NFSv3 call of the Linux client is such a
# call (names are at most 255 bytes; WRITE data and SYMLINK paths go in Read chunks). So a
# second nfs3-server advertises a 1024-byte Receive (RFC 8797 section 4.1; 1024 is RFC 8166
# section 3.3.2's least threshold), and xprtrdma's send threshold becomes 1024 less its
# largest header (708 bytes): a RENAME between two 255-byte names with an AUTH_SYS credential
# of 16 groups (RFC 5531 appendix A) exceeds it (764 bytes seen). The 64-byte node name is
# margin; 6.1's credential did not grow with it here.
./nfs3-server --root "$EXPORT" --listen "$ADDR:$((PORT + 2))" --mount-port "$((MPORT + 2))" --backend rdma \
    --verbose --no-root-squash --receive 1024 >/tmp/nfs3-server-small.log 2>&1 &
SMALL=$!
for _ in $(seq 1 50); do grep -q "NFSv3 on" /tmp/nfs3-server-small.log 2>/dev/null && break; sleep 0.2; done
SOPTS="vers=3,proto=rdma,port=$((PORT + 2)),mountport=$((MPORT + 2)),mountproto=tcp,nolock,soft,timeo=100,retrans=2"
N1=$(head -c 255 /dev/zero | tr '\0' b)
N2=$(head -c 255 /dev/zero | tr '\0' c)
HOST=$(hostname)
# The credential's machine name is the node name when the RPC client is created (the mount).
# (Through /proc: hostname(1) refuses a 64-byte DNS label.)
head -c 64 /dev/zero | tr '\0' h >/proc/sys/kernel/hostname
if timeout 120 mount -t nfs -o "$SOPTS" "$ADDR:/" "$MNT"; then
    echo "$HOST" >/proc/sys/kernel/hostname
    check "create a 255-byte name (1024-byte Receive)" touch "$MNT/$N1"
    check "RENAME between 255-byte names (a Long call)" \
        setpriv --groups "$(seq -s, 1 16)" mv "$MNT/$N1" "$MNT/$N2"
    check "renamed on the server" test -e "$EXPORT/$N2" -a ! -e "$EXPORT/$N1"
    check "rm the 255-byte name" bash -c "rm -f $MNT/$N1 $MNT/$N2"
    check "umount the second mount (exit 0)" umount "$MNT"
else
    echo "$HOST" >/proc/sys/kernel/hostname
    echo "FAIL: mount of the server with a 1024-byte Receive: $(tail -n 5 /tmp/nfs3-server-small.log)"
    FAILED=$((FAILED + 1))
fi
kill "$SMALL" 2>/dev/null

# ---- Which forms the transport used, from both sides.
# The kernel's xprtrdma_marshal tracepoint says how each call went: "%s/%s" at its end is the
# call's chunk type / the reply's (6.1 include/trace/events/rpcrdma.h xprtrdma_show_chunktype:
# "read list" = Read chunks for DDP data, "*read list" = a Long call, "write list", "reply
# chunk", "inline"/"pullup"/"mapped" = none).
echo 0 >"$TRACE/events/rpcrdma/enable" 2>/dev/null
grep -v '^#' "$TRACE/trace" 2>/dev/null >/tmp/trace.txt
marshal() { grep 'xprtrdma_marshal' /tmp/trace.txt | grep -c -- "$1"; }
traced() { # traced NAME COUNT: ok when the kernel's trace shows COUNT > 0
    if [ "$2" -gt 0 ]; then echo "ok:   $1 ($2 in the kernel's trace)"; else
        echo "FAIL: $1: none in the kernel's rpcrdma trace"
        FAILED=$((FAILED + 1))
    fi
}
traced "Read chunks (WRITE data)" "$(marshal ' read list/')"
traced "Long calls (Position-Zero Read chunk)" "$(marshal '\*read list/')"
traced "Write chunks (READ data)" "$(marshal '/write list')"
traced "Reply chunks" "$(marshal '/reply chunk')"
# The thresholds xprtrdma computed, and its Long calls, for the record.
grep -E 'inline_thresh|\*read list/' /tmp/trace.txt | head -n 10 | sed 's/^ */kernel-nfs3 trace: /'
# Remote invalidation (RFC 8797 section 4.2): both sides set the R flag, so our replies to
# calls with chunks are Sends with Invalidate, and xprtrdma then finds its MRs invalidated.
traced "remote invalidation (xprtrdma_mr_reminv)" "$(grep -c 'xprtrdma_mr_reminv' /tmp/trace.txt)"
traced "128 credits granted (xprtrdma_reply credits=128)" "$(grep 'xprtrdma_reply:' /tmp/trace.txt | grep -c 'credits=128')"
# Our Server's side: its counters and what it saw of the peer, printed every 2 s with --verbose.
sleep 3
STATS=$(grep 'nfs3-server: ServerStats' /tmp/nfs3-server.log | tail -n 1)
PEER=$(grep 'nfs3-server: peer 0:' /tmp/nfs3-server.log | tail -n 1)
say "server: $STATS"
say "server: $PEER"
stat_of() { sed -n "s/.*[ {]$1: \([0-9]*\).*/\1/p" <<<"$STATS"; }
served() { # served NAME FIELD
    local n
    n=$(stat_of "$2")
    if [ "${n:-0}" -gt 0 ]; then echo "ok:   $1 ($2 $n)"; else
        echo "FAIL: $1: $2 is ${n:-absent} in '$STATS'"
        FAILED=$((FAILED + 1))
    fi
}
served "server wrote Write chunks" write_chunk_results
served "server replied through Reply chunks" reply_chunk_replies
check "server: credit overruns 0" test "$(stat_of credit_overruns)" = 0
check "server: the kernel asked 128 credits, we granted 128" grep -q "credits asked 128 granted 128" <<<"$PEER"
check "server: the kernel's R flag, remote invalidation agreed" grep -q "requester R flag true; remote invalidation true" <<<"$PEER"
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
