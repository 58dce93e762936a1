/* fuzz-router.c: libFuzzer target for the API router: "METHOD PATH" in, a match, a 404 or a
 * 405 out (or a 400 for a parameter that is not a name), never a crash, and a match's
 * parameters are non-empty segments of the path. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/api.h"
#include "server/router.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char buf[1024];
    if (size >= sizeof(buf))
        return 0;
    memcpy(buf, data, size);
    buf[size] = 0;
    char *path = strchr(buf, ' ');
    if (!path)
        return 0;
    *path++ = 0;
    RouteMatch m;
    int r = router_match(api_routes, api_n_routes, buf, path, &m);
    if (r == 0) {
        if (!m.route || strcmp(m.route->method, buf) != 0)
            abort();
        for (size_t i = 0; i < m.n_params; i++)
            if (!m.params[i][0] || !strstr(path, m.params[i]))
                abort();
    } else if (r == -EINVAL) { /* a route of this method whose parameter is not a name */
        if (!m.route || strcmp(m.route->method, buf) != 0 || m.bad_param < 0 ||
            (size_t)m.bad_param >= m.n_params || !m.params[m.bad_param][0])
            abort();
    } else if (r == -EOPNOTSUPP) {
        if (!m.allowed[0])
            abort();
    } else if (r != -ENOENT)
        abort();
    return 0;
}
