/* remote.c: API verbs' shared plumbing. */
#include "remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "verbs.h"

void remote_defaults(RemoteOpts *o) {
    if (!o->server)
        o->server = getenv("EINSORA_SERVER");
    if (!o->server || !o->server[0])
        o->server = "http://127.0.0.1:7780";
    if (!o->token)
        o->token = getenv("EINSORA_TOKEN");
}

const char *remote_add_server(const char *servers, const char *arg) {
    /* The replicas of one control plane, tried in turn (client.c); one process parses one
     * command line, so one buffer serves. */
    static char joined[4096];
    if (servers == joined && strlen(joined) + 1 + strlen(arg) < sizeof(joined)) {
        strcat(joined, ",");
        strcat(joined, arg);
        return joined;
    }
    if (!servers && strlen(arg) < sizeof(joined)) {
        strcpy(joined, arg);
        return joined;
    }
    return arg;
}

bool remote_option(RemoteOpts *o, int c, const char *arg) {
    switch (c) {
    case 0x100:
        o->server = remote_add_server(o->server, arg);
        return true;
    case 0x101:
        o->token = arg;
        return true;
    case 0x102:
        o->json = true;
        return true;
    default:
        return false;
    }
}

int remote_open(const RemoteOpts *o, Client **ret) {
    Error err = {0};
    if (client_new(o->server, o->token, ret, &err) < 0)
        return fail_error(err.code == -EINVAL ? EXIT_USAGE : EXIT_FAIL, &err);
    return EXIT_OK;
}

int remote_call_on(Client *cl, const char *method, const char *path, json_t *body,
                   const char *idem_key, json_t **ret) {
    Error err = {0};
    long status = 0;
    json_t *answer = NULL;
    if (client_call(cl, method, path, body, idem_key, &status, &answer, &err) < 0)
        return fail_error(err.code == -EINVAL ? EXIT_USAGE : EXIT_UNREACHABLE, &err);
    if (status >= 200 && status < 300) {
        if (ret)
            *ret = answer ? answer : json_object();
        else
            json_decref(answer);
        return EXIT_OK;
    }
    const char *msg = json_string_value(json_object_get(answer, "message"));
    int code = status == 401 || status == 403 ? EXIT_DENIED : status == 404 ? EXIT_NOT_FOUND : EXIT_FAIL;
    fail(code, "%s (HTTP %ld)", msg ? msg : "the server answered with an error", status);
    json_decref(answer);
    return code;
}

int remote_call(const RemoteOpts *o, const char *method, const char *path, json_t *body,
                const char *idem_key, json_t **ret) {
    Client *cl = NULL;
    int r = remote_open(o, &cl);
    if (r != EXIT_OK)
        return r;
    r = remote_call_on(cl, method, path, body, idem_key, ret);
    client_free(cl);
    return r;
}

const char *json_str(json_t *obj, const char *key) {
    return json_string_value(json_object_get(obj, key));
}

const char *json_int_str(json_t *obj, const char *key, char *buf, size_t size) {
    json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v))
        return "-";
    snprintf(buf, size, "%lld", (long long)json_integer_value(v));
    return buf;
}

int remote_getopt(int argc, char **argv, const struct option *extra, RemoteExtraFn on_extra,
                  void *userdata, RemoteOpts *o, const char *usage) {
    struct option all[24] = {REMOTE_OPTIONS, {"help", no_argument, NULL, 'h'}};
    size_t n = 4;
    for (size_t i = 0; extra && extra[i].name && n < 22; i++)
        all[n++] = extra[i];
    all[n] = (struct option){0};
    int c;
    while ((c = getopt_long(argc, argv, "h", all, NULL)) >= 0) {
        if (remote_option(o, c, optarg))
            continue;
        if (c == 'h') {
            fputs(usage, stdout);
            fputs(REMOTE_HELP, stdout);
            return EXIT_OK;
        }
        if (c == '?' || !on_extra) {
            fputs(usage, stderr);
            return EXIT_USAGE;
        }
        int r = on_extra(c, optarg, userdata);
        if (r != 0)
            return r;
    }
    remote_defaults(o);
    return -1;
}
