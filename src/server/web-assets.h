/* web-assets.h: the dashboard's files, embedded at build time (scripts/embed-web.sh). */
#pragma once

#include <stddef.h>

typedef struct WebAsset {
    const char *path;          /* "/index.html" */
    const char *content_type;  /* with charset for text */
    const unsigned char *data; /* NUL-terminated: size bytes, then 0 */
    size_t size;
} WebAsset;

extern const WebAsset web_assets[];
extern const size_t web_n_assets;
