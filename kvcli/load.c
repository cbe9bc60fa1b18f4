/* load.c - kvcli load: bulk loading from JSON lines or TSV, pipelined.
 *
 * Rows are parsed into a staging batch; a full batch leaves as one MPUT,
 * and up to `window` MPUTs are in flight while the next batches are
 * parsed, so parsing, the network and the server's group commit overlap.
 * One MPUT per batch rather than one PUT per row is what makes a durable
 * load fast: the server commits (and fsyncs) each request's rows together,
 * and the requests in flight share commits as well.
 *
 * One key or value over the server's limits fails a whole MPUT, so a row
 * the server would refuse must never reach it inside a batch: every row is
 * checked here against the limits HELLO reports (key and value sizes) and
 * reported with its line number.  What can still fail at the server (a
 * full disk, a failed shard) fails a batch, reported by its line range and
 * counted as not stored; MPUT being atomic per shard only, some of its
 * rows may have been stored all the same, and loading the file again is
 * harmless.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dumpdoc.h"

#define LOAD_CHUNK (1u << 20)
#define LOAD_MAX_LINE (512u << 20)
/* Measured (bench/HISTORY.md, "kvcli load vs PostgreSQL COPY"): a durable load is bound by the server's
 * commits, and fewer, larger transactions rewrite fewer LMDB pages, so
 * batches are large and many are in flight.  Bytes bound both, so that big
 * values cannot make either grow without limit. */
#define LOAD_BATCH 10000
#define LOAD_WINDOW 32
#define LOAD_BATCH_BYTES (4u << 20)
#define LOAD_INFLIGHT_BYTES (64u << 20)

struct inflight {
	uint64_t first, last; /* line numbers */
	uint32_t rows;
	size_t bytes;
	int ok_st; /* a status that is fine too (a DEL before a hash:
		    * NOT_FOUND; a collection's create: EXISTS), or 0 */
};

struct loader {
	struct cli *cli;
	int tsv, b64, strict;
	unsigned long long ttl;
	unsigned batch, window;
	uint64_t max_key, max_value, max_bytes;

	/* input */
	int fd;
	const char *name;
	uint64_t in_size, in_done; /* bytes, for the progress bar */
	struct kv_buf in;
	uint64_t line;

	/* the batch being built */
	struct kv_buf data;
	size_t *koff, *klen, *voff, *vlen;
	kvc_val *keys, *vals;
	uint32_t n;
	uint64_t first;

	/* requests in flight, oldest first */
	struct inflight *fl;
	unsigned fl_head, fl_len;
	size_t fl_bytes;

	/* the row being parsed, when it is not a plain one (dump's typed
	 * records): a hash's fields, as offsets into data (field off, len,
	 * value off, len), and a time to live of its own */
	int hash;
	int64_t row_ttl;     /* -1: none given */
	struct kv_buf hf;    /* size_t[4] per field */
	struct kv_buf hvals; /* kvc_val[2] per field, when sent */

	struct ldoc docs; /* dump's document rows (dumpdoc.c) */
	struct json_doc doc;
	char why[128];
	struct kv_buf scratch;
	uint64_t rows, errors;
	double t0, last_draw;
	int progress;
	int stop; /* read no further (--strict, or the connection died) */
	int dead; /* the connection failed: send nothing more */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ===================== Errors and progress ===================== */

static void clear_progress(struct loader *L)
{
	if (L->progress)
		fputs("\r\033[K", stderr);
}

static void line_error(struct loader *L, uint64_t line, const char *why)
{
	clear_progress(L);
	fprintf(stderr, "kvcli load: %s:%llu: %s\n", L->name,
		(unsigned long long)line, why);
	L->errors++;
	if (L->strict)
		L->stop = 1;
}

static void draw_progress(struct loader *L, int force)
{
	double t = now_s(), el = t - L->t0;
	char bar[32];

	if (!L->progress || (!force && t - L->last_draw < 0.1))
		return;
	L->last_draw = t;
	if (L->in_size) {
		unsigned fill =
		    (unsigned)(25.0 * (double)L->in_done / (double)L->in_size);

		if (fill > 25)
			fill = 25;
		memset(bar, '#', fill);
		memset(bar + fill, '.', 25 - fill);
		bar[25] = '\0';
		fprintf(stderr, "\r[%s] %3.0f%% ", bar,
			100.0 * (double)L->in_done / (double)L->in_size);
	} else {
		fputs("\r", stderr);
	}
	fprintf(stderr, "%llu rows, %llu errors, %.0f rows/s\033[K",
		(unsigned long long)L->rows, (unsigned long long)L->errors,
		el > 0 ? (double)L->rows / el : 0.0);
}

/* ===================== Requests ===================== */

/* Take the oldest reply and account for its rows. */
static int take_reply(struct loader *L)
{
	struct inflight *f = &L->fl[L->fl_head];
	kvc_reply *r;
	int rc = kvc_read_reply(L->cli->c, &r);

	L->fl_head = (L->fl_head + 1) % L->window;
	L->fl_len--;
	L->fl_bytes -= f->bytes;
	if (rc == 0 && (rc = kvc_reply_status(r)) != 0 && rc == f->ok_st)
		rc = 0;
	if (rc == 0) {
		L->rows += f->rows;
		return 0;
	}
	clear_progress(L);
	fprintf(
	    stderr, "kvcli load: %s:%llu-%llu: %u rows not stored: %s%s%s\n",
	    L->name, (unsigned long long)f->first, (unsigned long long)f->last,
	    f->rows, -rc < KVC_CLIENT_STATUS_MIN ? kvc_status_name(rc) : "",
	    -rc < KVC_CLIENT_STATUS_MIN ? ": " : "", kvc_errmsg(L->cli->c));
	L->errors += f->rows;
	if (-rc >= KVC_CLIENT_STATUS_MIN)
		L->dead = 1; /* the connection is gone */
	if (L->strict || L->dead)
		L->stop = 1;
	return rc;
}

/* Wait until one more request of bytes fits in the window: 0, or -1
 * when the connection is gone. */
static int make_room(struct loader *L, size_t bytes)
{
	while (L->fl_len && !L->dead &&
	       (L->fl_len == L->window ||
		L->fl_bytes + bytes > LOAD_INFLIGHT_BYTES))
		take_reply(L);
	return L->dead ? -1 : 0;
}

/* A request was queued (rc its kvc_send_* result): account for it. */
static int queued(struct loader *L, int rc, uint32_t rows, size_t bytes,
		  int ok_st)
{
	return load_sent(L, rc, L->n ? L->first : L->line, rows, bytes, ok_st);
}

int load_room(struct loader *L, size_t bytes)
{
	return make_room(L, bytes);
}

int load_sent(struct loader *L, int rc, uint64_t first, uint32_t rows,
	      size_t bytes, int ok_st)
{
	struct inflight *f = &L->fl[(L->fl_head + L->fl_len) % L->window];

	if (rc == 0)
		rc = kvc_flush(L->cli->c);
	f->first = first;
	f->last = L->line;
	f->rows = rows;
	f->bytes = bytes;
	f->ok_st = ok_st;
	if (rc == 0) {
		L->fl_len++;
		L->fl_bytes += f->bytes;
	} else {
		clear_progress(L);
		fprintf(stderr, "kvcli load: %s\n", kvc_errmsg(L->cli->c));
		L->errors += rows;
		L->stop = L->dead = 1;
	}
	return rc;
}

static int send_batch(struct loader *L)
{
	int rc;

	if (!L->n)
		return 0;
	for (uint32_t i = 0; i < L->n; i++) {
		L->keys[i].p = L->data.data + L->koff[i];
		L->keys[i].len = L->klen[i];
		L->vals[i].p = L->data.data + L->voff[i];
		L->vals[i].len = L->vlen[i];
	}
	if (make_room(L, L->data.len)) {
		L->errors += L->n;
		L->n = 0;
		L->data.len = 0;
		return -1;
	}
	rc = kvc_send_mput(L->cli->c, L->keys, L->vals, L->n, L->ttl);
	rc = queued(L, rc, L->n, L->data.len, 0);
	L->n = 0;
	L->data.len = 0;
	draw_progress(L, 0);
	return rc;
}

/* A row that an MPUT cannot carry (a hash, or its own time to live),
 * staged at index L->n: sent alone, after the batch before it so that the
 * file's order holds.  A hash replaces the key as a PUT would: DEL, HSET,
 * then EXPIRE when it expires. */
static void send_special(struct loader *L)
{
	uint32_t i = L->n;
	kvc_val k = {L->data.data + L->koff[i], L->klen[i]};
	uint64_t ttl = L->row_ttl >= 0 ? (uint64_t)L->row_ttl : L->ttl;
	size_t nf = L->hf.len / (4 * sizeof(size_t)), bytes = L->data.len;
	const size_t *o = (const size_t *)L->hf.data;
	kvc_val *fv;
	int rc = 0;

	if (!L->hash) {
		kvc_val v = {L->data.data + L->voff[i], L->vlen[i]};

		if (!make_room(L, bytes))
			queued(L,
			       kvc_send_put(L->cli->c, k.p, k.len, v.p, v.len,
					    ttl, 0),
			       1, bytes, 0);
		return;
	}
	L->hvals.len = 0;
	if (kv_buf_reserve(&L->hvals, 2 * nf * sizeof(kvc_val))) {
		line_error(L, L->line, "out of memory");
		return;
	}
	fv = (kvc_val *)L->hvals.data;
	for (size_t j = 0; j < nf; j++) {
		fv[j] = (kvc_val){L->data.data + o[4 * j], o[4 * j + 1]};
		fv[nf + j] =
		    (kvc_val){L->data.data + o[4 * j + 2], o[4 * j + 3]};
	}
	if (make_room(L, 0) ||
	    queued(L, kvc_send_del(L->cli->c, k.p, k.len), 0, 0,
		   -KVC_NOT_FOUND) ||
	    make_room(L, bytes))
		return;
	rc = queued(L, kvc_send_hset(L->cli->c, k.p, k.len, fv, fv + nf, nf), 1,
		    bytes, 0);
	if (!rc && ttl && !make_room(L, 0))
		queued(L, kvc_send_expire(L->cli->c, k.p, k.len, ttl), 0, 0, 0);
}

/* ===================== Rows ===================== */

/* The row just staged (key at koff, value at voff) is complete: check it
 * against the server's limits and add it to the batch. */
static void stage_row(struct loader *L, size_t row_start)
{
	const char *why = NULL;

	if (L->klen[L->n] == 0)
		why = "empty key";
	else if (L->klen[L->n] > L->max_key)
		why = "key longer than the server's max_key";
	else if (L->vlen[L->n] > L->max_value)
		why = "value longer than the server's max_value";
	else if (L->data.err)
		why = "out of memory";
	if (why) {
		L->data.len = row_start;
		L->data.err = 0;
		line_error(L, L->line, why);
		return;
	}
	if (L->hash || L->row_ttl >= 0) {
		size_t klen = L->klen[L->n], vlen = L->vlen[L->n];
		size_t koff = L->koff[L->n], voff = L->voff[L->n];
		size_t end = L->data.len;

		/* The batch before it goes first, so the file's order holds:
		 * its MPUT is encoded (copied out) at once, and this row's
		 * bytes stay where they are, after the batch's. */
		L->data.len = row_start;
		send_batch(L);
		L->data.len = end;
		L->koff[0] = koff;
		L->klen[0] = klen;
		L->voff[0] = voff;
		L->vlen[0] = vlen;
		if (!L->dead)
			send_special(L);
		else
			L->errors++;
		L->data.len = 0;
		draw_progress(L, 0);
		return;
	}
	if (!L->n)
		L->first = L->line;
	L->n++;
	if (L->n == L->batch || L->data.len >= L->max_bytes)
		send_batch(L);
}

/* Bytes of a JSON string member: text, or base64. */
static int json_bytes(struct loader *L, const char *s, uint32_t i, int b64)
{
	const struct json_tok *t = &L->doc.t[i];

	if (t->type != JSON_STRING)
		return -1;
	if (!b64)
		return json_str(s, t, &L->data);
	L->scratch.len = 0;
	if (json_str(s, t, &L->scratch))
		return -1;
	return b64_decode(&L->data, (const char *)L->scratch.data,
			  L->scratch.len);
}

/* A value member: a string, a document (msgpack), or a scalar's text. */
static int json_value(struct loader *L, const char *s, uint32_t i, int b64)
{
	const struct json_tok *t = &L->doc.t[i];

	switch (t->type) {
	case JSON_STRING: return json_bytes(L, s, i, b64);
	case JSON_OBJECT:
	case JSON_ARRAY:
		return b64 || json_to_mp(s, &L->doc, i, &L->data) < 0 ? -1 : 0;
	case JSON_NUMBER:
		return b64 ? -1 : kv_buf_append(&L->data, s + t->start, t->len);
	case JSON_TRUE: return b64 ? -1 : kv_buf_append(&L->data, "true", 4);
	case JSON_FALSE: return b64 ? -1 : kv_buf_append(&L->data, "false", 5);
	default: return -1;
	}
}

/* Which member is this: 0 key, 1 key_b64, 2 value, 3 value_b64, 4 field,
 * 5 field_b64, 6 type, 7 fields, 8 ttl_ms, -1 none. */
static int member(struct loader *L, const char *s, const struct json_tok *t)
{
	static const char *const names[] = {"key",	 "key_b64", "value",
					    "value_b64", "field",   "field_b64",
					    "type",	 "fields",  "ttl_ms"};

	L->scratch.len = 0;
	if (json_str(s, t, &L->scratch))
		return -1;
	for (int k = 0; k < 9; k++)
		if (L->scratch.len == strlen(names[k]) &&
		    !memcmp(L->scratch.data, names[k], L->scratch.len))
			return k;
	return -1;
}

/* One of "fields": {"field": ..., "value": ...} (or their _b64 forms),
 * its bytes appended to data and their offsets to hf. */
static const char *json_field(struct loader *L, const char *s, uint32_t j)
{
	const struct json_tok *t = L->doc.t;
	size_t o[4];
	int have[2] = {0, 0};

	if (t[j].type != JSON_OBJECT)
		return "a field that is not {\"field\": ..., \"value\": ...}";
	for (uint32_t i = j + 1; i < t[j].next; i = t[i + 1].next) {
		int m = member(L, s, &t[i]), b64 = L->b64 || m % 2;
		int which = m == 4 || m == 5 ? 0 : m == 2 || m == 3 ? 1 : -1;
		size_t at = L->data.len;

		if (which < 0)
			return "unknown member in a field (field, value)";
		if (have[which]++ || json_bytes(L, s, i + 1, b64))
			return "bad field (one field and one value, strings)";
		o[2 * which] = at;
		o[2 * which + 1] = L->data.len - at;
	}
	if (!have[0] || !have[1])
		return "a field without its field or value";
	return kv_buf_append(&L->hf, o, sizeof(o)) ? "out of memory" : NULL;
}

/* "fields": [...], a hash's. */
static const char *json_fields(struct loader *L, const char *s, uint32_t i)
{
	const struct json_tok *t = L->doc.t;
	const char *why;

	if (t[i].type != JSON_ARRAY || !t[i].n)
		return "fields: not an array of at least one field";
	for (uint32_t j = i + 1; j < t[i].next; j = t[j].next)
		if ((why = json_field(L, s, j)))
			return why;
	return NULL;
}

/* "type" ("string" or "hash") and "ttl_ms" (milliseconds left). */
static const char *json_meta(struct loader *L, const char *s, int m, uint32_t i)
{
	const struct json_tok *t = &L->doc.t[i];
	unsigned long long ms;
	char num[24];

	if (m == 6) {
		L->scratch.len = 0;
		if (t->type != JSON_STRING || json_str(s, t, &L->scratch))
			return "type: not a string";
		if (L->scratch.len == 4 && !memcmp(L->scratch.data, "hash", 4))
			L->hash = 1;
		else if (!(L->scratch.len == 6 &&
			   !memcmp(L->scratch.data, "string", 6)))
			return "type: neither \"string\" nor \"hash\"";
		return NULL;
	}
	if (t->type != JSON_NUMBER || t->len >= sizeof(num))
		return "ttl_ms: not a number";
	memcpy(num, s + t->start, t->len);
	num[t->len] = '\0';
	if (num[0] == '-' || cli_uint("ttl_ms", num, 1ull << 50, &ms) || !ms)
		return "ttl_ms: not a whole number of milliseconds, 1 to 2^50";
	L->row_ttl = (int64_t)ms;
	return NULL;
}

/* json_row's answer for a row it sent itself (dump's document rows). */
static const char taken[] = "";

static const char *json_row(struct loader *L, const char *s, size_t n)
{
	const struct json_tok *t;
	int have[5] = {0, 0, 0, 0, 0}; /* key, value, type, fields, ttl */
	const char *why;
	uint32_t i;

	L->hash = 0;
	L->row_ttl = -1;
	L->hf.len = 0;
	if (json_parse_depth(&L->doc, s, n, JSON_MAX_DEPTH + 1)) {
		snprintf(L->why, sizeof(L->why), "column %zu: %s",
			 L->doc.err_at + 1, L->doc.err);
		return L->why;
	}
	if (ldoc_row(&L->docs, s, &L->doc, &why))
		return why ? why : taken;
	t = L->doc.t;
	if (t[0].type != JSON_OBJECT)
		return "not a JSON object";
	for (i = 1; i < t[0].next; i = t[i + 1].next) {
		int m = member(L, s, &t[i]), b64 = L->b64 || m % 2;
		int slot = m < 4 ? m / 2 : m - 4;
		size_t at = L->data.len;

		if (m < 0 || m == 4 || m == 5)
			return "unknown member (key, key_b64, value, "
			       "value_b64, type, fields, ttl_ms)";
		if (have[slot]++)
			return "a member given twice";
		if (m >= 6) {
			if ((why = m == 7 ? json_fields(L, s, i + 1)
					  : json_meta(L, s, m, i + 1)))
				return why;
			continue;
		}
		if (m < 2 ? json_bytes(L, s, i + 1, b64)
			  : json_value(L, s, i + 1, b64))
			return m < 2 ? "bad key (a string; base64 for key_b64)"
				     : "bad value";
		if (m < 2) {
			L->koff[L->n] = at;
			L->klen[L->n] = L->data.len - at;
		} else {
			L->voff[L->n] = at;
			L->vlen[L->n] = L->data.len - at;
		}
	}
	if (!have[0])
		return "no key";
	if (L->hash != have[3] || (L->hash && have[1]))
		return L->hash ? "a hash takes fields, not a value"
			       : "fields without \"type\": \"hash\"";
	if (!L->hash && !have[1])
		return "no value";
	if (L->hash)
		L->voff[L->n] = L->vlen[L->n] = 0;
	return NULL;
}

static int unhex(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* One TSV field, escapes decoded, appended to L->data. */
static int tsv_field(struct loader *L, const char *s, size_t n)
{
	const char *end = s + n;

	if (L->b64)
		return b64_decode(&L->data, s, n);
	while (s < end) {
		const char *bs = memchr(s, '\\', (size_t)(end - s));
		char c;

		if (!bs)
			return kv_buf_append(&L->data, s, (size_t)(end - s));
		kv_buf_append(&L->data, s, (size_t)(bs - s));
		if (bs + 1 == end)
			return -1;
		switch (bs[1]) {
		case 't': c = '\t'; break;
		case 'n': c = '\n'; break;
		case 'r': c = '\r'; break;
		case '0': c = '\0'; break;
		case '\\': c = '\\'; break;
		case 'x':
			if (end - bs < 4 || unhex(bs[2]) < 0 ||
			    unhex(bs[3]) < 0)
				return -1;
			c = (char)(unhex(bs[2]) << 4 | unhex(bs[3]));
			s = bs + 4;
			kv_buf_append(&L->data, &c, 1);
			continue;
		default: return -1;
		}
		kv_buf_append(&L->data, &c, 1);
		s = bs + 2;
	}
	return 0;
}

static const char *tsv_row(struct loader *L, const char *s, size_t n)
{
	const char *tab = memchr(s, '\t', n);
	size_t at = L->data.len;

	L->hash = 0;
	L->row_ttl = -1;
	if (n && s[n - 1] == '\r')
		n--; /* CRLF input: a real CR in a value is written \r */
	if (!tab || (tab = memchr(s, '\t', n)) == NULL)
		return "no TAB between key and value";
	if (memchr(tab + 1, '\t', n - (size_t)(tab + 1 - s)))
		return "more than one TAB (write a TAB in a value as \\t)";
	if (tsv_field(L, s, (size_t)(tab - s)))
		return L->b64 ? "bad base64 in the key"
			      : "bad escape in the key";
	L->koff[L->n] = at;
	L->klen[L->n] = L->data.len - at;
	at = L->data.len;
	if (tsv_field(L, tab + 1, n - (size_t)(tab + 1 - s)))
		return L->b64 ? "bad base64 in the value"
			      : "bad escape in the value";
	L->voff[L->n] = at;
	L->vlen[L->n] = L->data.len - at;
	return NULL;
}

static void row(struct loader *L, const char *s, size_t n)
{
	size_t start = L->data.len;
	const char *why;

	L->line++;
	if (n == 0 || (n == 1 && s[0] == '\r'))
		return; /* blank lines separate nothing, store nothing */
	why = L->tsv ? tsv_row(L, s, n) : json_row(L, s, n);
	if (why == taken) {
		L->data.len = start;
		return;
	}
	if (why) {
		L->data.len = start;
		L->data.err = 0;
		line_error(L, L->line, why);
		return;
	}
	stage_row(L, start);
}

/* ===================== Input ===================== */

/* Read the input in large pieces and hand out whole lines. */
static int read_input(struct loader *L)
{
	size_t used = 0;

	for (;;) {
		ssize_t got;
		uint8_t *nl;

		while (
		    !L->stop && L->in.len > used &&
		    (nl = memchr(L->in.data + used, '\n', L->in.len - used))) {
			row(L, (const char *)L->in.data + used,
			    (size_t)(nl - L->in.data) - used);
			used = (size_t)(nl - L->in.data) + 1;
		}
		if (L->stop)
			return 0;
		kv_buf_consume(&L->in, used);
		used = 0;
		if (L->in.len >= LOAD_MAX_LINE) {
			line_error(L, L->line + 1, "line too long");
			return -1;
		}
		if (kv_buf_reserve(&L->in, LOAD_CHUNK)) {
			fprintf(stderr, "kvcli load: out of memory\n");
			return -1;
		}
		do
			got = read(L->fd, L->in.data + L->in.len,
				   L->in.cap - L->in.len);
		while (got < 0 && errno == EINTR);
		if (got < 0) {
			fprintf(stderr, "kvcli load: %s: %s\n", L->name,
				strerror(errno));
			return -1;
		}
		if (got == 0)
			break;
		L->in.len += (size_t)got;
		L->in_done += (uint64_t)got;
	}
	if (L->in.len) /* a last line without its newline */
		row(L, (const char *)L->in.data, L->in.len);
	return 0;
}

/* ===================== Setup ===================== */

/* The server's limits decide what a row may hold and how big a batch is. */
static int limits(struct loader *L)
{
	uint64_t max_frame = 0;
	kvc_val info;
	int rc = kvc_hello(L->cli->c, &info);

	/* HELLO is answered before AUTH; PING is not.  Ask now, with a small
	 * request, rather than find out from the first batch, which a server
	 * with a password refuses for its size (older kvd said
	 * FRAME_TOO_LARGE). */
	if (!rc)
		rc = kvc_ping(L->cli->c, NULL, 0, NULL);
	if (rc)
		return cli_fail(L->cli, "load", rc);
	if (kvc_map_uint(info, "max_key", &L->max_key) ||
	    kvc_map_uint(info, "max_value", &L->max_value) ||
	    kvc_map_uint(info, "max_frame", &max_frame)) {
		fprintf(stderr,
			"kvcli load: the server's HELLO lacks limits\n");
		return EXIT_ERROR;
	}
	/* Leave room for framing: each item costs at most 10 header bytes. */
	L->max_bytes =
	    max_frame / 2 < LOAD_BATCH_BYTES ? max_frame / 2 : LOAD_BATCH_BYTES;
	if (L->max_value + L->max_key + 64 > max_frame)
		L->max_value = max_frame - L->max_key - 64;
	if (max_frame > KVC_DEFAULT_MAX_REPLY)
		kvc_set_max_reply(L->cli->c, max_frame);
	return 0;
}

static int alloc_batch(struct loader *L)
{
	size_t n = L->batch;

	L->koff = malloc(n * sizeof(size_t));
	L->klen = malloc(n * sizeof(size_t));
	L->voff = malloc(n * sizeof(size_t));
	L->vlen = malloc(n * sizeof(size_t));
	L->keys = malloc(n * sizeof(kvc_val));
	L->vals = malloc(n * sizeof(kvc_val));
	L->fl = malloc(L->window * sizeof(*L->fl));
	if (L->koff && L->klen && L->voff && L->vlen && L->keys && L->vals &&
	    L->fl)
		return 0;
	fprintf(stderr, "kvcli load: out of memory\n");
	return -1;
}

static void free_loader(struct loader *L)
{
	free(L->koff);
	free(L->klen);
	free(L->voff);
	free(L->vlen);
	free(L->keys);
	free(L->vals);
	free(L->fl);
	kv_buf_free(&L->in);
	kv_buf_free(&L->data);
	kv_buf_free(&L->scratch);
	kv_buf_free(&L->hf);
	kv_buf_free(&L->hvals);
	json_doc_free(&L->doc);
	ldoc_free(&L->docs);
	if (L->fd > 0)
		close(L->fd);
}

static int open_input(struct loader *L, const char *path)
{
	struct stat st;
	size_t n = strlen(path);

	L->name = strcmp(path, "-") ? path : "stdin";
	L->fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
	if (L->fd < 0) {
		fprintf(stderr, "kvcli load: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(L->fd, &st) == 0 && S_ISREG(st.st_mode))
		L->in_size = (uint64_t)st.st_size;
	if (n > 4 && !strcmp(path + n - 4, ".tsv"))
		L->tsv = 1;
	return 0;
}

static void summary(struct loader *L)
{
	struct kv_buf *b = &L->cli->ob;
	double el = now_s() - L->t0;
	double rate = el > 0 ? (double)L->rows / el : 0;
	char tmp[256];
	const char *fmt;

	draw_progress(L, 1);
	clear_progress(L);
	switch (L->cli->fmt) {
	case FMT_JSON:
		fmt = "{\"rows\":%llu,\"errors\":%llu,\"seconds\":%.3f,"
		      "\"rows_per_second\":%.0f}\n";
		break;
	case FMT_CSV:
		fmt = "rows,errors,seconds,rows_per_second\r\n%llu,%llu,%.3f,"
		      "%.0f\r\n";
		break;
	default:
		fmt = "rows %llu, errors %llu, seconds %.3f, rows/s %.0f\n";
		break;
	}
	snprintf(tmp, sizeof(tmp), fmt, (unsigned long long)L->rows,
		 (unsigned long long)L->errors, el, rate);
	kv_buf_append(b, tmp, strlen(tmp));
}

int cmd_load(struct cli *cli, int argc, char **argv)
{
	enum { TSV, B64, STRICT, TTL, BATCH, WINDOW };
	static const struct cli_opt opts[] = {
	    {"tsv", 0, 0},   {"base64", 0, 0}, {"strict", 0, 0}, {"ttl", 0, 1},
	    {"batch", 0, 1}, {"window", 0, 1}, {0, 0, 0}};
	struct loader L = {
	    .cli = cli, .batch = LOAD_BATCH, .window = LOAD_WINDOW, .fd = -1};
	unsigned long long v;
	struct cli_args a;
	int rc = cli_args(cli_find("load"), argc, argv, opts, &a);

	if (rc)
		return rc > 0 ? EXIT_OK : EXIT_ERROR;
	if (a.npos > 1)
		return cli_usage(cli_find("load")), EXIT_ERROR;
	L.b64 = a.set[B64];
	L.strict = a.set[STRICT];
	if ((a.set[TTL] && cli_uint("--ttl", a.val[TTL], 1ull << 50, &L.ttl)) ||
	    (a.set[BATCH] && (cli_uint("--batch", a.val[BATCH], 100000, &v) ||
			      !(L.batch = (unsigned)v))) ||
	    (a.set[WINDOW] && (cli_uint("--window", a.val[WINDOW], 1024, &v) ||
			       !(L.window = (unsigned)v))))
		return EXIT_ERROR;
	rc = EXIT_ERROR;
	if (open_input(&L, a.npos ? a.pos[0] : "-") || alloc_batch(&L))
		goto done;
	L.tsv |= a.set[TSV];
	if (cli_connect(cli) || (rc = limits(&L)))
		goto done;
	L.docs = (struct ldoc){.L = &L,
			       .c = cli->c,
			       .max_bytes = L.max_bytes,
			       .b64 = L.b64,
			       .line = &L.line};
	L.progress = isatty(2);
	L.t0 = L.last_draw = now_s();
	rc = read_input(&L) ? EXIT_ERROR : EXIT_OK;
	send_batch(&L); /* what came before a --strict stop is stored */
	if (!L.dead)
		ldoc_flush(&L.docs);
	while (L.fl_len && !L.dead)
		take_reply(&L);
	for (; L.fl_len; L.fl_len--) /* unanswered: their fate is unknown */
		L.errors += L.fl[(L.fl_head + L.fl_len - 1) % L.window].rows;
	summary(&L);
	if (L.errors)
		rc = EXIT_ERROR;
done:
	free_loader(&L);
	return rc;
}
