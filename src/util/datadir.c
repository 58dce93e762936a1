/* datadir.c: find the data folder at run time (installed, relocated, or a source tree). */
#include "datadir.h"

#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "util/macro.h"

/* How far above the executable or the working folder a source tree may be
 * (build/test/src/cli/einsora is four levels below the tree's root). */
#define SOURCE_TREE_DEPTH 6

static char found_data[PATH_MAX], found_demo[PATH_MAX];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static bool readable(const char *dir, const char *file) {
    char p[PATH_MAX];
    return snprintf(p, sizeof(p), "%s/%s", dir, file) < (int)sizeof(p) && access(p, R_OK) == 0;
}

/* Walk up from start looking for a source tree: meson.build next to data/catalog.yaml. */
static bool find_source_tree(const char *start, char root[PATH_MAX]) {
    char dir[PATH_MAX];
    if (!start || !realpath(start, dir))
        return false;
    for (int i = 0; i < SOURCE_TREE_DEPTH && dir[0]; i++) {
        if (readable(dir, "meson.build") && readable(dir, "data/catalog.yaml")) {
            snprintf(root, PATH_MAX, "%s", dir);
            return true;
        }
        if (STREQ(dir, "/"))
            break;
        char *slash = strrchr(dir, '/');
        if (slash == dir)
            dir[1] = 0;
        else if (slash)
            *slash = 0;
    }
    return false;
}

/* out = a + b; a path that would not fit is left unset (empty) rather than cut short. */
static void set(char *out, const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na + nb >= PATH_MAX) {
        out[0] = 0;
        return;
    }
    memcpy(out, a, na);
    memcpy(out + na, b, nb + 1);
}

static void search(void) {
    const char *env = getenv("EINSORA_DATA_DIR");
    char exe_dir[PATH_MAX] = "", root[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe_dir, sizeof(exe_dir) - 1);
    if (n > 0) {
        exe_dir[n] = 0;
        dirname(exe_dir);
    } else
        exe_dir[0] = 0;
    char relocated[PATH_MAX + 32];
    snprintf(relocated, sizeof(relocated), "%s/../share/einsora", exe_dir);
    if (env && env[0] && readable(env, "catalog.yaml"))
        set(found_data, env, "");
    else if (exe_dir[0] && readable(relocated, "catalog.yaml") && realpath(relocated, root))
        set(found_data, root, "");
    else if (readable(EINSORA_DATADIR, "catalog.yaml"))
        set(found_data, EINSORA_DATADIR, "");
    else if (find_source_tree(exe_dir[0] ? exe_dir : NULL, root) || find_source_tree(".", root)) {
        set(found_data, root, "/data");
        set(found_demo, root, "/tests/fixtures/machines");
        return;
    }
    if (found_data[0] && readable(found_data, "demo/machines/README.md"))
        set(found_demo, found_data, "/demo/machines");
    /* An installed binary run from a source tree (make demo) still finds the fixtures. */
    if (!found_demo[0] && (find_source_tree(".", root) || find_source_tree(exe_dir, root)))
        set(found_demo, root, "/tests/fixtures/machines");
}

const char *data_dir(void) {
    pthread_once(&once, search);
    return found_data[0] ? found_data : NULL;
}

const char *demo_fixtures_dir(void) {
    pthread_once(&once, search);
    return found_demo[0] ? found_demo : NULL;
}
