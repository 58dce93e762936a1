/* wait-progress.h: the one status line a wait on a terminal redraws in place (state, reason,
 * queue position, time until the fallback opens), as a pure function of the request. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* "12s", "4m05s", "1h02m" for a duration in ms (negative counts as 0) into buf. */
const char *wait_format_duration(int64_t ms, char *buf, size_t size);

/* The status line of request q (GET /v1/requests/ID) at wall-clock time now_ms, at most
 * width columns (0: no limit; a cut line ends in "..."), into buf; returns buf. For example
 * "request 7: pending [queue position 2] fallback opens in 1m05s: no free GPU of ...". */
const char *wait_progress_line(json_t *q, int64_t now_ms, size_t width, char *buf, size_t size);
