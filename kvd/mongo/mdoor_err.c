/* mdoor_err.c - the door's errors: MongoDB's code names for the codes the
 * door raises (mql_error.h knows the language library's), and the error
 * document every failed command answers, {ok: 0.0, errmsg, code,
 * codeName}, as mongod writes it. */
#include <stdarg.h>
#include <stdio.h>

#include "mdoor_int.h"

static const struct {
	int code;
	const char *name;
} names[] = {
    {MDOOR_NoSuchKey, "NoSuchKey"},
    {MDOOR_Unauthorized, "Unauthorized"},
    {MDOOR_ProtocolError, "ProtocolError"},
    {MDOOR_AuthenticationFailed, "AuthenticationFailed"},
    {MDOOR_IllegalOperation, "IllegalOperation"},
    {MDOOR_NamespaceNotFound, "NamespaceNotFound"},
    {MDOOR_CursorNotFound, "CursorNotFound"},
    {MDOOR_NamespaceExists, "NamespaceExists"},
    {MDOOR_CommandNotFound, "CommandNotFound"},
    {MDOOR_InvalidOptions, "InvalidOptions"},
    {MDOOR_InvalidNamespace, "InvalidNamespace"},
    {MDOOR_CursorInUse, "CursorInUse"},
    {MDOOR_ExceededMemoryLimit, "ExceededMemoryLimit"},
    {MDOOR_IllegalOpMsgFlag, "IllegalOpMsgFlag"},
    {MDOOR_CursorKilled, "CursorKilled"},
    {MDOOR_ChecksumMismatch, "ChecksumMismatch"},
    {MDOOR_APIVersionError, "APIVersionError"},
    {MDOOR_MechanismUnavailable, "MechanismUnavailable"},
    {MDOOR_UnsupportedOpQueryCommand, "UnsupportedOpQueryCommand"},
    {MDOOR_DuplicateKey, "DuplicateKey"},
    {MDOOR_IDLDuplicateField, "IDLDuplicateField"},
    {MDOOR_IDLFailedToParse, "IDLFailedToParse"},
    {MDOOR_IDLUnknownField, "IDLUnknownField"},
};

int mdoor_err(struct mql_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -1;
	va_start(ap, fmt);
	mql_error_vset(err, code, fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].code == code)
			snprintf(err->codename, sizeof(err->codename), "%s",
				 names[i].name);
	return -1;
}

void mdoor_error_doc(bson_t *out, const struct mql_error *err)
{
	char buf[MQL_CODENAME_MAX];
	const char *name =
	    err->codename[0] ? err->codename : mql_codename(err->code, buf);

	BSON_APPEND_DOUBLE(out, "ok", 0.0);
	BSON_APPEND_UTF8(out, "errmsg", err->msg);
	BSON_APPEND_INT32(out, "code", err->code);
	BSON_APPEND_UTF8(out, "codeName", name);
}
