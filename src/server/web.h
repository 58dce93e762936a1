/* web.h: the dashboard: its embedded files at "/", the two small reads it needs beyond the
 * API (who am I, capacity over time), and the security headers every answer carries. */
#pragma once

#include <stdbool.h>

#include "server/api.h"

/* Answer c when it is for the dashboard (GET of "/" or an embedded file, GET /v1/whoami,
 * GET /v1/capacity/history) and return true; false leaves c to the API's route table.
 * Also keeps the capacity ring sampled (history.h). */
bool web_serve(HttpCtx *c);

/* Header name/value pairs for every answer: a strict CSP (no inline script or style, nothing
 * from another origin, no framing), nosniff, no referrer. NULL-terminated. */
extern const char *const web_security_headers[][2];
