/* mdoor_auth.c - authentication: MongoDB's SASL conversation (saslStart,
 * saslContinue, and speculativeAuthenticate inside hello) carrying
 * SCRAM-SHA-256 (RFC 7677).
 *
 *   client-first  n,,n=<user>,r=<client nonce>
 *   server-first  r=<client nonce><server nonce>,s=<salt>,i=<iterations>
 *   client-final  c=biws,r=<nonce>,p=<proof>
 *   server-final  v=<server signature>      done: true with
 *                                           options.skipEmptyExchange,
 *                 then an empty exchange otherwise.
 *
 * kvd has one password; the user name is the configured one, or any name
 * when none is configured, in any database ($db, or db in a speculative
 * start).  A name that is not the user's still gets a server-first (so a
 * guesser cannot tell names apart) and fails at the proof.  Before a
 * proof is checked the host may refuse (guessing limits); a wrong proof is
 * counted and reported to the host.  Failures answer 18
 * AuthenticationFailed "Authentication failed.", as mongod does; other
 * mechanisms 334 MechanismUnavailable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "mdoor_int.h"

#define NONCE_MAX 128

struct mdoor_scram {
	int step; /* 1: server-first sent; 2: server-final sent */
	bool skip_empty, known;
	char user[MDOOR_USER_MAX];
	char db[MDOOR_DB_MAX];
	char gs2[64];	      /* the client's GS2 header, "n,," */
	char first_bare[512]; /* client-first-bare */
	char server_first[256];
	char nonce[2 * NONCE_MAX];
};

void mdoor_scram_free(struct mdoor_scram *s)
{
	if (s)
		OPENSSL_cleanse(s, sizeof(*s));
	free(s);
}

static int failed(struct mql_error *err)
{
	return mdoor_err(err, MDOOR_AuthenticationFailed,
			 "Authentication failed.");
}

/* A payload: binData or a string. */
static int payload(const bson_iter_t *it, const char **p, uint32_t *n)
{
	bson_subtype_t st;

	if (BSON_ITER_HOLDS_BINARY(it)) {
		bson_iter_binary(it, &st, n, (const uint8_t **)p);
		return 0;
	}
	if (BSON_ITER_HOLDS_UTF8(it)) {
		*p = bson_iter_utf8(it, n);
		return 0;
	}
	return -1;
}

/* saslname: "=2C" is ',', "=3D" is '=', any other '=' is an error. */
static int sasl_name(const char *s, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '=') {
			if (i + 2 < n && !memcmp(s + i, "=2C", 3))
				c = ',';
			else if (i + 2 < n && !memcmp(s + i, "=3D", 3))
				c = '=';
			else
				return -1;
			i += 2;
		} else if (c == ',' || c == '\0') {
			return -1;
		}
		if (o + 1 >= cap)
			return -1;
		out[o++] = c;
	}
	out[o] = '\0';
	return o ? 0 : -1;
}

/* Parse client-first into s; 0 or -1. */
static int client_first(struct mdoor_scram *s, const char *p, size_t n)
{
	const char *c1, *c2, *user, *nonce, *end = p + n, *e;

	if (n < 3 || (p[0] != 'n' && p[0] != 'y') || p[1] != ',')
		return -1; /* 'p': channel binding, which kvd does not do */
	c1 = p + 1;
	c2 = memchr(c1 + 1, ',', (size_t)(end - c1 - 1));
	if (!c2 || (size_t)(c2 + 1 - p) >= sizeof(s->gs2))
		return -1;
	memcpy(s->gs2, p, (size_t)(c2 + 1 - p));
	s->gs2[c2 + 1 - p] = '\0';
	if ((size_t)(end - (c2 + 1)) >= sizeof(s->first_bare))
		return -1;
	memcpy(s->first_bare, c2 + 1, (size_t)(end - (c2 + 1)));
	s->first_bare[end - (c2 + 1)] = '\0';
	user = c2 + 1;
	if (end - user < 2 || memcmp(user, "n=", 2))
		return -1;
	e = memchr(user, ',', (size_t)(end - user));
	if (!e || sasl_name(user + 2, (size_t)(e - user - 2), s->user,
			    sizeof(s->user)))
		return -1;
	nonce = e + 1;
	if (end - nonce < 3 || memcmp(nonce, "r=", 2))
		return -1;
	e = memchr(nonce, ',', (size_t)(end - nonce));
	if (!e)
		e = end;
	if (e - nonce - 2 > NONCE_MAX || e - nonce - 2 < 1)
		return -1;
	for (const char *q = nonce + 2; q < e; q++)
		if (*q < 0x21 || *q > 0x7e)
			return -1;
	memcpy(s->nonce, nonce + 2, (size_t)(e - nonce - 2));
	s->nonce[e - nonce - 2] = '\0';
	return 0;
}

/* Start a conversation: s filled and the server-first in it.  -1 with err
 * (the mechanism, a malformed message, no password configured). */
static int start(struct mdoor_conn *mc, const char *mech, const char *p,
		 uint32_t n, const char *db, bool skip_empty,
		 struct mdoor_scram **out, struct mql_error *err)
{
	struct mdoor *d = mc->d;
	struct mdoor_scram *s;
	uint8_t rnd[24];
	char snonce[40], salt[44];

	if (strcmp(mech, "SCRAM-SHA-256"))
		return mdoor_err(err, MDOOR_MechanismUnavailable,
				 "Received authentication for mechanism %s "
				 "which is not enabled",
				 mech);
	if (!d->auth) {
		mdoor_log(d, 1,
			  "mongo connection %llu (%s): authentication "
			  "attempted, but kvd has no password",
			  (unsigned long long)mc->id, mc->remote);
		return failed(err);
	}
	s = calloc(1, sizeof(*s));
	if (!s || client_first(s, p, n) || RAND_bytes(rnd, sizeof(rnd)) != 1) {
		mdoor_scram_free(s);
		return mdoor_err(err, MQL_BadValue,
				 "Invalid SCRAM-SHA-256 client-first message");
	}
	s->skip_empty = skip_empty;
	s->known = !d->user || !strcmp(d->user, s->user);
	snprintf(s->db, sizeof(s->db), "%s", db);
	mdoor_b64_encode(rnd, sizeof(rnd), snonce);
	mdoor_b64_encode(d->salt, sizeof(d->salt), salt);
	strcat(s->nonce, snonce);
	snprintf(s->server_first, sizeof(s->server_first), "r=%s,s=%s,i=%u",
		 s->nonce, salt, d->iters);
	s->step = 1;
	*out = s;
	return 0;
}

static void reply_payload(bson_t *out, int done, const char *p)
{
	BSON_APPEND_INT32(out, "conversationId", 1);
	BSON_APPEND_BOOL(out, "done", done);
	bson_append_binary(out, "payload", -1, BSON_SUBTYPE_BINARY,
			   (const uint8_t *)p, (uint32_t)strlen(p));
}

static bool skip_empty_opt(const bson_iter_t *opts)
{
	bson_iter_t it;

	return BSON_ITER_HOLDS_DOCUMENT(opts) && bson_iter_recurse(opts, &it) &&
	       bson_iter_find(&it, "skipEmptyExchange") &&
	       bson_iter_as_bool(&it);
}

/* saslStart and speculativeAuthenticate: fields of the document it. */
static int do_start(struct mdoor_conn *mc, bson_iter_t *it, const char *db,
		    bson_t *out, struct mql_error *err)
{
	const char *mech = NULL, *p = NULL;
	uint32_t n = 0;
	bson_iter_t opts;
	struct mdoor_scram *s = NULL;

	mdoor_absent(&opts);
	while (bson_iter_next(it)) {
		const char *k = bson_iter_key(it);

		if (!strcmp(k, "mechanism") && !BSON_ITER_HOLDS_UTF8(it))
			return mdoor_err(err, MQL_TypeMismatch,
					 "BSON field 'saslStart.mechanism' is "
					 "the wrong type '%s', expected type "
					 "'string'",
					 mql_type_name(bson_iter_type(it)));
		if (!strcmp(k, "mechanism"))
			mech = bson_iter_utf8(it, NULL);
		else if (!strcmp(k, "payload") && payload(it, &p, &n))
			return mdoor_err(err, MQL_TypeMismatch,
					 "payload must be binData or string");
		else if (!strcmp(k, "options"))
			opts = *it;
	}
	if (!mech)
		return mdoor_err(err, MDOOR_IDLFailedToParse,
				 "BSON field 'saslStart.mechanism' is missing "
				 "but a required field");
	if (!p)
		return mdoor_err(err, MDOOR_IDLFailedToParse,
				 "BSON field 'saslStart.payload' is missing "
				 "but a required field");
	if (start(mc, mech, p, n, db, skip_empty_opt(&opts), &s, err))
		return -1;
	mdoor_scram_free(mc->scram);
	mc->scram = s;
	reply_payload(out, false, s->server_first);
	return 0;
}

static int cmd_saslstart(struct mdoor_req *r, struct mql_error *err)
{
	bson_iter_t it;

	mdoor_cmd_value(r, &it);
	return do_start(r->mc, &it, r->db, &r->reply, err);
}

void mdoor_auth_speculative(struct mdoor_req *r, const bson_iter_t *spec,
			    bson_t *out)
{
	bson_iter_t it, dbit;
	const char *db = r->db[0] ? r->db : "admin";
	struct mql_error err;
	bson_t sub;

	if (!bson_iter_recurse(spec, &it))
		return;
	if (bson_iter_recurse(spec, &dbit) && bson_iter_find(&dbit, "db") &&
	    BSON_ITER_HOLDS_UTF8(&dbit))
		db = bson_iter_utf8(&dbit, NULL);
	if (!bson_iter_next(&it) || strcmp(bson_iter_key(&it), "saslStart"))
		return; /* not a SASL start: nothing speculative */
	bson_init(&sub);
	if (do_start(r->mc, &it, db, &sub, &err) == 0)
		BSON_APPEND_DOCUMENT(out, "speculativeAuthenticate", &sub);
	bson_destroy(&sub);
}

/* Check client-final against s; on success write the server-final. */
static int client_final(struct mdoor_conn *mc, struct mdoor_scram *s,
			const char *p, size_t n, char *server_final,
			struct mql_error *err)
{
	struct mdoor *d = mc->d;
	char want_c[128], auth[1024];
	uint8_t proof[64], sig[MDOOR_SCRAM_KEY];
	const char *pp, *end = p + n;
	size_t wl;
	long plen;
	int al;

	wl = mdoor_b64_encode((const uint8_t *)s->gs2, strlen(s->gs2), want_c);
	if (n < 2 + wl + 4 || memcmp(p, "c=", 2) || memcmp(p + 2, want_c, wl) ||
	    memcmp(p + 2 + wl, ",r=", 3) ||
	    (size_t)(end - (p + 5 + wl)) < strlen(s->nonce) ||
	    memcmp(p + 5 + wl, s->nonce, strlen(s->nonce)) ||
	    p[5 + wl + strlen(s->nonce)] != ',')
		return mdoor_err(err, MQL_BadValue,
				 "Invalid SCRAM-SHA-256 client-final message");
	pp = NULL;
	for (const char *q = p; q + 3 <= end; q++)
		if (!memcmp(q, ",p=", 3))
			pp = q;
	if (!pp ||
	    (plen = mdoor_b64_decode(pp + 3, (size_t)(end - pp - 3), proof,
				     sizeof(proof))) != MDOOR_SCRAM_KEY)
		return mdoor_err(err, MQL_BadValue,
				 "Invalid SCRAM-SHA-256 client proof");
	al = snprintf(auth, sizeof(auth), "%s,%s,%.*s", s->first_bare,
		      s->server_first, (int)(pp - p), p);
	if (al < 0 || (size_t)al >= sizeof(auth))
		return failed(err);
	if (d->host.auth_gate && d->host.auth_gate(mc->conn))
		return failed(err);
	if (!s->known || !mdoor_scram_verify(d->stored_key, d->server_key, auth,
					     (size_t)al, proof, sig)) {
		atomic_fetch_add_explicit(&d->c_auth_fail, 1,
					  memory_order_relaxed);
		if (d->host.auth_failed)
			d->host.auth_failed(mc->conn);
		mdoor_log(d, 1,
			  "mongo connection %llu (%s): authentication "
			  "of '%s' failed",
			  (unsigned long long)mc->id, mc->remote, s->user);
		return failed(err);
	}
	memcpy(server_final, "v=", 2);
	mdoor_b64_encode(sig, sizeof(sig), server_final + 2);
	return 0;
}

static void authenticated(struct mdoor_conn *mc, struct mdoor_scram *s)
{
	mc->authed = true;
	snprintf(mc->user, sizeof(mc->user), "%s", s->user);
	snprintf(mc->auth_db, sizeof(mc->auth_db), "%s", s->db);
	if (mc->d->host.authed)
		mc->d->host.authed(mc->conn);
}

/* saslContinue's arguments as mongod's IDL parses them, before any
 * session is looked at: conversationId (a number) and payload required. */
static int continue_args(bson_iter_t *it, const char **p, uint32_t *n,
			 struct mql_error *err)
{
	bool conv = false;

	while (bson_iter_next(it)) {
		const char *k = bson_iter_key(it);

		if (!strcmp(k, "payload") && payload(it, p, n))
			return mdoor_err(err, MQL_TypeMismatch,
					 "payload must be binData or string");
		if (!strcmp(k, "conversationId")) {
			if (!BSON_ITER_HOLDS_NUMBER(it))
				return mdoor_err(
				    err, MQL_TypeMismatch,
				    "BSON field 'saslContinue.conversationId' "
				    "is the wrong type '%s', expected type "
				    "'int'",
				    mql_type_name(bson_iter_type(it)));
			conv = true;
		}
	}
	if (!conv || !*p)
		return mdoor_err(err, MDOOR_IDLFailedToParse,
				 "BSON field 'saslContinue.%s' is missing but "
				 "a required field",
				 conv ? "payload" : "conversationId");
	return 0;
}

static int cmd_saslcontinue(struct mdoor_req *r, struct mql_error *err)
{
	struct mdoor_conn *mc = r->mc;
	struct mdoor_scram *s = mc->scram;
	bson_iter_t it;
	const char *p = NULL;
	uint32_t n = 0;
	char final[64];
	int rc;

	mdoor_cmd_value(r, &it);
	if (continue_args(&it, &p, &n, err))
		return -1;
	if (!s) {
		mdoor_scram_free(s);
		mc->scram = NULL;
		return mdoor_err(err, MDOOR_ProtocolError,
				 "No SASL session state found");
	}
	if (s->step == 2) { /* the empty exchange after the server-final */
		mc->scram = NULL;
		rc = n ? failed(err) : 0;
		if (!rc) {
			authenticated(mc, s);
			reply_payload(&r->reply, true, "");
		}
		mdoor_scram_free(s);
		return rc;
	}
	if (client_final(mc, s, p, n, final, err)) {
		mdoor_scram_free(s);
		mc->scram = NULL;
		return -1;
	}
	if (s->skip_empty) {
		authenticated(mc, s);
		mdoor_scram_free(s);
		mc->scram = NULL;
		reply_payload(&r->reply, true, final);
		return 0;
	}
	s->step = 2;
	reply_payload(&r->reply, false, final);
	return 0;
}

const struct mdoor_cmd mdoor_cmds_auth[] = {
    {"saslStart", cmd_saslstart, MDOOR_CMD_NOAUTH, MDOOR_CNT_COMMAND},
    {"saslContinue", cmd_saslcontinue, MDOOR_CMD_NOAUTH, MDOOR_CNT_COMMAND},
    {NULL, NULL, 0, 0},
};
