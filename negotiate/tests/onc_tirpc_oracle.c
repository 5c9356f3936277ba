/* libtirpc's own rpc_msg encoders (xdr_callmsg, xdr_replymsg, xdr_authunix_parms), for
 * negotiate/tests/onc_tirpc.rs (built there with `cc ... -ltirpc`): each message on its own line, "<name> <hex>". */
#include <stdio.h>
#include <string.h>
#include <rpc/rpc.h>

static void hexline(const char *name, const char *buf, unsigned len) {
    printf("%s ", name);
    for (unsigned i = 0; i < len; i++) printf("%02x", (unsigned char)buf[i]);
    printf("\n");
}

static void call(const char *name, struct opaque_auth cred) {
    char buf[1024];
    XDR x;
    struct rpc_msg m;
    memset(&m, 0, sizeof m);
    m.rm_xid = 0x01020304;
    m.rm_direction = CALL;
    m.rm_call.cb_rpcvers = 2;
    m.rm_call.cb_prog = 100003;
    m.rm_call.cb_vers = 4;
    m.rm_call.cb_proc = 1;
    m.rm_call.cb_cred = cred;
    m.rm_call.cb_verf = _null_auth;
    xdrmem_create(&x, buf, sizeof buf, XDR_ENCODE);
    if (!xdr_callmsg(&x, &m)) { fprintf(stderr, "xdr_callmsg %s failed\n", name); return; }
    hexline(name, buf, xdr_getpos(&x));
}

static void reply(const char *name, struct rpc_msg *m) {
    char buf[1024];
    XDR x;
    m->rm_xid = 0xfeedface;
    m->rm_direction = REPLY;
    xdrmem_create(&x, buf, sizeof buf, XDR_ENCODE);
    if (!xdr_replymsg(&x, m)) { fprintf(stderr, "xdr_replymsg %s failed\n", name); return; }
    hexline(name, buf, xdr_getpos(&x));
}

static void accepted(const char *name, enum accept_stat stat) {
    struct rpc_msg m;
    memset(&m, 0, sizeof m);
    m.rm_reply.rp_stat = MSG_ACCEPTED;
    m.acpted_rply.ar_verf = _null_auth;
    m.acpted_rply.ar_stat = stat;
    if (stat == PROG_MISMATCH) { m.acpted_rply.ar_vers.low = 2; m.acpted_rply.ar_vers.high = 4; }
    reply(name, &m);
}

int main(void) {
    call("call_none", _null_auth);

    gid_t gids[2] = {100, 10};
    struct authunix_parms p = {0x5eed, "rpcrdma-rs", 1000, 100, 2, gids};
    char body[MAX_AUTH_BYTES];
    XDR x;
    xdrmem_create(&x, body, sizeof body, XDR_ENCODE);
    if (!xdr_authunix_parms(&x, &p)) { fprintf(stderr, "xdr_authunix_parms failed\n"); return 1; }
    struct opaque_auth sys = {AUTH_SYS, body, xdr_getpos(&x)};
    call("call_sys", sys);

    unsigned results = 42;
    struct rpc_msg m;
    memset(&m, 0, sizeof m);
    m.rm_reply.rp_stat = MSG_ACCEPTED;
    m.acpted_rply.ar_verf = _null_auth;
    m.acpted_rply.ar_stat = SUCCESS;
    m.acpted_rply.ar_results.where = (caddr_t)&results;
    m.acpted_rply.ar_results.proc = (xdrproc_t)xdr_u_int;
    reply("success_42", &m);
    accepted("prog_unavail", PROG_UNAVAIL);
    accepted("prog_mismatch_2_4", PROG_MISMATCH);
    accepted("proc_unavail", PROC_UNAVAIL);
    accepted("garbage_args", GARBAGE_ARGS);
    accepted("system_err", SYSTEM_ERR);

    memset(&m, 0, sizeof m);
    m.rm_reply.rp_stat = MSG_DENIED;
    m.rjcted_rply.rj_stat = RPC_MISMATCH;
    m.rjcted_rply.rj_vers.low = 2;
    m.rjcted_rply.rj_vers.high = 2;
    reply("rpc_mismatch_2_2", &m);
    memset(&m, 0, sizeof m);
    m.rm_reply.rp_stat = MSG_DENIED;
    m.rjcted_rply.rj_stat = AUTH_ERROR;
    m.rjcted_rply.rj_why = AUTH_TOOWEAK;
    reply("auth_error_tooweak", &m);
    return 0;
}
