/* web.h: the dashboard: its embedded files at "/" and the security headers every answer
 * carries. */
#pragma once

#include <stdbool.h>

#include "server/api.h"

/* Answer c when it is a GET of "/" or an embedded file and return true; false leaves c to
 * the API's route table. Also keeps the capacity ring sampled (cap-history.h). The dashboard's
 * API reads, api_whoami and api_capacity_history, are in the route table (api.h). */
bool web_serve(HttpCtx *c);

/* Header name/value pairs for every answer: a strict CSP (no inline script or style, nothing
 * from another origin, no framing), nosniff, no referrer. NULL-terminated. */
extern const char *const web_security_headers[][2];
