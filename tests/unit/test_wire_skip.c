/*
 * test_wire_skip.c - the two forms of HELLO and DUMP_REQ (src/model/wire.c):
 * the bytes an agent and a daemon of the first form send still decode to
 * what they meant, the feature bits and the skip set make the round trip,
 * an encoder without them writes the first form's bytes exactly, and
 * every hostile skip set (out of order, repeated, zero or negative tids,
 * a count over the cap, 0, or past the bytes, truncated, trailing bytes)
 * is refused with SW_EFORMAT and leaves nothing allocated.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/wire.h"
#include "tap.h"

/* DUMP_REQ of the first form: timeout_ms 1000, window 64. */
static const uint8_t req_v1[] = { 0xe8, 0x03, 0, 0, 0x40, 0, 0, 0 };

/* HELLO of the first form: pid 42, signal 38, "seed", "seed --flag". */
static const uint8_t hello_v1[] = { 42,	 0,   0,   0,	38,  0,	  0,   0,
				    4,	 0,   0,   0,	's', 'e', 'e', 'd',
				    11,	 0,   0,   0,	's', 'e', 'e', 'd',
				    ' ', '-', '-', 'f', 'l', 'a', 'g' };

/* A payload of the first form plus count and tids (u32 each). */
static size_t req_with(uint8_t *buf, uint32_t count, const uint32_t *tids,
		       size_t n)
{
	size_t len = sizeof(req_v1);

	memcpy(buf, req_v1, len);
	for (int i = 0; i < 4; i++)
		buf[len++] = (uint8_t)(count >> (8 * i));
	for (size_t k = 0; k < n; k++)
		for (int i = 0; i < 4; i++)
			buf[len++] = (uint8_t)(tids[k] >> (8 * i));
	return len;
}

/* Decodes a hostile DUMP_REQ: SW_EFORMAT, and nothing left behind. */
static void hostile(const uint8_t *p, size_t len, const char *what)
{
	struct wire_dump_req r;
	int rc;

	memset(&r, 0x55, sizeof(r));
	rc = wire_decode_dump_req(p, len, &r);
	TAP_OK(rc == SW_EFORMAT && r.skip == NULL && r.nskip == 0,
	       "a skip set %s is refused (rc %d)", what, rc);
	if (rc == 0)
		wire_dump_req_release(&r);
}

static void test_req_v1(void)
{
	struct wire_dump_req r;
	struct wire_out o;
	int rc;

	memset(&r, 0x55, sizeof(r));
	rc = wire_decode_dump_req(req_v1, sizeof(req_v1), &r);
	TAP_OK(rc == 0 && r.timeout_ms == 1000 && r.window == 64 &&
		       r.nskip == 0 && r.skip == NULL,
	       "the first form's DUMP_REQ decodes, without a skip set");
	wire_out_init(&o);
	r.skip = NULL;
	r.nskip = 0;
	rc = wire_encode_dump_req(&o, 7, &r);
	TAP_OK(rc == 0 && o.len == WIRE_HDR_SIZE + sizeof(req_v1) &&
		       memcmp(o.data + WIRE_HDR_SIZE, req_v1, sizeof(req_v1)) ==
			       0,
	       "a request without a skip set has the first form's bytes");
	wire_out_release(&o);
}

static void test_req_skip(void)
{
	pid_t skip[] = { 1, 5, 70000, 0x7fffffff };
	struct wire_dump_req r = {
		.timeout_ms = 250, .window = 3, .nskip = 4, .skip = skip
	};
	struct wire_dump_req back;
	struct wire_hdr h;
	struct wire_out o;
	int rc;

	wire_out_init(&o);
	rc = wire_encode_dump_req(&o, 9, &r);
	TAP_OK(rc == 0 && wire_parse_hdr(o.data, &h) == 0 &&
		       h.length == 8 + 4 + 4 * 4 && h.seq == 9,
	       "a request with a skip set: count and tids after the window");
	rc = wire_decode_dump_req(o.data + WIRE_HDR_SIZE, h.length, &back);
	TAP_OK(rc == 0 && back.timeout_ms == 250 && back.window == 3 &&
		       back.nskip == 4 && back.skip &&
		       memcmp(back.skip, skip, sizeof(skip)) == 0,
	       "it decodes to the same set");
	wire_dump_req_release(&back);
	TAP_OK(back.skip == NULL && back.nskip == 0,
	       "wire_dump_req_release() empties it");
	wire_dump_req_release(NULL);

	/* The encoder refuses what the decoder would. */
	skip[1] = 0;
	wire_out_release(&o);
	TAP_OK(wire_encode_dump_req(&o, 1, &r) == -EINVAL,
	       "the encoder refuses a tid 0");
	skip[1] = 70000;
	TAP_OK(wire_encode_dump_req(&o, 1, &r) == -EINVAL,
	       "the encoder refuses a set out of order or repeated");
	wire_out_release(&o);
}

static void test_req_full(void)
{
	struct wire_dump_req r = { .timeout_ms = 1, .window = 1 };
	struct wire_dump_req back;
	struct wire_hdr h;
	struct wire_out o;
	int rc;

	r.nskip = SW_MAX_THREADS;
	r.skip = malloc(SW_MAX_THREADS * sizeof(*r.skip));
	if (!r.skip) {
		TAP_OK(0, "memory for a full skip set");
		return;
	}
	for (uint32_t i = 0; i < r.nskip; i++)
		r.skip[i] = (pid_t)(2 * i + 1);
	wire_out_init(&o);
	rc = wire_encode_dump_req(&o, 1, &r);
	TAP_OK(rc == 0 && wire_parse_hdr(o.data, &h) == 0 &&
		       h.length == WIRE_DUMP_REQ_MAX &&
		       wire_decode_dump_req(o.data + WIRE_HDR_SIZE, h.length,
					    &back) == 0 &&
		       back.nskip == SW_MAX_THREADS &&
		       back.skip[SW_MAX_THREADS - 1] == 2 * SW_MAX_THREADS - 1,
	       "a set of SW_MAX_THREADS tids (%u bytes, the largest "
	       "request) makes the round trip",
	       (unsigned)WIRE_DUMP_REQ_MAX);
	if (rc == 0)
		wire_dump_req_release(&back);
	r.nskip++;
	TAP_OK(wire_encode_dump_req(&o, 1, &r) == -EINVAL,
	       "the encoder refuses one tid more");
	wire_out_release(&o);
	free(r.skip);
}

static void test_req_hostile(void)
{
	static const uint32_t ok3[] = { 3, 4, 9 };
	static const uint32_t unsorted[] = { 9, 4 };
	static const uint32_t repeated[] = { 4, 4 };
	static const uint32_t zero[] = { 0, 4 };
	static const uint32_t negative[] = { 0xfffffffdu };
	static const uint32_t int_min[] = { 0x80000000u };
	uint8_t *big;
	uint8_t buf[64];
	size_t len;

	len = req_with(buf, 2, unsorted, 2);
	hostile(buf, len, "out of order");
	len = req_with(buf, 2, repeated, 2);
	hostile(buf, len, "with a tid twice");
	len = req_with(buf, 2, zero, 2);
	hostile(buf, len, "with a tid 0");
	len = req_with(buf, 1, negative, 1);
	hostile(buf, len, "with a negative tid");
	len = req_with(buf, 1, int_min, 1);
	hostile(buf, len, "with tid INT32_MIN");
	len = req_with(buf, 0, NULL, 0);
	hostile(buf, len, "of count 0");
	len = req_with(buf, 4, ok3, 3);
	hostile(buf, len, "counting more tids than it has");
	len = req_with(buf, 0xffffffffu, ok3, 3);
	hostile(buf, len, "counting 2^32-1 tids");
	len = req_with(buf, 3, ok3, 3);
	hostile(buf, len - 2, "cut in its last tid");
	hostile(buf, sizeof(req_v1) + 2, "cut in its count");
	buf[len] = 0;
	hostile(buf, len + 1, "followed by a stray byte");
	buf[3] = 0x10; /* timeout_ms far past 600000 */
	hostile(buf, len, "in a request whose timeout is out of range");

	/* A count over the cap, with the bytes there: the cap decides. */
	big = calloc(1, WIRE_DUMP_REQ_MAX + 4);
	if (!big) {
		TAP_OK(0, "memory for a request over the cap");
		return;
	}
	memcpy(big, req_v1, sizeof(req_v1));
	big[8] = (uint8_t)((SW_MAX_THREADS + 1) & 0xff);
	big[9] = (uint8_t)(((SW_MAX_THREADS + 1) >> 8) & 0xff);
	big[10] = (uint8_t)(((SW_MAX_THREADS + 1) >> 16) & 0xff);
	for (uint32_t i = 0; i <= SW_MAX_THREADS; i++) {
		uint32_t tid = i + 1;

		for (int b = 0; b < 4; b++)
			big[12 + 4 * i + (uint32_t)b] =
				(uint8_t)(tid >> (8 * b));
	}
	hostile(big, WIRE_DUMP_REQ_MAX + 4, "of SW_MAX_THREADS + 1 tids");
	free(big);
}

static void test_hello(void)
{
	struct wire_hello h, back;
	uint8_t buf[sizeof(hello_v1) + 8];
	struct wire_out o;
	int rc;

	memset(&h, 0x55, sizeof(h));
	rc = wire_decode_hello(hello_v1, sizeof(hello_v1), &h);
	TAP_OK(rc == 0 && h.pid == 42 && h.signo == 38 &&
		       strcmp(h.comm, "seed") == 0 &&
		       strcmp(h.cmdline, "seed --flag") == 0 && h.features == 0,
	       "the first form's HELLO decodes, without features");

	wire_out_init(&o);
	rc = wire_encode_hello(&o, 0, &h);
	TAP_OK(rc == 0 && o.len == WIRE_HDR_SIZE + sizeof(hello_v1) &&
		       memcmp(o.data + WIRE_HDR_SIZE, hello_v1,
			      sizeof(hello_v1)) == 0,
	       "a HELLO without features has the first form's bytes");

	h.features = WIRE_FEAT_SKIP | 0x80000000u;
	rc = wire_encode_hello(&o, 0, &h);
	memset(&back, 0, sizeof(back));
	TAP_OK(rc == 0 && o.len == WIRE_HDR_SIZE + sizeof(hello_v1) + 4 &&
		       wire_decode_hello(o.data + WIRE_HDR_SIZE,
					 o.len - WIRE_HDR_SIZE, &back) == 0 &&
		       back.features == (WIRE_FEAT_SKIP | 0x80000000u) &&
		       strcmp(back.cmdline, "seed --flag") == 0,
	       "features make the round trip, bits unknown to us too");

	memcpy(buf, hello_v1, sizeof(hello_v1));
	memset(buf + sizeof(hello_v1), 1, 8);
	TAP_OK(wire_decode_hello(buf, sizeof(hello_v1) + 2, &back) ==
		       SW_EFORMAT,
	       "a HELLO with 2 bytes of features is refused");
	TAP_OK(wire_decode_hello(buf, sizeof(hello_v1) + 8, &back) ==
		       SW_EFORMAT,
	       "a HELLO with bytes after its features is refused");

	/* The largest HELLO fits the bound the daemon reads it into. */
	memset(h.comm, 'c', SW_COMM_MAX - 1);
	h.comm[SW_COMM_MAX - 1] = '\0';
	memset(h.cmdline, 'a', WIRE_MAX_STRING);
	h.cmdline[WIRE_MAX_STRING] = '\0';
	rc = wire_encode_hello(&o, 0, &h);
	TAP_OK(rc == 0 && o.len - WIRE_HDR_SIZE == WIRE_HELLO_MAX,
	       "the largest HELLO is WIRE_HELLO_MAX bytes (%zu, max %zu)",
	       o.len - WIRE_HDR_SIZE, (size_t)WIRE_HELLO_MAX);
	wire_out_release(&o);
}

int main(void)
{
	test_req_v1();
	test_req_skip();
	test_req_full();
	test_req_hostile();
	test_hello();
	return tap_done();
}
