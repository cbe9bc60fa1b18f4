/* test_fstate.c - kvbench's records of fields without a server: a field's
 * bytes carry their generation (record.c), the one-value encoding reads
 * back, and --verify's per-field rule (fstate.c) on histories written out
 * by hand: a value replaced by a later acknowledged write is stale, one
 * that concurrent writes leave possible is not, nor is one a read could
 * see because it was sent before the replacing write was acknowledged.
 * Exit 0 passes, 1 fails. */
#include <stdio.h>
#include <string.h>

#include "fstate.h"
#include "record.h"

static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);        \
			fprintf(stderr, __VA_ARGS__);                          \
			fprintf(stderr, "\n");                                 \
			failures++;                                            \
		}                                                              \
	} while (0)

static struct kb_props props(unsigned fieldlength)
{
	return (struct kb_props){.fieldcount = 4,
				 .fieldlength = fieldlength,
				 .minfieldlength = 1,
				 .fieldlengthdistribution = DIST_CONSTANT};
}

static struct kb_zipf nozipf;

static void test_bytes(void)
{
	struct kb_props p = props(100);
	uint8_t a[100], b[100];
	uint32_t g;
	unsigned bits;
	size_t n = rec_value(&p, &nozipf, 42, 3, 7, a);

	CHECK(n == 100, "length %zu", n);
	for (size_t i = 0; i < n; i++)
		CHECK(a[i] >= ' ' && a[i] < ' ' + 64, "byte %zu: %u", i, a[i]);
	CHECK(rec_generation(42, 3, a, n, &g, &bits) == 0 && g == 7 &&
		  bits == 32,
	      "generation %u/%u", g, bits);
	CHECK(rec_is(&p, &nozipf, 42, 3, 7, a, n), "not itself");
	/* another generation, field or record: other bytes */
	rec_value(&p, &nozipf, 42, 3, 8, b);
	CHECK(memcmp(a, b, n) != 0, "generations 7 and 8 alike");
	rec_value(&p, &nozipf, 43, 3, 7, b);
	CHECK(!rec_is(&p, &nozipf, 42, 3, 7, b, n), "record 43 taken for 42");
	a[50] = a[50] == ' ' ? '!' : ' ';
	CHECK(!rec_is(&p, &nozipf, 42, 3, 7, a, n), "a changed byte passes");
	a[0] = 0x7f;
	CHECK(rec_generation(42, 3, a, n, &g, &bits) < 0, "0x7f accepted");
}

static void test_encoding(void)
{
	uint8_t v0[] = "abc", v1[200], buf[512];
	struct kb_fval in[2] = {{0, v0, 3}, {11, v1, sizeof(v1)}}, out[4];
	unsigned idx;
	size_t n;

	memset(v1, 'x', sizeof(v1));
	n = rec_encode(in, 2, buf);
	CHECK(rec_decode(buf, n, out, 4) == 2, "decode");
	CHECK(out[0].idx == 0 && out[0].len == 3 &&
		  !memcmp(out[0].val, "abc", 3),
	      "field0");
	CHECK(out[1].idx == 11 && out[1].len == 200, "field11");
	CHECK(rec_decode(buf, n, out, 1) < 0, "more fields than room");
	CHECK(rec_decode(buf, n - 1, out, 4) < 0, "truncated");
	CHECK(rec_field_index("field10", 7, &idx) == 0 && idx == 10, "field10");
	CHECK(rec_field_index("field01", 7, &idx) < 0, "field01");
	CHECK(rec_field_index("field", 5, &idx) < 0, "field");
	CHECK(rec_field_index("fieldx", 6, &idx) < 0, "fieldx");
}

/* What a read sent now would make of generation g of field f of record
 * k. */
static enum fst_verdict read_now(struct fst_table *t, const struct kb_props *p,
				 uint64_t k, unsigned f, uint32_t g)
{
	uint8_t v[100];
	uint64_t snap;
	size_t n = rec_value(p, &nozipf, k, f, g, v);

	fst_snapshot(t, k, (int)f, &snap);
	return fst_check(t, p, &nozipf, k, f, snap, v, n);
}

static void test_rule(unsigned fieldlength)
{
	struct kb_props p = props(fieldlength);
	struct fst_table t;
	uint32_t g1, g2, g3, p1, p2, p3;
	uint64_t snap;
	uint8_t v[100];

	CHECK(fst_init(&t, 4, 0) == 0, "init");
	/* the load: generation 1, acknowledged */
	fst_send(&t, 5, 0, 1, &g1, &p1);
	CHECK(g1 == 1, "load generation %u", g1);
	fst_done(&t, 5, 0, p1, 1);
	CHECK(read_now(&t, &p, 5, 0, 1) == FST_OK, "the load");
	/* one update after another: the first is stale */
	fst_send(&t, 5, 0, 0, &g2, &p2);
	fst_done(&t, 5, 0, p2, 1);
	CHECK(read_now(&t, &p, 5, 0, g2) == FST_OK, "the update");
	CHECK(read_now(&t, &p, 5, 0, g1) == FST_STALE, "the load, replaced");
	/* a read sent before the next write was acknowledged may see g2 */
	fst_snapshot(&t, 5, 0, &snap);
	fst_send(&t, 5, 0, 0, &g3, &p3);
	fst_done(&t, 5, 0, p3, 1);
	rec_value(&p, &nozipf, 5, 0, g2, v);
	CHECK(fst_check(&t, &p, &nozipf, 5, 0, snap, v, fieldlength) == FST_OK,
	      "g2 read by a read sent before g3 was acknowledged");
	CHECK(read_now(&t, &p, 5, 0, g2) == FST_STALE, "g2 after g3");
	/* two writes in flight at once, acknowledged out of order: either
	 * may be the one that stays */
	fst_send(&t, 5, 1, 1, &g1, &p1);
	fst_done(&t, 5, 1, p1, 1);
	fst_send(&t, 5, 1, 0, &g2, &p2);
	fst_send(&t, 5, 1, 0, &g3, &p3);
	fst_done(&t, 5, 1, p3, 1);
	fst_done(&t, 5, 1, p2, 1);
	CHECK(read_now(&t, &p, 5, 1, g2) == FST_OK, "concurrent g2");
	CHECK(read_now(&t, &p, 5, 1, g3) == FST_OK, "concurrent g3");
	CHECK(read_now(&t, &p, 5, 1, g1) == FST_STALE, "g1 under both");
	/* a write answered with an error: the next one replaces it */
	fst_send(&t, 5, 2, 1, &g1, &p1);
	fst_done(&t, 5, 2, p1, 0);
	fst_send(&t, 5, 2, 0, &g2, &p2);
	fst_done(&t, 5, 2, p2, 1);
	CHECK(read_now(&t, &p, 5, 2, g1) == FST_STALE, "refused write seen");
	/* a write whose connection failed may land any time: never stale */
	fst_send(&t, 5, 3, 1, &g1, &p1);
	fst_done(&t, 5, 3, p1, 1);
	fst_send(&t, 5, 3, 0, &g2, &p2); /* no answer, ever */
	fst_send(&t, 5, 3, 0, &g3, &p3);
	fst_done(&t, 5, 3, p3, 1);
	CHECK(read_now(&t, &p, 5, 3, g2) == FST_OK, "uncertain write");
	/* a field never written here: only its bytes are judged */
	CHECK(read_now(&t, &p, 9, 0, 123456) == FST_OK, "written elsewhere");
	rec_value(&p, &nozipf, 9, 0, 123456, v);
	v[fieldlength - 1] ^= 1;
	fst_snapshot(&t, 9, 0, &snap);
	CHECK(fieldlength < REC_GEN_CHARS ||
		  fst_check(&t, &p, &nozipf, 9, 0, snap, v, fieldlength) ==
		      FST_CORRUPT,
	      "corrupt bytes");
	fst_free(&t);
}

int main(void)
{
	test_bytes();
	test_encoding();
	test_rule(100);
	test_rule(3); /* too short to carry the whole generation */
	if (failures)
		fprintf(stderr, "%d failures\n", failures);
	return failures ? 1 : 0;
}
