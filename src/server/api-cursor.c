/* api-cursor.c: a paged list's `after` query parameter and `next` field as opaque cursors
 * (cursor.h), bound to the list's filters. */
#include <stdio.h>

#include "api.h"
#include "cursor.h"

void api_list_scope(char *buf, size_t size, const char *list, const char *state, const char *node) {
    /* A filter longer than the buffer only makes two such lists share a scope: harmless. */
    snprintf(buf, size, "%s?state=%s&node=%s", list, state ? state : "", node ? node : "");
}

bool api_query_cursor(HttpCtx *c, const char *scope, uint64_t *ret) {
    const char *v = api_query(c, "after");
    if (!v) {
        *ret = 0;
        return true;
    }
    Error err = {0};
    if (cursor_decode(v, scope, ret, &err) < 0) {
        api_error(c, 400, "bad_request", "Query parameter 'after' %s.", error_message(&err));
        return false;
    }
    return true;
}

void api_set_next(json_t *doc, const char *scope, bool more, uint64_t after) {
    if (!more)
        return; /* the last page: no cursor, so a client knows it has everything */
    char text[CURSOR_TEXT_SIZE];
    cursor_encode(after, scope, text);
    json_object_set_new(doc, "next", json_string(text));
}
