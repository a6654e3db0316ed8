/*
 * wire.h - the protocol between the agent (in the target process) and the
 * daemon, over a unix stream socket. docs/wire-protocol.md describes it for
 * people; this header is its definition.
 *
 * Every message is a 16-byte header followed by a payload:
 *
 *	u32 magic	"SWAT" (0x54415753 little-endian)
 *	u16 version	WIRE_VERSION
 *	u16 type	enum wire_type
 *	u32 length	payload bytes, at most WIRE_MAX_PAYLOAD
 *	u32 seq		request number, echoed by the answer
 *
 * Integers are little-endian; strings are a u32 length then bytes (no NUL),
 * each capped. The daemon decodes everything defensively: a message that
 * breaks any cap or runs past its payload is rejected whole, and the peer
 * is disconnected. A hostile agent can spoil only its own dump.
 */
#ifndef SW_WIRE_H
#define SW_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dump.h"

#define WIRE_MAGIC 0x54415753u
#define WIRE_VERSION 1
#define WIRE_HDR_SIZE 16
#define WIRE_MAX_PAYLOAD (64u << 20) /* 64 MiB */
#define WIRE_MAX_STRING 4096	     /* paths, command lines */
#define WIRE_MAX_ERROR 256	     /* a thread's error text */

enum wire_type {
	WIRE_HELLO = 1,	    /* agent -> daemon, once after connecting */
	WIRE_DUMP_REQ = 2,  /* daemon -> agent */
	WIRE_DUMP_RESP = 3, /* agent -> daemon, same seq as the request */
	WIRE_SIGNAL = 4,    /* agent -> daemon: its signal changed */
};

struct wire_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint32_t length;
	uint32_t seq;
};

/*
 * What an agent understands beyond the first form of the protocol, said
 * in the feature bits that may end its HELLO. A daemon sends a form of a
 * message only to an agent that said it understands it: an agent without
 * the bit drops a connection that sends it anything else.
 */
#define WIRE_FEAT_SKIP 0x1u /* DUMP_REQ may carry threads to leave out */

/* HELLO: what the agent says of itself (the daemon trusts only
 * SO_PEERCRED for pid and uid; these are for display and checks). */
struct wire_hello {
	int32_t pid;
	int32_t signo;
	char comm[SW_COMM_MAX];
	char cmdline[WIRE_MAX_STRING + 1];
	/*
	 * WIRE_FEAT_* bits; bits unknown to the reader mean nothing to it.
	 * Sent only when not 0, so a HELLO without features has the first
	 * form's bytes, and either form decodes (absent: 0).
	 */
	uint32_t features;
};

/* The largest HELLO payload: pid, signal, comm, cmdline, features. */
#define WIRE_HELLO_MAX (2 * 4 + 4 + (SW_COMM_MAX - 1) + 4 + WIRE_MAX_STRING + 4)

/* DUMP_REQ. */
struct wire_dump_req {
	uint32_t timeout_ms; /* 1..600000 */
	uint32_t window;     /* 1..64 */
	/*
	 * Threads the agent must neither signal nor read nor report (the
	 * daemon has them already): tids as the agent sees them, ascending,
	 * unique, each > 0, at most SW_MAX_THREADS. Only for an agent that
	 * said WIRE_FEAT_SKIP; nskip 0 (skip NULL) is the first form, which
	 * every agent takes. A decoded skip is malloc'd: free it with
	 * wire_dump_req_release().
	 */
	uint32_t nskip;
	pid_t *skip;
};

/* The largest DUMP_REQ payload: the first form plus a full skip set. */
#define WIRE_DUMP_REQ_MAX (3 * 4 + 4 * (size_t)SW_MAX_THREADS)

/* A write cursor over a growable buffer. */
struct wire_out {
	uint8_t *data;
	size_t len;
	size_t cap;
	int err; /* first error, sticky */
};

/* A read cursor over a received payload. */
struct wire_in {
	const uint8_t *p;
	size_t left;
	int err; /* SW_EFORMAT once anything ran out or broke a cap */
};

void wire_out_init(struct wire_out *o);
void wire_out_release(struct wire_out *o);

/*
 * Starts a message (reserves the header); wire_finish fills in the length.
 * Returns 0 or the cursor's error.
 */
void wire_begin(struct wire_out *o, enum wire_type type, uint32_t seq);
int wire_finish(struct wire_out *o);

void wire_put_u32(struct wire_out *o, uint32_t v);
void wire_put_u64(struct wire_out *o, uint64_t v);
void wire_put_bytes(struct wire_out *o, const void *p, size_t n);
void wire_put_str(struct wire_out *o, const char *s, size_t max);

/* Parses a header. 0, or SW_EFORMAT for a bad magic, version or length. */
int wire_parse_hdr(const uint8_t buf[WIRE_HDR_SIZE], struct wire_hdr *h);

void wire_in_init(struct wire_in *in, const void *p, size_t len);
uint32_t wire_get_u32(struct wire_in *in);
uint64_t wire_get_u64(struct wire_in *in);
/* Copies a string of at most max bytes into dst (max + 1 bytes). */
void wire_get_str(struct wire_in *in, char *dst, size_t max);
/* A malloc'd copy of a string of at most max bytes; NULL on error. */
char *wire_get_strdup(struct wire_in *in, size_t max);
/* The next n bytes in place, or NULL (then in->err is set). */
const void *wire_get_bytes(struct wire_in *in, size_t n);

/* Message bodies. Encoders append to o; decoders return 0 or SW_EFORMAT
 * (-ENOMEM on allocation failure) and leave nothing allocated on error. */
int wire_encode_hello(struct wire_out *o, uint32_t seq,
		      const struct wire_hello *h);
int wire_decode_hello(const void *p, size_t len, struct wire_hello *h);
/*
 * DUMP_REQ: u32 timeout_ms, u32 window, then, only when there is a skip
 * set, u32 nskip (1..SW_MAX_THREADS) and nskip u32 tids. The encoder
 * returns -EINVAL for a skip set that is not strictly ascending tids > 0
 * or is too large; the decoder SW_EFORMAT (nothing is sorted for the
 * sender: a set out of order is refused).
 */
int wire_encode_dump_req(struct wire_out *o, uint32_t seq,
			 const struct wire_dump_req *r);
int wire_decode_dump_req(const void *p, size_t len, struct wire_dump_req *r);
/* Frees a decoded request's skip set; r may be NULL. */
void wire_dump_req_release(struct wire_dump_req *r);

/*
 * DUMP_RESP: a status (0, or a negative error code from the collector,
 * when there is no dump) then the raw dump: process fields, threads (tid,
 * name, state, status, error, flags, CPU times, capture time, ips) and
 * modules (path, bias, range, build-id). No symbols.
 */
/*
 * SIGNAL: u32 signal, the agent's signal from now on (1..64, or 0 when it
 * has none left). Sent before the answer to a request, with its seq.
 */
int wire_encode_signal(struct wire_out *o, uint32_t seq, int signo);
int wire_decode_signal(const void *p, size_t len, int *signo);

int wire_encode_dump_resp(struct wire_out *o, uint32_t seq, int status,
			  const struct sw_dump *d);
/*
 * Decodes a DUMP_RESP. On success *status is the agent's status and, when
 * it is 0, *out a raw dump the caller frees with sw_dump_free().
 */
int wire_decode_dump_resp(const void *p, size_t len, int *status,
			  struct sw_dump **out);

#endif /* SW_WIRE_H */
