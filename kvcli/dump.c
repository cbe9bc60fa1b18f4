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
		prefix.len = cli_len(a.val[PREFIX]);
	}
	if ((rc =
		 kvc_scan_open(cli->c, &s, &prefix, NULL, NULL, DUMP_BATCH, 0)))
		return cli_fail(cli, "dump", rc);
	while ((rc = kvc_scan_next(s, &k, &v)) == 0) {
		if (a.set[TSV]) {
			out_tsv_field(b, k, a.set[B64]);
			kv_buf_append(b, "\t", 1);
			out_tsv_field(b, v, a.set[B64]);
			kv_buf_append(b, "\n", 1);
		} else {
			out_json_record(b, k, &v, a.set[B64]);
		}
		out_maybe_flush(cli);
	}
	kvc_scan_close(s);
	if (rc != -KVC_END)
		return cli_fail(cli, "dump", rc);
	return EXIT_OK;
}
