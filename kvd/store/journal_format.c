/* journal_format.c - the journal's on-disk format in code: segment
 * headers, the framing and checking of records, the key-value payload,
 * and the names of the errors (docs/journal-format.md is the format;
 * journal_int.h its constants and byte helpers). */
#include "journal_int.h"

const char *kvj_strerror(int err)
{
	if (err == -EBADMSG)
		return "journal corrupt";
	if (err == -E2BIG)
		return "journal record larger than a segment";
	return strerror(err < 0 ? -err : err);
}

/* ---- segment headers ------------------------------------------------- */

void jn_hdr_encode(const struct kvj *j, uint64_t first, uint64_t size,
		   unsigned char h[SEG_HDR])
{
	memset(h, 0, SEG_HDR);
	put32(h + 4, MAGIC);
	h[8] = VERSION;
	h[10] = SEG_HDR;
	put32(h + 12, j->o.shard_id);
	put64(h + 16, j->id);
	put64(h + 24, first);
	put64(h + 32, size);
	put32(h, sum32(h + 4, SEG_HDR - 4, 0));
}

/* Check a segment header against its name and this journal. */
int jn_hdr_check(struct kvj *j, const unsigned char *h, uint64_t first,
		 uint64_t size, int first_seen)
{
	if (get32(h) != sum32(h + 4, SEG_HDR - 4, 0) || get32(h + 4) != MAGIC)
		return -EBADMSG;
	if (h[8] != VERSION || h[9] != 0 || h[10] != SEG_HDR || h[11] != 0)
		return -EBADMSG;
	if (get32(h + 12) != j->o.shard_id || get64(h + 24) != first ||
	    get64(h + 32) != size)
		return -EBADMSG;
	if (first_seen)
		j->id = get64(h + 16);
	else if (get64(h + 16) != j->id)
		return -EBADMSG;
	return 0;
}

/* ---- records ------------------------------------------------------------ */

/* Frame one record in place; the payload is already at p + REC_HDR. */
void jn_frame(unsigned char *p, uint64_t ext, uint32_t len, uint64_t lsn,
	      uint64_t synced, uint8_t type, uint64_t seed)
{
	put32(p + 4, len);
	put64(p + 8, lsn);
	put64(p + 16, synced);
	p[24] = type;
	memset(p + REC_HDR + len, 0, ext - REC_HDR - len);
	put32(p, sum32(p + 4, ext - 4, seed));
}

/* Is there a whole record with a good checksum at off? */
int jn_rec_ok(const unsigned char *m, uint64_t size, uint64_t off,
	      uint64_t seed, struct view *v)
{
	const unsigned char *p = m + off;

	if (off + REC_HDR > size)
		return 0;
	v->len = get32(p + 4);
	v->ext = rec_extent(v->len);
	if (v->len > size || v->ext > size - off)
		return 0;
	v->lsn = get64(p + 8);
	v->synced = get64(p + 16);
	v->type = p[24];
	return get32(p) == sum32(p + 4, v->ext - 4, seed);
}

/* ---- key-value records ------------------------------------------------- */

/* A value of a type other than 0 takes the typed record, whose header
 * holds one byte more, and a key of a keyspace other than 0 the keyspace
 * record, two more: a journal of keyspace 0's plain values is what it
 * always was. */
static size_t rec_hdr(const struct kvj_rec *r)
{
	if (r->ks && r->type != KVJ_FLUSHALL)
		return KVJ_REC_HDR + 2;
	return r->type == KVJ_PUT && r->vtype ? KVJ_REC_HDR + 1 : KVJ_REC_HDR;
}

uint8_t jn_rec_type(const struct kvj_rec *r)
{
	if (r->ks && r->type != KVJ_FLUSHALL)
		return r->type == KVJ_PUT ? KVJ_PUT_KS : KVJ_DEL_KS;
	return r->type == KVJ_PUT && r->vtype ? KVJ_PUT_TYPED : r->type;
}

size_t kvj_rec_size(const struct kvj_rec *r)
{
	return rec_hdr(r) + (size_t)r->klen + r->vlen;
}

int kvj_rec_encode(const struct kvj_rec *r, void *buf, size_t cap)
{
	unsigned char *p = buf;
	size_t n = kvj_rec_size(r), h = rec_hdr(r);

	if (n > cap || n > INT32_MAX)
		return -ENOBUFS;
	put32(p, r->klen);
	put32(p + 4, r->vlen);
	put64(p + 8, r->expiry_ms);
	if (h == KVJ_REC_HDR + 1) {
		p[KVJ_REC_HDR] = r->vtype;
	} else if (h == KVJ_REC_HDR + 2) {
		p[KVJ_REC_HDR] = r->ks;
		p[KVJ_REC_HDR + 1] = r->type == KVJ_PUT ? r->vtype : 0;
	}
	if (r->klen)
		memcpy(p + h, r->key, r->klen);
	if (r->vlen)
		memcpy(p + h + r->klen, r->val, r->vlen);
	return (int)n;
}

/* The header's length for a record of wire type type. */
static size_t hdr_of(uint8_t type)
{
	if (type == KVJ_PUT_KS || type == KVJ_DEL_KS)
		return KVJ_REC_HDR + 2;
	return type == KVJ_PUT_TYPED ? KVJ_REC_HDR + 1 : KVJ_REC_HDR;
}

int kvj_rec_decode(uint8_t type, const void *payload, uint32_t len,
		   struct kvj_rec *r)
{
	const unsigned char *p = payload;
	size_t h = hdr_of(type);

	if (type < KVJ_PUT || type > KVJ_DEL_KS || len < h)
		return -EBADMSG;
	r->type = type == KVJ_PUT_TYPED || type == KVJ_PUT_KS ? KVJ_PUT
		  : type == KVJ_DEL_KS			      ? KVJ_DEL
							      : type;
	r->vtype = type == KVJ_PUT_TYPED ? p[KVJ_REC_HDR]
		   : type == KVJ_PUT_KS	 ? p[KVJ_REC_HDR + 1]
					 : 0;
	r->ks = h == KVJ_REC_HDR + 2 ? p[KVJ_REC_HDR] : 0;
	r->klen = get32(p);
	r->vlen = get32(p + 4);
	r->expiry_ms = get64(p + 8);
	if ((uint64_t)h + r->klen + r->vlen != len)
		return -EBADMSG;
	if (r->type != KVJ_PUT && r->vlen != 0)
		return -EBADMSG;
	/* type 0 is the plain record's, keyspace 0 the plain records': a
	 * typed or keyspace record never holds it */
	if (type == KVJ_PUT_TYPED && !r->vtype)
		return -EBADMSG;
	if (h == KVJ_REC_HDR + 2 &&
	    (!r->ks || (type == KVJ_DEL_KS && p[KVJ_REC_HDR + 1])))
		return -EBADMSG;
	r->key = p + h;
	r->val = p + h + r->klen;
	return 0;
}
