/*
 * harness.c: a line-oriented encoder/decoder for RPC-over-RDMA Version One
 * headers, built on the rpcgen + libtirpc output of the v1 XDR.  It is an
 * oracle: an independent implementation the Rust code is compared against.
 *
 * Build (interop_tests::oracle::build_rpcgen_harness does exactly this):
 *   rpcgen -h -o rpcrdma_v1.h rpcrdma_v1.x
 *   rpcgen -c -o rpcrdma_v1_xdr.c rpcrdma_v1.x
 *   gcc -O2 -pthread -I/usr/include/tirpc harness.c rpcrdma_v1_xdr.c -ltirpc
 *
 * PROTOCOL.  One request per line on stdin, exactly one reply line per
 * request on stdout (flushed after each line):
 *
 *   E <canonical>  encode with xdr_rdma_msg (XDR_ENCODE)
 *                  -> "OK <hex>" | "ERR <reason>"
 *   D <hex>        decode with xdr_rdma_msg (XDR_DECODE) from the start of the
 *                  bytes; bytes after the header (an RPC body) are ignored
 *                  -> "OK <canonical>" | "ERR <reason>"
 *   P <hex>        like D, and also says how many bytes the header took
 *                  -> "OK <consumed> <canonical>" | "ERR <reason>"
 *
 *   B <slot> <canonical>
 *                  benchmark set-up: parse into bench slot <slot> (0..3),
 *                  encode it once with xdr_rdma_msg, keep the message and its
 *                  bytes in the slot -> "OK <hex>" | "ERR <reason>"
 *   T <slot> E|D <iters>
 *                  benchmark: time <iters> encodes of the slot's message (E)
 *                  or decodes of its bytes (D) with clock_gettime
 *                  (CLOCK_MONOTONIC) -> "OK <total ns> <ns per operation>"
 *                  | "ERR <reason>" (see "Benchmark mode" below)
 *
 * <hex> is the bytes as hex digits, two per byte, no separators (upper or
 * lower case accepted on input; lower case on output).  <reason> is free
 * text on one line.  A decoded message is freed with xdr_free.
 *
 * CANONICAL TEXT.  One line, fields separated by exactly one space, in this
 * order, numbers in decimal without sign or leading zeros (u32: 0..4294967295,
 * u64: 0..18446744073709551615):
 *
 *   xid=U32 vers=U32 credit=U32 proc=U32 BODY
 *
 *   proc=0 (RDMA_MSG), proc=1 (RDMA_NOMSG):
 *       BODY = "reads=" READS " writes=" WRITES " reply=" REPLY
 *   proc=2 (RDMA_MSGP):
 *       BODY = "align=" U32 " thresh=" U32 " reads=" READS " writes=" WRITES
 *              " reply=" REPLY
 *   proc=3 (RDMA_DONE):   no BODY (the line ends after proc=3)
 *   proc=4 (RDMA_ERROR):  BODY = "err=1 low=" U32 " high=" U32   (ERR_VERS)
 *                              | "err=2"                         (ERR_CHUNK)
 *                              | "err=" U32   (any other value: no arm)
 *   any other proc:       no BODY (encoding then fails in xdr_rdma_msg:
 *                         the union has no default arm)
 *
 *   READS  = "[" [ RCHUNK *( ";" RCHUNK ) ] "]"     the read list, in order
 *   RCHUNK = position "," handle "," length "," offset   (U32,U32,U32,U64)
 *   WRITES = "[" [ WCHUNK *( ";" WCHUNK ) ] "]"     the write list, in order
 *   WCHUNK = "[" [ SEG *( ";" SEG ) ] "]"           one write chunk's segments
 *   SEG    = handle "," length "," offset                (U32,U32,U64)
 *   REPLY  = "none" | WCHUNK
 *
 * An empty list "[]" is the XDR null pointer (one zero word on the wire).
 * "writes=[[]]" is one write chunk with zero segments; "reply=[]" is a reply
 * chunk that is present with zero segments, unlike "reply=none".
 *
 * Example (RDMA_MSG, no chunks):
 *   xid=16909060 vers=1 credit=32 proc=0 reads=[] writes=[] reply=none
 *   <-> 01020304000000010000002000000000000000000000000000000000
 *
 * The request loop runs on a thread with a 512 MiB stack because rpcgen's
 * xdr_pointer lists are walked recursively (a long read list is deep).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpcrdma_v1.h"

/* ------------------------------------------------------------------ */
/* Parsing canonical text                                              */
/* ------------------------------------------------------------------ */

static const char *perr;     /* reason of the last parse failure */
static const char *perr_pos; /* where it happened */
static int perr_lit;         /* perr is a literal that was expected */

static int lit(const char **p, const char *s)
{
	size_t n = strlen(s);
	if (strncmp(*p, s, n) != 0) {
		perr = s;
		perr_lit = 1;
		perr_pos = *p;
		return 0;
	}
	*p += n;
	return 1;
}

static int num(const char **p, unsigned long long max, unsigned long long *out)
{
	const char *s = *p;
	unsigned long long v = 0;
	perr_pos = s;
	perr_lit = 0;
	if (*s < '0' || *s > '9') {
		perr = "expected a decimal number";
		return 0;
	}
	if (*s == '0' && s[1] >= '0' && s[1] <= '9') {
		perr = "leading zero in a number";
		return 0;
	}
	while (*s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');
		if (v > (max - d) / 10) {
			perr = "number out of range";
			return 0;
		}
		v = v * 10 + d;
		s++;
	}
	*p = s;
	*out = v;
	return 1;
}

static int u32(const char **p, uint32 *out)
{
	unsigned long long v;
	if (!num(p, 0xffffffffULL, &v))
		return 0;
	*out = (uint32)v;
	return 1;
}

static int u64(const char **p, uint64 *out)
{
	unsigned long long v;
	if (!num(p, 0xffffffffffffffffULL, &v))
		return 0;
	*out = (uint64)v;
	return 1;
}

static int key_u32(const char **p, const char *key, uint32 *out)
{
	return lit(p, key) && u32(p, out);
}

static int seg(const char **p, xdr_rdma_segment *s)
{
	return u32(p, &s->handle) && lit(p, ",") && u32(p, &s->length) && lit(p, ",") &&
	       u64(p, &s->offset);
}

static int read_list(const char **p, xdr_read_list **head)
{
	xdr_read_list **tail = head;
	if (!lit(p, "["))
		return 0;
	if (**p == ']') {
		(*p)++;
		return 1;
	}
	for (;;) {
		xdr_read_list *e = calloc(1, sizeof(*e));
		if (e == NULL) {
			perr = "out of memory";
			perr_pos = *p;
			return 0;
		}
		*tail = e;
		tail = &e->next;
		if (!u32(p, &e->entry.position) || !lit(p, ",") || !seg(p, &e->entry.target))
			return 0;
		if (**p == ';') {
			(*p)++;
			continue;
		}
		return lit(p, "]");
	}
}

static int write_chunk(const char **p, xdr_write_chunk *wc)
{
	u_int cap = 0;
	if (!lit(p, "["))
		return 0;
	if (**p == ']') {
		(*p)++;
		return 1;
	}
	for (;;) {
		if (wc->target.target_len == cap) {
			u_int ncap = cap ? cap * 2 : 4;
			xdr_rdma_segment *n = realloc(wc->target.target_val, ncap * sizeof(*n));
			if (n == NULL) {
				perr = "out of memory";
				perr_pos = *p;
				return 0;
			}
			wc->target.target_val = n;
			cap = ncap;
		}
		if (!seg(p, &wc->target.target_val[wc->target.target_len]))
			return 0;
		wc->target.target_len++;
		if (**p == ';') {
			(*p)++;
			continue;
		}
		return lit(p, "]");
	}
}

static int write_list(const char **p, xdr_write_list **head)
{
	xdr_write_list **tail = head;
	if (!lit(p, "["))
		return 0;
	if (**p == ']') {
		(*p)++;
		return 1;
	}
	for (;;) {
		xdr_write_list *e = calloc(1, sizeof(*e));
		if (e == NULL) {
			perr = "out of memory";
			perr_pos = *p;
			return 0;
		}
		*tail = e;
		tail = &e->next;
		if (!write_chunk(p, &e->entry))
			return 0;
		if (**p == ';') {
			(*p)++;
			continue;
		}
		return lit(p, "]");
	}
}

static int reply_chunk(const char **p, xdr_write_chunk **r)
{
	if (strncmp(*p, "none", 4) == 0) {
		*p += 4;
		*r = NULL;
		return 1;
	}
	*r = calloc(1, sizeof(**r));
	if (*r == NULL) {
		perr = "out of memory";
		perr_pos = *p;
		return 0;
	}
	return write_chunk(p, *r);
}

/* The three chunk lists of MSG, NOMSG and MSGP have the same shape. */
static int chunks(const char **p, xdr_read_list **reads, xdr_write_list **writes,
		  xdr_write_chunk **reply)
{
	return lit(p, "reads=") && read_list(p, reads) && lit(p, " writes=") &&
	       write_list(p, writes) && lit(p, " reply=") && reply_chunk(p, reply);
}

/* Fills *m (zeroed by the caller); on failure *m may hold allocations that
 * xdr_free releases. */
static int parse_msg(const char *p, rdma_msg *m)
{
	uint32 proc;
	rdma_body *b = &m->rdma_body;
	if (!key_u32(&p, "xid=", &m->rdma_xid) || !key_u32(&p, " vers=", &m->rdma_vers) ||
	    !key_u32(&p, " credit=", &m->rdma_credit) || !key_u32(&p, " proc=", &proc))
		return 0;
	b->proc = (rdma_proc)proc;
	switch (proc) {
	case RDMA_MSG: {
		rpc_rdma_header *h = &b->rdma_body_u.rdma_msg;
		if (!lit(&p, " ") || !chunks(&p, &h->rdma_reads, &h->rdma_writes, &h->rdma_reply))
			return 0;
		break;
	}
	case RDMA_NOMSG: {
		rpc_rdma_header_nomsg *h = &b->rdma_body_u.rdma_nomsg;
		if (!lit(&p, " ") || !chunks(&p, &h->rdma_reads, &h->rdma_writes, &h->rdma_reply))
			return 0;
		break;
	}
	case RDMA_MSGP: {
		rpc_rdma_header_padded *h = &b->rdma_body_u.rdma_msgp;
		if (!key_u32(&p, " align=", &h->rdma_align) ||
		    !key_u32(&p, " thresh=", &h->rdma_thresh) || !lit(&p, " ") ||
		    !chunks(&p, &h->rdma_reads, &h->rdma_writes, &h->rdma_reply))
			return 0;
		break;
	}
	case RDMA_ERROR: {
		rpc_rdma_error *e = &b->rdma_body_u.rdma_error;
		uint32 err;
		if (!key_u32(&p, " err=", &err))
			return 0;
		e->err = (rpc_rdma_errcode)err;
		if (err == ERR_VERS &&
		    (!key_u32(&p, " low=", &e->rpc_rdma_error_u.range.rdma_vers_low) ||
		     !key_u32(&p, " high=", &e->rpc_rdma_error_u.range.rdma_vers_high)))
			return 0;
		break;
	}
	default: /* RDMA_DONE, and values with no arm: no body */
		break;
	}
	if (*p != '\0') {
		perr = "trailing text";
		perr_pos = p;
		return 0;
	}
	return 1;
}

/* ------------------------------------------------------------------ */
/* Printing canonical text                                             */
/* ------------------------------------------------------------------ */

static void print_seg(const xdr_rdma_segment *s)
{
	printf("%u,%u,%llu", s->handle, s->length, (unsigned long long)s->offset);
}

static void print_write_chunk(const xdr_write_chunk *wc)
{
	u_int i;
	putchar('[');
	for (i = 0; i < wc->target.target_len; i++) {
		if (i)
			putchar(';');
		print_seg(&wc->target.target_val[i]);
	}
	putchar(']');
}

static void print_chunks(const xdr_read_list *r, const xdr_write_list *w, const xdr_write_chunk *rc)
{
	fputs("reads=[", stdout);
	for (; r != NULL; r = r->next) {
		printf("%u,", r->entry.position);
		print_seg(&r->entry.target);
		if (r->next)
			putchar(';');
	}
	fputs("] writes=[", stdout);
	for (; w != NULL; w = w->next) {
		print_write_chunk(&w->entry);
		if (w->next)
			putchar(';');
	}
	fputs("] reply=", stdout);
	if (rc == NULL)
		fputs("none", stdout);
	else
		print_write_chunk(rc);
}

static void print_msg(const rdma_msg *m)
{
	const rdma_body *b = &m->rdma_body;
	printf("xid=%u vers=%u credit=%u proc=%u", m->rdma_xid, m->rdma_vers, m->rdma_credit,
	       (unsigned)b->proc);
	switch (b->proc) {
	case RDMA_MSG: {
		const rpc_rdma_header *h = &b->rdma_body_u.rdma_msg;
		putchar(' ');
		print_chunks(h->rdma_reads, h->rdma_writes, h->rdma_reply);
		break;
	}
	case RDMA_NOMSG: {
		const rpc_rdma_header_nomsg *h = &b->rdma_body_u.rdma_nomsg;
		putchar(' ');
		print_chunks(h->rdma_reads, h->rdma_writes, h->rdma_reply);
		break;
	}
	case RDMA_MSGP: {
		const rpc_rdma_header_padded *h = &b->rdma_body_u.rdma_msgp;
		printf(" align=%u thresh=%u ", h->rdma_align, h->rdma_thresh);
		print_chunks(h->rdma_reads, h->rdma_writes, h->rdma_reply);
		break;
	}
	case RDMA_ERROR: {
		const rpc_rdma_error *e = &b->rdma_body_u.rdma_error;
		printf(" err=%u", (unsigned)e->err);
		if (e->err == ERR_VERS)
			printf(" low=%u high=%u", e->rpc_rdma_error_u.range.rdma_vers_low,
			       e->rpc_rdma_error_u.range.rdma_vers_high);
		break;
	}
	default:
		break;
	}
}

/* ------------------------------------------------------------------ */
/* Requests                                                            */
/* ------------------------------------------------------------------ */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static void do_encode(const char *text)
{
	rdma_msg m;
	memset(&m, 0, sizeof(m));
	perr = "syntax error";
	perr_lit = 0;
	perr_pos = text;
	if (!parse_msg(text, &m)) {
		printf("ERR parse: %s%s%s at offset %ld\n", perr_lit ? "expected '" : "", perr,
		       perr_lit ? "'" : "", (long)(perr_pos - text));
		xdr_free((xdrproc_t)xdr_rdma_msg, (char *)&m);
		return;
	}
	u_long size = xdr_sizeof((xdrproc_t)xdr_rdma_msg, &m);
	char *buf = size ? malloc(size) : NULL;
	XDR x;
	if (buf == NULL) {
		printf("ERR xdr_rdma_msg encode failed (xdr_sizeof)\n");
		xdr_free((xdrproc_t)xdr_rdma_msg, (char *)&m);
		return;
	}
	xdrmem_create(&x, buf, (u_int)size, XDR_ENCODE);
	if (!xdr_rdma_msg(&x, &m)) {
		printf("ERR xdr_rdma_msg encode failed\n");
	} else {
		u_int n = xdr_getpos(&x), i;
		fputs("OK ", stdout);
		for (i = 0; i < n; i++)
			printf("%02x", (unsigned char)buf[i]);
		putchar('\n');
	}
	xdr_destroy(&x);
	free(buf);
	xdr_free((xdrproc_t)xdr_rdma_msg, (char *)&m);
}

static void do_decode(const char *hex, int with_len)
{
	size_t hl = strlen(hex), n = hl / 2, i;
	unsigned char *buf;
	rdma_msg m;
	XDR x;
	if (hl % 2 != 0) {
		printf("ERR bad hex: odd length\n");
		return;
	}
	buf = malloc(n ? n : 1);
	if (buf == NULL) {
		printf("ERR out of memory\n");
		return;
	}
	for (i = 0; i < n; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			printf("ERR bad hex: not a hex digit\n");
			free(buf);
			return;
		}
		buf[i] = (unsigned char)(hi << 4 | lo);
	}
	memset(&m, 0, sizeof(m));
	xdrmem_create(&x, (char *)buf, (u_int)n, XDR_DECODE);
	if (!xdr_rdma_msg(&x, &m)) {
		printf("ERR xdr_rdma_msg decode failed\n");
	} else {
		fputs("OK ", stdout);
		if (with_len)
			printf("%u ", xdr_getpos(&x));
		print_msg(&m);
		putchar('\n');
	}
	xdr_destroy(&x);
	xdr_free((xdrproc_t)xdr_rdma_msg, (char *)&m);
	free(buf);
}

/* ------------------------------------------------------------------ */
/* Benchmark mode                                                      */
/* ------------------------------------------------------------------ */

/*
 * What a user of rpcgen + libtirpc does per header, timed in a loop
 * (interop-tests/benches/codec_vs_rpcgen.rs drives it; the loop runs in this
 * process, only the total comes back over the pipe):
 *
 *   encode: xdrmem_create over a 512-byte buffer reused across iterations
 *           (XDR_ENCODE), xdr_rdma_msg on the message parsed at set-up,
 *           xdr_getpos for the length, xdr_destroy.
 *   decode: xdrmem_create over the slot's bytes (XDR_DECODE), xdr_rdma_msg
 *           into one rdma_msg preallocated and zeroed before the loop,
 *           xdr_destroy, then xdr_free: libtirpc allocates every list entry
 *           (xdr_pointer) and every segment array (xdr_array) it decodes, and
 *           a real user must free them.  xdr_free also sets each freed
 *           pointer back to NULL, so the struct is ready for the next decode
 *           (checked after the loop).
 *
 * Every iteration checks xdr_rdma_msg's result and adds the length or the
 * xid to a volatile sink.  After the loop the last encoding is compared
 * with the slot's bytes.
 */
#define BENCH_SLOTS 4
static struct bench_slot {
	int loaded;
	rdma_msg msg;  /* parsed from canonical text: what "T E" encodes */
	char wire[512]; /* its encoding: what "T D" decodes */
	u_int wire_len;
} slots[BENCH_SLOTS];
static volatile unsigned long long bench_sink;

/* Parses "<slot> " from the start of *p. */
static struct bench_slot *bench_slot(const char **p)
{
	int i = **p - '0';
	if (i < 0 || i >= BENCH_SLOTS || (*p)[1] != ' ')
		return NULL;
	*p += 2;
	return &slots[i];
}

static void do_bench_load(const char *arg)
{
	struct bench_slot *s = bench_slot(&arg);
	XDR x;
	u_int i;
	if (s == NULL) {
		printf("ERR B wants a slot 0..%d and a message\n", BENCH_SLOTS - 1);
		return;
	}
	if (s->loaded)
		xdr_free((xdrproc_t)xdr_rdma_msg, (char *)&s->msg);
	memset(s, 0, sizeof(*s));
	perr = "syntax error";
	perr_lit = 0;
	perr_pos = arg;
	if (!parse_msg(arg, &s->msg)) {
		printf("ERR parse: %s%s%s at offset %ld\n", perr_lit ? "expected '" : "", perr,
		       perr_lit ? "'" : "", (long)(perr_pos - arg));
		xdr_free((xdrproc_t)xdr_rdma_msg, (char *)&s->msg);
		return;
	}
	s->loaded = 1;
	xdrmem_create(&x, s->wire, sizeof(s->wire), XDR_ENCODE);
	if (!xdr_rdma_msg(&x, &s->msg)) {
		printf("ERR xdr_rdma_msg encode failed (or longer than %zu bytes)\n", sizeof(s->wire));
		xdr_destroy(&x);
		return;
	}
	s->wire_len = xdr_getpos(&x);
	xdr_destroy(&x);
	fputs("OK ", stdout);
	for (i = 0; i < s->wire_len; i++)
		printf("%02x", (unsigned char)s->wire[i]);
	putchar('\n');
}

static int bench_encode(struct bench_slot *s, unsigned long long iters)
{
	static char out[512];
	unsigned long long i;
	u_int n = 0;
	for (i = 0; i < iters; i++) {
		XDR x;
		xdrmem_create(&x, out, sizeof(out), XDR_ENCODE);
		if (!xdr_rdma_msg(&x, &s->msg))
			return 0;
		n = xdr_getpos(&x);
		bench_sink += n;
		xdr_destroy(&x);
	}
	return iters == 0 || (n == s->wire_len && memcmp(out, s->wire, n) == 0);
}

static int bench_decode(struct bench_slot *s, unsigned long long iters)
{
	static rdma_msg m;
	unsigned long long i;
	memset(&m, 0, sizeof(m));
	for (i = 0; i < iters; i++) {
		XDR x;
		xdrmem_create(&x, s->wire, s->wire_len, XDR_DECODE);
		if (!xdr_rdma_msg(&x, &m)) {
			xdr_free((xdrproc_t)xdr_rdma_msg, (char *)&m);
			return 0;
		}
		bench_sink += m.rdma_xid;
		xdr_destroy(&x);
		xdr_free((xdrproc_t)xdr_rdma_msg, (char *)&m);
	}
	if (m.rdma_body.proc == RDMA_MSG) {
		const rpc_rdma_header *h = &m.rdma_body.rdma_body_u.rdma_msg;
		return h->rdma_reads == NULL && h->rdma_writes == NULL && h->rdma_reply == NULL;
	}
	return 1;
}

static void do_bench_time(const char *arg)
{
	struct bench_slot *s = bench_slot(&arg);
	struct timespec t0, t1;
	unsigned long long iters, ns;
	char op = arg[0];
	int ok;
	if (s == NULL || !s->loaded || (op != 'E' && op != 'D') || arg[1] != ' ') {
		printf("ERR T wants a loaded slot, E or D, and a count\n");
		return;
	}
	arg += 2;
	if (!num(&arg, ~0ULL, &iters) || *arg != '\0') {
		printf("ERR T: bad iteration count\n");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok = op == 'E' ? bench_encode(s, iters) : bench_decode(s, iters);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (!ok) {
		printf("ERR xdr_rdma_msg %s failed in the timed loop\n", op == 'E' ? "encode" : "decode");
		return;
	}
	ns = (unsigned long long)(t1.tv_sec - t0.tv_sec) * 1000000000ULL + (unsigned long long)t1.tv_nsec -
	     (unsigned long long)t0.tv_nsec;
	printf("OK %llu %.2f\n", ns, iters ? (double)ns / (double)iters : 0.0);
}

static void *serve(void *arg)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	(void)arg;
	while ((len = getline(&line, &cap, stdin)) >= 0) {
		while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len >= 2 && line[0] == 'E' && line[1] == ' ')
			do_encode(line + 2);
		else if (len >= 1 && line[0] == 'D' && (line[1] == ' ' || line[1] == '\0'))
			do_decode(line[1] ? line + 2 : line + 1, 0);
		else if (len >= 1 && line[0] == 'P' && (line[1] == ' ' || line[1] == '\0'))
			do_decode(line[1] ? line + 2 : line + 1, 1);
		else if (len >= 2 && line[0] == 'B' && line[1] == ' ')
			do_bench_load(line + 2);
		else if (len >= 2 && line[0] == 'T' && line[1] == ' ')
			do_bench_time(line + 2);
		else
			printf("ERR unknown request (want E, D, P, B or T)\n");
		fflush(stdout);
	}
	free(line);
	return NULL;
}

int main(void)
{
	pthread_t t;
	pthread_attr_t a;
	int rc;
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, (size_t)512 << 20);
	rc = pthread_create(&t, &a, serve, NULL);
	if (rc != 0) {
		fprintf(stderr, "harness: pthread_create: %s\n", strerror(rc));
		return 1;
	}
	pthread_join(t, NULL);
	return 0;
}
