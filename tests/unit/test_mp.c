/* test_mp.c - kvd's msgpack codec (common/kv_mp.c) against msgpack-c.
 *
 * msgpack-c is the reference implementation.  This test checks that:
 *  - every value our encoder writes, msgpack-c reads back identically, and
 *    the bytes are the ones msgpack-c's own packer writes;
 *  - on valid input, our decoder sees the same objects msgpack-c does;
 *  - on random and mutated input (truncations, flipped bytes, huge declared
 *    lengths, deep nesting), both accept exactly the same inputs, and agree
 *    on where an accepted object ends.
 * Exit 0 on success, 1 on the first disagreement (printed with its bytes).
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_buf.h"
#include "kv_mp.h"
#include "mp_same.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned failures;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void dump(const char *what, const uint8_t *p, size_t n)
{
	fprintf(stderr, "FAIL: %s (%zu bytes):", what, n);
	for (size_t i = 0; i < n && i < 64; i++)
		fprintf(stderr, " %02x", p[i]);
	fprintf(stderr, "%s\n", n > 64 ? " ..." : "");
	failures++;
}

/* ===================== Same objects ===================== */

/* ===================== Encoder ===================== */

static int sbuf_matches(const struct kv_buf *ours, const msgpack_sbuffer *ref)
{
	return ours->len == ref->size &&
	       !memcmp(ours->data, ref->data, ref->size);
}

static void check_encoded(const char *what, struct kv_buf *b,
			  msgpack_sbuffer *ref)
{
	msgpack_unpacked u;
	size_t off = 0;
	const uint8_t *p = b->data;

	if (!sbuf_matches(b, ref)) {
		dump(what, b->data, b->len);
		dump("  msgpack-c packs", (const uint8_t *)ref->data,
		     ref->size);
	}
	msgpack_unpacked_init(&u);
	if (msgpack_unpack_next(&u, (const char *)b->data, b->len, &off) !=
		MSGPACK_UNPACK_SUCCESS ||
	    off != b->len || !same(&p, b->data + b->len, &u.data) ||
	    p != b->data + b->len)
		dump(what, b->data, b->len);
	msgpack_unpacked_destroy(&u);
}

static void test_integers(void)
{
	static const int64_t ints[] = {
	    0,	       1,    31,     32,     127,	    128,
	    255,       256,  65535,  65536,  4294967295LL,  4294967296LL,
	    INT64_MAX, -1,   -31,    -32,    -33,	    -127,
	    -128,      -129, -32768, -32769, -2147483648LL, -2147483649LL,
	    INT64_MIN};

	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		struct kv_buf b = {0};
		msgpack_sbuffer sb;
		msgpack_packer pk;

		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_int64(&pk, ints[i]);
		kv_mp_int(&b, ints[i]);
		check_encoded("int", &b, &sb);
		msgpack_sbuffer_destroy(&sb);
		kv_buf_free(&b);
	}
	{
		struct kv_buf b = {0};
		msgpack_sbuffer sb;
		msgpack_packer pk;

		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		msgpack_pack_uint64(&pk, UINT64_MAX);
		kv_mp_uint(&b, UINT64_MAX);
		check_encoded("uint64 max", &b, &sb);
		msgpack_sbuffer_destroy(&sb);
		kv_buf_free(&b);
	}
}

static void test_lengths(void)
{
	static const uint32_t lens[] = {0,   1,	  15,	 16,	31,    32,
					255, 256, 65535, 65536, 100000};
	static uint8_t payload[100000];

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		for (int kind = 0; kind < 4; kind++) {
			struct kv_buf b = {0};
			msgpack_sbuffer sb;
			msgpack_packer pk;
			uint32_t n = lens[i];

			msgpack_sbuffer_init(&sb);
			msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
			if (kind == 0) {
				msgpack_pack_bin_with_body(&pk, payload, n);
				kv_mp_bin(&b, payload, n);
			} else if (kind == 1) {
				msgpack_pack_str_with_body(&pk, payload, n);
				kv_mp_str(&b, payload, n);
			} else if (kind == 2) {
				msgpack_pack_array(&pk, n);
				kv_mp_array(&b, n);
				for (uint32_t j = 0; j < n; j++) {
					msgpack_pack_nil(&pk);
					kv_mp_nil(&b);
				}
			} else {
				msgpack_pack_map(&pk, n);
				kv_mp_map(&b, n);
				for (uint32_t j = 0; j < 2 * n; j++) {
					msgpack_pack_true(&pk);
					kv_mp_bool(&b, 1);
				}
			}
			check_encoded(kind == 0	  ? "bin"
				      : kind == 1 ? "str"
				      : kind == 2 ? "array"
						  : "map",
				      &b, &sb);
			msgpack_sbuffer_destroy(&sb);
			kv_buf_free(&b);
		}
	}
}

static void test_double(void)
{
	struct kv_buf b = {0};
	msgpack_sbuffer sb;
	msgpack_packer pk;

	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_double(&pk, 3.25);
	kv_mp_double(&b, 3.25);
	check_encoded("double", &b, &sb);
	msgpack_sbuffer_destroy(&sb);
	kv_buf_free(&b);
}

/* ===================== Decoder agreement ===================== */

/* A random object of at most depth levels, packed by msgpack-c. */
static void pack_random(msgpack_packer *pk, unsigned depth)
{
	static const uint8_t bytes[300] = {1, 2, 3};
	unsigned k = (unsigned)(next_rand() % (depth ? 12 : 9));

	switch (k) {
	case 0: msgpack_pack_nil(pk); break;
	case 1: msgpack_pack_true(pk); break;
	case 2:
		msgpack_pack_uint64(pk, next_rand() >> (next_rand() % 64));
		break;
	case 3:
		msgpack_pack_int64(
		    pk, -(int64_t)(next_rand() >> (1 + next_rand() % 63)));
		break;
	case 4:
		msgpack_pack_double(pk, (double)(next_rand() % 1000) / 7.0);
		break;
	case 5: msgpack_pack_float(pk, 1.5f); break;
	case 6: msgpack_pack_str_with_body(pk, bytes, next_rand() % 300); break;
	case 7: msgpack_pack_bin_with_body(pk, bytes, next_rand() % 300); break;
	case 8:
		msgpack_pack_ext_with_body(pk, bytes, next_rand() % 20, 5);
		break;
	case 9:
	case 10: {
		unsigned n = (unsigned)(next_rand() % 20);

		msgpack_pack_array(pk, n);
		while (n--)
			pack_random(pk, depth - 1);
		break;
	}
	default: {
		unsigned n = (unsigned)(next_rand() % 8);

		msgpack_pack_map(pk, n);
		while (n--) {
			pack_random(pk, depth - 1);
			pack_random(pk, depth - 1);
		}
		break;
	}
	}
}

/* Do both decoders accept buf[0..n) as one object, ending at the same byte? */
static void agree(const uint8_t *buf, size_t n, const char *what)
{
	msgpack_unpacked u;
	size_t off = 0;
	const uint8_t *p = buf;
	int ref, ours;

	msgpack_unpacked_init(&u);
	ref = msgpack_unpack_next(&u, (const char *)buf, n, &off);
	ours = kv_mp_skip(&p, buf + n, KV_MP_MAX_DEPTH);
	if (ref == MSGPACK_UNPACK_SUCCESS ||
	    ref == MSGPACK_UNPACK_EXTRA_BYTES) {
		const uint8_t *q = buf;

		if (ours != KV_MP_OK || (size_t)(p - buf) != off ||
		    !same(&q, buf + n, &u.data) || q != p)
			dump(what, buf, n);
	} else if (ours == KV_MP_OK) {
		dump(what, buf, n);
	}
	msgpack_unpacked_destroy(&u);
}

static void test_random(unsigned rounds)
{
	for (unsigned r = 0; r < rounds; r++) {
		msgpack_sbuffer sb;
		msgpack_packer pk;
		uint8_t *m;
		size_t n;

		msgpack_sbuffer_init(&sb);
		msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
		pack_random(&pk, 4);
		n = sb.size;
		agree((const uint8_t *)sb.data, n, "valid object");
		agree((const uint8_t *)sb.data, n - 1 - next_rand() % n,
		      "truncated");
		m = malloc(n);
		memcpy(m, sb.data, n);
		for (unsigned f = 0; f < 3; f++)
			m[next_rand() % n] = (uint8_t)next_rand();
		agree(m, n, "mutated");
		free(m);
		msgpack_sbuffer_destroy(&sb);
	}
}

static void test_hostile(void)
{
	static const uint8_t cases[][9] = {
	    {0xc1},
	    {0xc6, 0xff, 0xff, 0xff, 0xff},	  /* bin32 of 2^32-1 */
	    {0xc6, 0x80, 0x00, 0x00, 0x00},	  /* bin32 of 2^31 */
	    {0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},  /* str32, short */
	    {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0}, /* array32 of 2^32-1 */
	    {0xdf, 0x80, 0x00, 0x00, 0x00, 0xc0}, /* map32 of 2^31 */
	    {0xc9, 0xff, 0xff, 0xff, 0xff, 0x01}, /* ext32 */
	    {0xd8, 0x01},			  /* fixext16, short */
	    {0xcf, 0x01, 0x02},			  /* uint64, short */
	};
	uint8_t deep[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (size_t n = 1; n <= sizeof(cases[0]); n++)
			agree(cases[i], n, "hostile");
	/* Nesting at and past msgpack-c's limit of 32 open containers. */
	for (size_t d = 28; d <= 40; d++) {
		memset(deep, 0x91, d);
		deep[d] = 0xc0;
		agree(deep, d + 1, "deep arrays");
		memset(deep, 0x91, d - 1);
		deep[d - 1] = 0x90;
		agree(deep, d, "deep, empty innermost");
	}
}

int main(void)
{
	test_integers();
	test_lengths();
	test_double();
	test_hostile();
	test_random(100000);
	if (failures) {
		fprintf(stderr, "%u failure(s)\n", failures);
		return 1;
	}
	printf("msgpack codec agrees with msgpack-c\n");
	return 0;
}
