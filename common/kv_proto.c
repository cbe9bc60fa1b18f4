/* kv_proto.c - opcode names for logs, STATS and the tools. */
#include "kv_proto.h"

const char *kv_op_name(unsigned op)
{
	switch (op) {
#define KV_OP_NAME(name, num, kind)                                            \
	case num: return #name;
		KV_OP_LIST(KV_OP_NAME)
#undef KV_OP_NAME
	}
	return 0;
}
