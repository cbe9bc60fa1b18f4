/* target.h - the server kvbench connects to and the password it sends:
 * -u URL, -a PASSWORD, --askpass and KVCLI_AUTH, resolved once the options
 * are read (target.c). */
#ifndef KB_TARGET_H
#define KB_TARGET_H

#include <stddef.h>

#include "kvbench.h"

/* Apply c->url_arg, c->password_arg, c->askpass and KVCLI_AUTH to
 * c->target; as in kvcli, -a wins, then --askpass, then the URL's
 * password, then the environment.  Overwrites the password's text in argv.  0, or -1 with
 * the reason in err. */
int target_apply(struct kb_config *c, char *err, size_t errlen);

/* Wipe and free what target_apply allocated. */
void target_free(struct kb_config *c);

#endif
