/* kv_status.c - names and texts for the shared status table (kv_status.h). */
#include "kv_status.h"

const char *kv_status_name(int status)
{
	if (status < 0)
		status = -status;
	switch (status) {
#define KV_STATUS_NAME(name, num, text)                                        \
	case num: return #name;
		KV_STATUS_LIST(KV_STATUS_NAME)
#undef KV_STATUS_NAME
	}
	return 0;
}

const char *kv_status_text(int status)
{
	if (status < 0)
		status = -status;
	switch (status) {
#define KV_STATUS_TEXT(name, num, text)                                        \
	case num: return text;
		KV_STATUS_LIST(KV_STATUS_TEXT)
#undef KV_STATUS_TEXT
	}
	return "unknown status";
}
