/* verify.c - --verify: the log of acknowledged writes, the table of keys to
 * read back, and the judgement of each read (see verify.h for the rule). */
#include "verify.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t verify_hash(const void *p, size_t n)
{
	return XXH3_64bits(p, n);
}

int vlog_grow(struct kb_vlog *l)
{
	size_t cap = l->cap ? l->cap * 2 : 4096;
	struct kb_ventry *e = realloc(l->e, cap * sizeof(*e));

	if (!e) {
		l->oom = 1;
		return -1;
	}
	l->e = e;
	l->cap = cap;
	return 0;
}

void vlog_free(struct kb_vlog *l)
{
	free(l->e);
	memset(l, 0, sizeof(*l));
}

static int cmp_entry(const void *a, const void *b)
{
	const struct kb_ventry *x = a, *y = b;

	if (x->id.hi != y->id.hi)
		return x->id.hi < y->id.hi ? -1 : 1;
	if (x->id.lo != y->id.lo)
		return x->id.lo < y->id.lo ? -1 : 1;
	return 0;
}

/* For the run [e, e + n) of one key: append the hashes of the writes that
 * no later-sent write follows. */
static uint32_t candidates(const struct kb_ventry *e, size_t n, uint64_t *out)
{
	uint64_t last_sent = 0;
	uint32_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (e[i].sent > last_sent)
			last_sent = e[i].sent;
	for (size_t i = 0; i < n; i++)
		if (e[i].acked >= last_sent)
			out[k++] = e[i].hash;
	return k;
}

int vtable_build(struct kb_vtable *vt, struct kb_vlog *logs, unsigned n)
{
	struct kb_ventry *all = NULL;
	size_t total = 0, at = 0, nk = 0, nh = 0;
	int rc = -1;

	memset(vt, 0, sizeof(*vt));
	for (unsigned i = 0; i < n; i++)
		total += logs[i].n;
	all = malloc((total ? total : 1) * sizeof(*all));
	vt->keys = malloc((total ? total : 1) * sizeof(*vt->keys));
	vt->hashes = malloc((total ? total : 1) * sizeof(*vt->hashes));
	if (!all || !vt->keys || !vt->hashes)
		goto out;
	for (unsigned i = 0; i < n; i++) {
		if (logs[i].n)
			memcpy(all + at, logs[i].e, logs[i].n * sizeof(*all));
		at += logs[i].n;
		vlog_free(&logs[i]);
	}
	qsort(all, total, sizeof(*all), cmp_entry);
	for (size_t i = 0; i < total;) {
		size_t j = i + 1;

		while (j < total && cmp_entry(&all[i], &all[j]) == 0)
			j++;
		vt->keys[nk].id = all[i].id;
		vt->keys[nk].cand = nh;
		vt->keys[nk].ncand =
		    candidates(all + i, j - i, vt->hashes + nh);
		nh += vt->keys[nk].ncand;
		nk++;
		i = j;
	}
	vt->nkeys = nk;
	rc = 0;
out:
	free(all);
	if (rc)
		vtable_free(vt);
	return rc;
}

void vtable_free(struct kb_vtable *vt)
{
	free(vt->keys);
	free(vt->hashes);
	memset(vt, 0, sizeof(*vt));
}

void verify_check(const struct kb_vtable *vt, size_t idx, enum kb_status st,
		  const uint8_t *val, size_t vlen, struct kb_vcount *vc)
{
	const struct kb_vkey *k = &vt->keys[idx];
	uint64_t h;

	if (st == REPLY_ERROR) {
		vc->errors++;
		return;
	}
	if (st == REPLY_NOT_FOUND) {
		if (vc->nlost_ids < VERIFY_SAMPLES)
			vc->lost_ids[vc->nlost_ids++] = k->id;
		vc->lost++;
		return;
	}
	h = verify_hash(val, vlen);
	for (uint32_t i = 0; i < k->ncand; i++)
		if (vt->hashes[k->cand + i] == h) {
			vc->ok++;
			return;
		}
	if (vc->nbad_ids < VERIFY_SAMPLES)
		vc->bad_ids[vc->nbad_ids++] = k->id;
	vc->mismatched++;
}

void verify_field(struct kb_vcount *vc, const struct kb_key *id, unsigned field,
		  int why, int in_run)
{
	vc->fields.checked++;
	switch (why) {
	case 0: return;
	case FWHY_STALE: vc->fields.stale++; break;
	case FWHY_CORRUPT: vc->fields.corrupt++; break;
	default: vc->fields.missing++;
	}
	if (vc->nbadf < VERIFY_SAMPLES)
		vc->badf[vc->nbadf++] = (struct kb_fsample){
		    *id, field, (uint8_t)why, (uint8_t)in_run};
}

static int add_keys(char ***out, size_t *nout, const struct kb_key *ids,
		    unsigned n, const struct kb_wshared *ws)
{
	for (unsigned i = 0; i < n && *nout < VERIFY_SAMPLES; i++) {
		char buf[KB_KEY_MAX + 1], **grown;
		size_t len = wl_key(ws, &ids[i], buf);

		buf[len] = 0;
		grown = realloc(*out, (*nout + 1) * sizeof(**out));
		if (!grown)
			return -1;
		*out = grown;
		if (!(grown[*nout] = strdup(buf)))
			return -1;
		(*nout)++;
	}
	return 0;
}

/* "user123 field4: stale (read during the run)" */
static int add_fields(struct kb_verify_result *res, const struct kb_vcount *vc,
		      const struct kb_wshared *ws)
{
	static const char *const why[] = {"", "stale", "corrupt", "missing"};

	for (unsigned i = 0; i < vc->nbadf; i++) {
		const struct kb_fsample *s = &vc->badf[i];
		char key[KB_KEY_MAX + 1], line[KB_KEY_MAX + 80], **grown;

		/* the run's reads leave room for the read-back's */
		if (res->nbad_fields >=
		    (s->in_run ? VERIFY_SAMPLES / 2 : VERIFY_SAMPLES))
			break;

		key[wl_key(ws, &s->id, key)] = 0;
		if (s->field == UINT_MAX) /* the record was no record */
			snprintf(
			    line, sizeof(line), "%s: %s (%s)", key, why[s->why],
			    s->in_run ? "read during the run" : "read-back");
		else
			snprintf(line, sizeof(line), "%s field%u: %s (%s)", key,
				 s->field, why[s->why],
				 s->in_run ? "read during the run"
					   : "read-back");
		grown = realloc(res->bad_fields,
				(res->nbad_fields + 1) * sizeof(*grown));
		if (!grown)
			return -1;
		res->bad_fields = grown;
		if (!(grown[res->nbad_fields] = strdup(line)))
			return -1;
		res->nbad_fields++;
	}
	return 0;
}

static void add_fcheck(struct kb_fcheck *to, const struct kb_fcheck *from)
{
	to->checked += from->checked;
	to->stale += from->stale;
	to->corrupt += from->corrupt;
	to->missing += from->missing;
}

int verify_reads(struct kb_verify_result *res, const struct kb_vcount *vc,
		 unsigned n, const struct kb_wshared *ws)
{
	for (unsigned i = 0; i < n; i++) {
		add_fcheck(&res->reads, &vc[i].fields);
		if (add_fields(res, &vc[i], ws))
			return -1;
	}
	return 0;
}

int verify_result(struct kb_verify_result *res, const struct kb_vcount *vc,
		  unsigned n, const struct kb_wshared *ws, size_t nkeys)
{
	res->done = 1;
	res->keys = nkeys;
	for (unsigned i = 0; i < n; i++) {
		res->ok += vc[i].ok;
		res->lost += vc[i].lost;
		res->mismatched += vc[i].mismatched;
		res->errors += vc[i].errors;
		if (add_keys(&res->lost_keys, &res->nlost_keys, vc[i].lost_ids,
			     vc[i].nlost_ids, ws) ||
		    add_keys(&res->bad_keys, &res->nbad_keys, vc[i].bad_ids,
			     vc[i].nbad_ids, ws) ||
		    add_fields(res, &vc[i], ws))
			return -1;
		add_fcheck(&res->audit, &vc[i].fields);
	}
	return 0;
}

void verify_result_free(struct kb_verify_result *res)
{
	for (size_t i = 0; i < res->nlost_keys; i++)
		free(res->lost_keys[i]);
	for (size_t i = 0; i < res->nbad_keys; i++)
		free(res->bad_keys[i]);
	for (size_t i = 0; i < res->nbad_fields; i++)
		free(res->bad_fields[i]);
	free(res->lost_keys);
	free(res->bad_keys);
	free(res->bad_fields);
	memset(res, 0, sizeof(*res));
}
