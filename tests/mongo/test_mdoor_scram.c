/* test_mdoor_scram.c - SCRAM-SHA-256 in the MongoDB door: RFC 7677's test
 * vector for the keys, the proof and the server's signature; then whole
 * conversations through the door's saslStart / saslContinue (and
 * speculativeAuthenticate inside hello) driven by a client written here
 * from RFC 5802 with OpenSSL: right and wrong passwords, user names,
 * skipEmptyExchange or not, the host's guessing limit, other mechanisms,
 * SASLprep's refusal of control characters, logout. */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "mdoortest.h"

size_t mdoor_b64_encode(const uint8_t *p, size_t n, char *out);
long mdoor_b64_decode(const char *s, size_t n, uint8_t *out, size_t cap);
int mdoor_scram_keys(const char *pw, size_t pwlen, const uint8_t *salt,
		     size_t saltlen, unsigned iters, uint8_t *stored_key,
		     uint8_t *server_key);
bool mdoor_scram_verify(const uint8_t *stored_key, const uint8_t *server_key,
			const char *auth_msg, size_t auth_len,
			const uint8_t *proof, uint8_t *server_sig);

#define RFC_NONCE "rOprNGfwEbeRWgbNEkqO"
#define RFC_SNONCE RFC_NONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"

static void test_rfc7677(void)
{
	uint8_t salt[16], stored[32], server[32], proof[32], sig[32];
	char b64[64];
	const char *auth =
	    "n=user,r=" RFC_NONCE ",r=" RFC_SNONCE
	    ",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r=" RFC_SNONCE;

	CHECK(mdoor_b64_decode("W22ZaJ0SNY7soEsUEjb6gQ==", 24, salt, 16) == 16,
	      "salt decodes");
	CHECK(mdoor_scram_keys("pencil", 6, salt, 16, 4096, stored, server) ==
		  0,
	      "keys");
	mdoor_b64_decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=", 44,
			 proof, 32);
	CHECK(
	    mdoor_scram_verify(stored, server, auth, strlen(auth), proof, sig),
	    "RFC 7677's proof holds");
	mdoor_b64_encode(sig, 32, b64);
	CHECK(!strcmp(b64, "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="),
	      "RFC 7677's server signature: %s", b64);
	proof[0] ^= 1;
	CHECK(
	    !mdoor_scram_verify(stored, server, auth, strlen(auth), proof, sig),
	    "a changed proof fails");
	CHECK(mdoor_scram_keys("pen\tcil", 7, salt, 16, 4096, stored, server) ==
		  -1,
	      "a control character is refused (SASLprep)");
	CHECK(mdoor_b64_decode("abc", 3, salt, 16) == -1 &&
		  mdoor_b64_decode("a===", 4, salt, 16) == -1 &&
		  mdoor_b64_decode("YQ==", 4, salt, 16) == 1 && salt[0] == 'a',
	      "base64 edge cases");
}

/* ===================== a client ===================== */

struct client {
	char first_bare[256], server_first[512];
	char nonce[64];
	uint8_t salted[32];
};

static void hmac(const uint8_t *k, size_t kl, const void *m, size_t n,
		 uint8_t *out)
{
	unsigned int l = 32;

	HMAC(EVP_sha256(), k, (int)kl, m, n, out, &l);
}

static bson_t *start_doc(struct client *cl, const char *user, bool skip)
{
	char p[300];
	bson_t *b = bson_new(), o;

	snprintf(cl->nonce, sizeof(cl->nonce), "clientnonce%d", rand());
	snprintf(cl->first_bare, sizeof(cl->first_bare), "n=%s,r=%s", user,
		 cl->nonce);
	snprintf(p, sizeof(p), "n,,%s", cl->first_bare);
	BSON_APPEND_INT32(b, "saslStart", 1);
	BSON_APPEND_UTF8(b, "mechanism", "SCRAM-SHA-256");
	bson_append_binary(b, "payload", -1, BSON_SUBTYPE_BINARY,
			   (const uint8_t *)p, (uint32_t)strlen(p));
	BSON_APPEND_INT32(b, "autoAuthorize", 1);
	if (skip) {
		BSON_APPEND_DOCUMENT_BEGIN(b, "options", &o);
		BSON_APPEND_BOOL(&o, "skipEmptyExchange", true);
		bson_append_document_end(b, &o);
	}
	return b;
}

static const char *payload_of(const bson_t *r, char *buf, size_t n)
{
	bson_iter_t it, f;
	const uint8_t *p;
	uint32_t len = 0;
	bson_subtype_t st;

	buf[0] = '\0';
	if (r && bson_iter_init(&it, r) &&
	    bson_iter_find_descendant(&it, "payload", &f) &&
	    BSON_ITER_HOLDS_BINARY(&f)) {
		bson_iter_binary(&f, &st, &len, &p);
		snprintf(buf, n, "%.*s", (int)len, (const char *)p);
	}
	return buf;
}

/* The client-final for the server-first in r (or its
 * speculativeAuthenticate), with password pw. */
static bson_t *continue_doc(struct client *cl, const char *server_first,
			    const char *pw)
{
	const char *s = strstr(server_first, ",s="),
		   *i = strstr(server_first, ",i=");
	uint8_t salt[64], ck[32], sk[32], sig[32], proof[32];
	char nonce[200], final[512], auth[1024], b64[64];
	long sl;
	bson_t *b = bson_new();

	snprintf(cl->server_first, sizeof(cl->server_first), "%s",
		 server_first);
	snprintf(nonce, sizeof(nonce), "%.*s", (int)(s - server_first - 2),
		 server_first + 2);
	sl = mdoor_b64_decode(s + 3, (size_t)(i - s - 3), salt, sizeof(salt));
	/* mongod's SCRAM-SHA-256 salt: the hash's size less 4, which
	 * libmongoc insists on ("invalid salt length") */
	CHECK(sl == 28, "the salt is %ld bytes, not 28", sl);
	PKCS5_PBKDF2_HMAC(pw, (int)strlen(pw), salt, (int)sl, atoi(i + 3),
			  EVP_sha256(), 32, cl->salted);
	hmac(cl->salted, 32, "Client Key", 10, ck);
	SHA256(ck, 32, sk);
	snprintf(final, sizeof(final), "c=biws,r=%s", nonce);
	snprintf(auth, sizeof(auth), "%s,%s,%s", cl->first_bare, server_first,
		 final);
	hmac(sk, 32, auth, strlen(auth), sig);
	for (int k = 0; k < 32; k++)
		proof[k] = ck[k] ^ sig[k];
	mdoor_b64_encode(proof, 32, b64);
	strcat(final, ",p=");
	strcat(final, b64);
	/* keep the AuthMessage for the server signature check */
	snprintf(cl->first_bare + strlen(cl->first_bare), 1, "%s", "");
	BSON_APPEND_INT32(b, "saslContinue", 1);
	BSON_APPEND_INT32(b, "conversationId", 1);
	bson_append_binary(b, "payload", -1, BSON_SUBTYPE_BINARY,
			   (const uint8_t *) final, (uint32_t)strlen(final));
	return b;
}

/* Is v=... the signature of the AuthMessage cl made? */
static bool server_sig_ok(struct client *cl, const char *final_payload)
{
	uint8_t sk[32], sig[32];
	char auth[1024], nonce[200], b64[64];
	const char *s = strstr(cl->server_first, ",s=");

	snprintf(nonce, sizeof(nonce), "%.*s", (int)(s - cl->server_first - 2),
		 cl->server_first + 2);
	snprintf(auth, sizeof(auth), "%s,%s,c=biws,r=%s", cl->first_bare,
		 cl->server_first, nonce);
	hmac(cl->salted, 32, "Server Key", 10, sk);
	hmac(sk, 32, auth, strlen(auth), sig);
	mdoor_b64_encode(sig, 32, b64);
	return !strncmp(final_payload, "v=", 2) &&
	       !strcmp(final_payload + 2, b64);
}

/* A whole conversation: 1 authenticated, 0 refused. */
static int converse(struct tconn *c, const char *user, const char *pw,
		    bool skip)
{
	struct client cl;
	char buf[512];
	bson_t *r;
	int done;

	r = run_on(c, "admin", start_doc(&cl, user, skip));
	if (ok_of(r) != 1) {
		bson_destroy(r);
		return 0;
	}
	CHECK(int_at(r, "conversationId") == 1, "conversationId");
	CHECK_JSON(r, "done", "{ 'v' : false }");
	payload_of(r, buf, sizeof(buf));
	CHECK(!strncmp(buf, "r=", 2) && strstr(buf, cl.nonce) == buf + 2 &&
		  strstr(buf, ",i=15000"),
	      "server-first %s", buf);
	bson_destroy(r);
	r = run_on(c, "admin", continue_doc(&cl, buf, pw));
	if (ok_of(r) != 1) {
		CHECK_ERR(r, 18, "Authentication failed.");
		bson_destroy(r);
		return 0;
	}
	CHECK(server_sig_ok(&cl, payload_of(r, buf, sizeof(buf))),
	      "server signature %s", buf);
	done = (int)int_at(r, "done");
	CHECK(done == skip, "done %d with skipEmptyExchange %d", done, skip);
	bson_destroy(r);
	if (!skip) {
		CHECK(!mdoor_authed(c->mc), "not yet authenticated");
		bson_t *b = J("{'saslContinue': 1, 'conversationId': 1, "
			      "'payload': {'$binary': {'base64': '', "
			      "'subType': '00'}}}");
		r = run_on(c, "admin", b);
		CHECK(ok_of(r) == 1 && int_at(r, "done") == 1,
		      "empty exchange");
		bson_destroy(r);
	}
	return mdoor_authed(c->mc);
}

static void test_conversations(struct mdoor *d)
{
	struct tconn *c = th_open(d, 1);
	bson_t *r;

	CHECK(!mdoor_authed(c->mc), "unauthenticated at first");
	CHECK(converse(c, "kvd", "pencil", true) == 1 && c->authed == 1,
	      "skipEmptyExchange conversation");
	r = run(c, "{'find': 'c'}");
	CHECK(ok_of(r) == 1, "find after authentication");
	bson_destroy(r);
	r = run(c, "{'connectionStatus': 1}");
	CHECK_JSON(r, "authInfo.authenticatedUsers",
		   "{ 'v' : [ { 'user' : 'kvd', 'db' : 'admin' } ] }");
	bson_destroy(r);
	r = run(c, "{'logout': 1}");
	bson_destroy(r);
	r = run(c, "{'find': 'c'}");
	CHECK_ERR(r, 13, "requires authentication");
	bson_destroy(r);
	th_close_conn(c);

	c = th_open(d, 2);
	CHECK(converse(c, "kvd", "pencil", false) == 1,
	      "conversation with the empty exchange");
	th_close_conn(c);

	c = th_open(d, 3);
	CHECK(converse(c, "kvd", "pencil!", true) == 0 && c->auth_fails == 1,
	      "wrong password refused and reported");
	CHECK(converse(c, "bob", "pencil", true) == 0 && c->auth_fails == 2,
	      "another user refused");
	c->gate_refuse = 1;
	CHECK(converse(c, "kvd", "pencil", true) == 0 && c->auth_fails == 2,
	      "the host's limit refuses before checking");
	th_close_conn(c);
}

static void test_start_errors(struct mdoor *d)
{
	struct tconn *c = th_open(d, 1);
	bson_t *r;

	r = run_on(c, "admin",
		   J("{'saslStart': 1, 'mechanism': 'SCRAM-SHA-1', 'payload': "
		     "'n,,n=kvd,r=abc'}"));
	CHECK_ERR(r, 334, "SCRAM-SHA-1");
	bson_destroy(r);
	r = run_on(c, "admin",
		   J("{'saslStart': 1, 'mechanism': 'SCRAM-SHA-256', "
		     "'payload': 'p=tls-unique,,n=kvd,r=abc'}"));
	CHECK(ok_of(r) == 0, "channel binding refused");
	bson_destroy(r);
	r = run_on(c, "admin",
		   J("{'saslContinue': 1, 'conversationId': 1, 'payload': "
		     "'c=biws'}"));
	CHECK_ERR(r, 17, "No SASL session");
	bson_destroy(r);
	r = run_on(c, "admin",
		   J("{'hello': 1, 'saslSupportedMechs': 'admin.kvd'}"));
	CHECK_JSON(r, "saslSupportedMechs", "{ 'v' : [ 'SCRAM-SHA-256' ] }");
	bson_destroy(r);
	r = run_on(c, "admin",
		   J("{'hello': 1, 'saslSupportedMechs': 'admin.bob'}"));
	CHECK(count_at(r, "saslSupportedMechs") == -1, "unknown user: none");
	bson_destroy(r);
	th_close_conn(c);
}

/* hello carrying saslStart, then one saslContinue. */
static void test_speculative(struct mdoor *d)
{
	struct tconn *c = th_open(d, 1);
	struct client cl;
	bson_t *start = start_doc(&cl, "kvd", true), *h = bson_new(), *r;
	bson_iter_t it, f;
	char sf[512] = "";
	const uint8_t *p;
	uint32_t n = 0;
	bson_subtype_t st;

	BSON_APPEND_INT32(h, "hello", 1);
	BSON_APPEND_UTF8(start, "db", "admin");
	BSON_APPEND_DOCUMENT(h, "speculativeAuthenticate", start);
	r = run_on(c, "admin", h);
	CHECK(ok_of(r) == 1 &&
		  int_at(r, "speculativeAuthenticate.conversationId") == 1,
	      "speculative start answered");
	if (bson_iter_init(&it, r) &&
	    bson_iter_find_descendant(&it, "speculativeAuthenticate.payload",
				      &f)) {
		bson_iter_binary(&f, &st, &n, &p);
		snprintf(sf, sizeof(sf), "%.*s", (int)n, (const char *)p);
	}
	bson_destroy(r);
	bson_destroy(start);
	r = run_on(c, "admin", continue_doc(&cl, sf, "pencil"));
	CHECK(ok_of(r) == 1 && int_at(r, "done") == 1 && mdoor_authed(c->mc),
	      "speculative conversation completes");
	bson_destroy(r);
	th_close_conn(c);
}

int main(void)
{
	struct memstore *ms = memstore_new();
	struct mdoor_config cfg = {.password = "pencil",
				   .password_len = 6,
				   .user = "kvd",
				   .kvd_version = "0.1.0"};
	struct mdoor_config bad = cfg;
	struct mdoor *d;
	char err[256];
	struct mdoor_store st;
	struct mdoor_host h = {0};

	test_rfc7677();
	d = th_door(ms, &cfg);
	test_conversations(d);
	test_start_errors(d);
	test_speculative(d);
	mdoor_free(d);
	{ /* no user configured: any name */
		struct mdoor_config any = cfg;
		struct tconn *c;

		any.user = NULL;
		d = th_door(ms, &any);
		c = th_open(d, 1);
		CHECK(converse(c, "alice", "pencil", true) == 1,
		      "any user name when none is configured");
		th_close_conn(c);
		mdoor_free(d);
	}
	bad.password = "a\001b";
	bad.password_len = 3;
	memstore_ops(ms, &st);
	CHECK(mdoor_new(&bad, &h, &st, err, sizeof(err)) == NULL &&
		  strstr(err, "SASLprep"),
	      "a password with a control character is refused at start");
	memstore_free(ms);
	return mt_done("unit_mdoor_scram");
}
