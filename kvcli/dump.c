/* dump.c - kvcli dump: every key and value, as lines kvcli load reads back.
 *
 * The scan follows the server's cursor in large batches, and each record is
 * written as soon as it arrives, so a dump of any size runs in constant
 * memory.  The record format is out_json_record()'s, shared with
 * `kvcli --json scan`, plus what a key needs to come back exactly: its
 * time to live ("ttl_ms", when it expires) and, for a hash, its type and
 * fields ({"key":...,"type":"hash","fields":[{"field":...,"value":...},
 * ...]}).  TSV holds a key and a value per line and nothing more: a hash
 * stops a TSV dump with an error, and expiries are not written.
 */
#include <stdio.h>
#include <string.h>

#include "dumpdoc.h"

#define DUMP_BATCH 10000

/* A typed record as JSON: the type, fields and expiry around dump's
 * {"key":...,"value":...}. */
static void json_typed(struct kv_buf *b, kvc_val k, unsigned type, int64_t ttl,
		       kvc_val v, int b64)
{
	kvc_val f, x;
	char num[40];
	int first = 1;

	if (type == KVC_TYPE_STRING) {
		out_json_record(b, k, &v, b64);
		if (ttl < 0)
			return;
		b->len -= 2; /* the closing "}\n" */
	} else {
		kv_buf_append(b, "{", 1);
		out_json_member(b, "key", k, b64);
		kv_buf_append(b, ",\"type\":\"hash\",\"fields\":[", 25);
		while (kvc_fields_next(&v, &f, &x) == 0) {
			if (!first)
				kv_buf_append(b, ",", 1);
			first = 0;
			out_json_field(b, f, x, b64);
		}
		kv_buf_append(b, "]", 1);
	}
	if (ttl >= 0) {
		int n = snprintf(num, sizeof(num), ",\"ttl_ms\":%lld",
				 (long long)(ttl ? ttl : 1));

		kv_buf_append(b, num, (size_t)n);
	}
	kv_buf_append(b, "}\n", 2);
}

/* A TSV line: key and value (a string's; a hash has no TSV form). */
static int tsv_typed(struct cli *cli, kvc_val k, unsigned type, kvc_val v,
		     int b64)
{
	struct kv_buf *b = &cli->ob;

	if (type != KVC_TYPE_STRING) {
		out_flush(cli);
		fprintf(stderr,
			"kvcli dump: %.*s is a hash: TSV cannot hold it "
			"(dump JSON lines instead)\n",
			(int)(k.len > 200 ? 200 : k.len), (const char *)k.p);
		return -1;
	}
	out_tsv_field(b, k, b64);
	kv_buf_append(b, "\t", 1);
	out_tsv_field(b, v, b64);
	kv_buf_append(b, "\n", 1);
	return 0;
}

int cmd_dump(struct cli *cli, int argc, char **argv)
{
	enum { PREFIX, B64, TSV };
	static const struct cli_opt opts[] = {
	    {"prefix", 0, 1}, {"base64", 0, 0}, {"tsv", 0, 0}, {0, 0, 0}};
	kvc_val prefix = {NULL, 0}, k, v;
	struct cli_args a;
	unsigned type;
	int64_t ttl;
	kvc_scan *s;
	int rc = cli_args(cli_find("dump"), argc, argv, opts, &a);

	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERROR;
	if (a.npos)
		return cli_usage(cli_find("dump")), EXIT_ERROR;
	if (cli_connect(cli))
		return EXIT_ERROR;
	if (a.set[PREFIX]) {
		prefix.p = a.val[PREFIX];
		prefix.len = cli_len(a.val[PREFIX]);
	}
	if ((rc = kvc_scan_open(cli->c, &s, &prefix, NULL, NULL, DUMP_BATCH,
				KVC_SCAN_TYPED)))
		return cli_fail(cli, "dump", rc);
	while ((rc = kvc_scan_next_typed(s, &k, &type, &ttl, &v)) == 0) {
		if (a.set[TSV]) {
			if (tsv_typed(cli, k, type, v, a.set[B64])) {
				kvc_scan_close(s);
				return EXIT_ERROR;
			}
		} else {
			json_typed(&cli->ob, k, type, ttl, v, a.set[B64]);
		}
		out_maybe_flush(cli);
	}
	kvc_scan_close(s);
	if (rc != -KVC_END)
		return cli_fail(cli, "dump", rc);
	/* documents: all of them, in a whole dump of JSON lines (TSV has no
	 * place for them, a prefix names keys) */
	if (!a.set[TSV] && !a.set[PREFIX])
		return dumpdoc_all(cli, a.set[B64]);
	return EXIT_OK;
}
