/* error.c - MongoDB error codes and their names (mql_error.h). */
#include <stdio.h>
#include <string.h>

#include "mql_error.h"

const char *mql_codename(int code, char *buf)
{
	switch (code) {
#define MQL_X(num, name)                                                       \
	case num: return #name;
		MQL_ERROR_CODES(MQL_X)
#undef MQL_X
	case 0: return "OK";
	default: break;
	}
	snprintf(buf, MQL_CODENAME_MAX, "Location%d", code);
	return buf;
}

int mql_error_vset(struct mql_error *err, int code, const char *fmt, va_list ap)
{
	char buf[MQL_CODENAME_MAX];
	const char *name;

	if (!err)
		return -1;
	err->code = code;
	name = mql_codename(code, buf);
	snprintf(err->codename, sizeof(err->codename), "%s", name);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	return -1;
}

int mql_error_set(struct mql_error *err, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	mql_error_vset(err, code, fmt, ap);
	va_end(ap);
	return -1;
}

void mql_error_clear(struct mql_error *err)
{
	if (!err)
		return;
	err->code = 0;
	err->codename[0] = '\0';
	err->msg[0] = '\0';
}
