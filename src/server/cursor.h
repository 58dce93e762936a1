/* cursor.h: the opaque paging cursor of GET /v1/requests (`next`, given back as `after`):
 * a position bound to the list it came from, so that a cursor edited by hand or taken from
 * another list (another filter) is refused with a sentence instead of silently listing
 * something else. Clients keep it as a string and never read into it. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* base64url (no padding) of 12 bytes: the position and a 4-byte check. */
#define CURSOR_TEXT_SIZE 17

/* The cursor for position `after` in the list named by scope (e.g. "requests?state=&node=")
 * into buf (at least CURSOR_TEXT_SIZE bytes). */
void cursor_encode(uint64_t after, const char *scope, char buf[CURSOR_TEXT_SIZE]);
/* The position of cursor text for the list scope; -EINVAL with a sentence when text is not a
 * cursor of that list (malformed, tampered with, or another list's). */
int cursor_decode(const char *text, const char *scope, uint64_t *ret, Error *err);
