/* mdoor_scram.c - the cryptography of SCRAM-SHA-256 (RFC 5802, RFC 7677)
 * with OpenSSL: the server's keys of a password (PBKDF2-HMAC-SHA-256,
 * HMAC, SHA-256), the check of a client's proof in constant time, the
 * server's signature, and base64.  The conversation itself is
 * mdoor_auth.c's.
 *
 * SASLprep (RFC 4013) is applied as far as ASCII goes: an ASCII password
 * is its own SASLprep form unless it holds a control character, which
 * SASLprep forbids (and which clients would refuse to send), so such a
 * password is refused at start.  A password with bytes past ASCII is used
 * as given: it must already be in the form SASLprep gives (NFKC, no
 * mapped characters), as a client sends it after its own SASLprep.
 */
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "mdoor_int.h"

static void hmac(const uint8_t *key, size_t klen, const void *msg, size_t n,
		 uint8_t *out)
{
	unsigned int len = MDOOR_SCRAM_KEY;

	HMAC(EVP_sha256(), key, (int)klen, msg, n, out, &len);
}

static bool ascii_ok(const char *pw, size_t n)
{
	bool ascii = true;

	for (size_t i = 0; i < n; i++)
		if ((unsigned char)pw[i] >= 0x80)
			ascii = false;
	if (!ascii)
		return true;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)pw[i] < 0x20 || pw[i] == 0x7f)
			return false;
	return true;
}

int mdoor_scram_keys(const char *pw, size_t pwlen, const uint8_t *salt,
		     size_t saltlen, unsigned iters, uint8_t *stored_key,
		     uint8_t *server_key)
{
	uint8_t salted[MDOOR_SCRAM_KEY], client_key[MDOOR_SCRAM_KEY];

	if (!ascii_ok(pw, pwlen))
		return -1;
	if (PKCS5_PBKDF2_HMAC(pw, (int)pwlen, salt, (int)saltlen, (int)iters,
			      EVP_sha256(), sizeof(salted), salted) != 1)
		return -1;
	hmac(salted, sizeof(salted), "Client Key", 10, client_key);
	SHA256(client_key, sizeof(client_key), stored_key);
	hmac(salted, sizeof(salted), "Server Key", 10, server_key);
	OPENSSL_cleanse(salted, sizeof(salted));
	OPENSSL_cleanse(client_key, sizeof(client_key));
	return 0;
}

bool mdoor_scram_verify(const uint8_t *stored_key, const uint8_t *server_key,
			const char *auth_msg, size_t auth_len,
			const uint8_t *proof, uint8_t *server_sig)
{
	uint8_t sig[MDOOR_SCRAM_KEY], key[MDOOR_SCRAM_KEY];
	uint8_t stored[MDOOR_SCRAM_KEY];
	bool ok;

	/* ClientKey = ClientProof XOR HMAC(StoredKey, AuthMessage); the
	 * proof holds when H(ClientKey) is the StoredKey. */
	hmac(stored_key, MDOOR_SCRAM_KEY, auth_msg, auth_len, sig);
	for (int i = 0; i < MDOOR_SCRAM_KEY; i++)
		key[i] = proof[i] ^ sig[i];
	SHA256(key, sizeof(key), stored);
	ok = CRYPTO_memcmp(stored, stored_key, MDOOR_SCRAM_KEY) == 0;
	if (ok)
		hmac(server_key, MDOOR_SCRAM_KEY, auth_msg, auth_len,
		     server_sig);
	OPENSSL_cleanse(key, sizeof(key));
	return ok;
}

/* ===================== base64 ===================== */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t mdoor_b64_encode(const uint8_t *p, size_t n, char *out)
{
	size_t o = 0, i;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v =
		    (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];

		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = b64[(v >> 6) & 63];
		out[o++] = b64[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

static int b64_val(char c)
{
	const char *q = c ? strchr(b64, c) : NULL;

	return q ? (int)(q - b64) : -1;
}

long mdoor_b64_decode(const char *s, size_t n, uint8_t *out, size_t cap)
{
	size_t o = 0;

	if (n % 4)
		return -1;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		int pad = 0;

		for (int k = 0; k < 4; k++) {
			if (s[i + k] == '=' && i + 4 == n && k >= 2) {
				v[k] = 0;
				pad++;
			} else if (pad || (v[k] = b64_val(s[i + k])) < 0) {
				return -1;
			}
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
			     (uint32_t)v[2] << 6 | (uint32_t)v[3];
		if (o + 3 - (size_t)pad > cap)
			return -1;
		out[o++] = (uint8_t)(w >> 16);
		if (pad < 2)
			out[o++] = (uint8_t)(w >> 8);
		if (pad < 1)
			out[o++] = (uint8_t)w;
	}
	return (long)o;
}
