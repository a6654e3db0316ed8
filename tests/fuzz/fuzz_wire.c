/*
 * fuzz_wire.c - libFuzzer target for the agent protocol decoders: every
 * input is a header plus payload as the daemon would read it from a
 * hostile agent. A decoder must reject or accept, never crash or leak.
 */
#include <stddef.h>
#include <stdint.h>

#include "model/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_hdr h;
	struct wire_hello hello;
	struct wire_dump_req req;
	struct sw_dump *d = NULL;
	int status;

	if (size < WIRE_HDR_SIZE || wire_parse_hdr(data, &h) < 0)
		return 0;
	data += WIRE_HDR_SIZE;
	size -= WIRE_HDR_SIZE;
	switch (h.type) {
	case WIRE_HELLO:
		wire_decode_hello(data, size, &hello);
		break;
	case WIRE_DUMP_REQ:
		if (wire_decode_dump_req(data, size, &req) == 0)
			wire_dump_req_release(&req);
		break;
	default:
		if (wire_decode_dump_resp(data, size, &status, &d) == 0)
			sw_dump_free(d);
		break;
	}
	return 0;
}
