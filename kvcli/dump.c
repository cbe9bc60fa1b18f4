/* dump.c - kvcli dump: every key and value, as lines kvcli load reads back.
 *
 * The scan follows the server's cursor in large batches, and each record is
 * written as soon as it arrives, so a dump of any size runs in constant
 * memory.  The record format is out_json_record()'s, shared with
 * `kvcli --json scan`.
 */
#include <string.h>

#include "json.h"
#include "kvcli.h"

#define DUMP_BATCH 10000
#define DUMP_FLUSH_AT (256u << 10)

/* TSV with the escapes load decodes; bytes from 0x80 up stay as they are
 * (UTF-8 text stays readable), control bytes become \xHH. */
static void tsv_field(struct kv_buf *b, kvc_val v, int b64)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *s = v.p, *end = s + v.len, *run = s;

	if (b64) {
		b64_encode(b, v.p, v.len);
		return;
	}
	for (; s < end; s++) {
		char e[4] = {'\\', 0, 0, 0};
		size_t n = 2;

		if (*s >= 0x20 && *s != 0x7f && *s != '\\')
			continue;
		kv_buf_append(b, run, (size_t)(s - run));
		run = s + 1;
		switch (*s) {
		case '\t': e[1] = 't'; break;
		case '\n': e[1] = 'n'; break;
		case '\r': e[1] = 'r'; break;
		case '\\': e[1] = '\\'; break;
		case '\0': e[1] = '0'; break;
		default:
			e[1] = 'x';
			e[2] = hex[*s >> 4];
			e[3] = hex[*s & 15];
			n = 4;
		}
		kv_buf_append(b, e, n);
	}
	kv_buf_append(b, run, (size_t)(s - run));
}

int cmd_dump(struct cli *cli, int argc, char **argv)
{
	enum { PREFIX, B64, TSV };
	static const struct cli_opt opts[] = {
	    {"prefix", 0, 1}, {"base64", 0, 0}, {"tsv", 0, 0}, {0, 0, 0}};
	kvc_val prefix = {NULL, 0}, k, v;
	struct kv_buf *b = &cli->ob;
	struct cli_args a;
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
		prefix.len = strlen(a.val[PREFIX]);
	}
	if ((rc =
		 kvc_scan_open(cli->c, &s, &prefix, NULL, NULL, DUMP_BATCH, 0)))
		return cli_fail(cli, "dump", rc);
	while ((rc = kvc_scan_next(s, &k, &v)) == 0) {
		if (a.set[TSV]) {
			tsv_field(b, k, a.set[B64]);
			kv_buf_append(b, "\t", 1);
			tsv_field(b, v, a.set[B64]);
			kv_buf_append(b, "\n", 1);
		} else {
			out_json_record(b, k, &v, a.set[B64]);
		}
		if (b->len >= DUMP_FLUSH_AT) {
			fwrite(b->data, 1, b->len, stdout);
			b->len = 0;
		}
	}
	kvc_scan_close(s);
	if (rc != -KVC_END)
		return cli_fail(cli, "dump", rc);
	return EXIT_OK;
}
