/* remote.c: API verbs' shared plumbing. */
#include "remote.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "suggest.h"
#include "util/strutil.h"
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
    case 0x103:
        o->context = arg;
        return true;
    default:
        return false;
    }
}

int remote_open(const RemoteOpts *o, Client **ret) {
    Error err = {0};
    if (client_new(o->server, o->token, ret, &err) < 0)
        return fail_error(err.code == -EINVAL ? EXIT_USAGE : EXIT_FAIL, &err);
    /* A bearer token read off the wire is the account: said, not refused (a TLS proxy's
     * plain side, a lab network someone chose). */
    const char *clear = o->token && o->token[0] ? client_clear_server(*ret) : NULL;
    if (clear)
        fprintf(stderr,
                "einsora: warning: the token goes in clear to %s (plain http to another machine); "
                "give its https:// URL\n",
                clear);
    /* A control plane with its own CA (einsora serve --tls-cert). */
    const char *ca = getenv("EINSORA_CACERT");
    if (ca && ca[0] && client_set_ca_file(*ret, ca, &err) < 0) {
        client_free(*ret);
        *ret = NULL;
        return fail_error(EXIT_FAIL, &err);
    }
    return EXIT_OK;
}

int remote_exit_code(long status) {
    switch (status) {
    case 400: /* the server found the arguments wrong: still a usage error */
    case 422:
        return EXIT_USAGE;
    case 401:
    case 403:
        return EXIT_DENIED;
    case 404:
        return EXIT_NOT_FOUND;
    case 408:
    case 504:
        return EXIT_TIMEOUT;
    default:
        return EXIT_FAIL;
    }
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
    int code = remote_exit_code(status);
    if (status == 401)
        /* Say what to run, not which header to send. */
        fail(code,
             "%s (HTTP 401): log in with `einsora login --server URL --token-file FILE` "
             "(an admin makes tokens with `einsora token create` on the server host)",
             msg ? msg : "the server does not know this token");
    else
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
    size_t n = 5;
    for (size_t i = 0; extra && extra[i].name && n < 22; i++)
        all[n++] = extra[i];
    all[n] = (struct option){0};
    /* -o is short for --output on the list verbs (listing.h), with their formats; every
     * other verb takes `-o json` too, as kubectl users type it, for --json. */
    bool list_o = false;
    for (size_t i = 0; i < n; i++)
        list_o = list_o || all[i].val == 'o';
    if (!list_o && n < 23)
        all[n++] = (struct option){"output", required_argument, NULL, 'o'};
    all[n] = (struct option){0};
    int c;
    while ((c = cli_getopt(argc, argv, "ho:", all)) >= 0) {
        if (c == 0x100 && isempty(optarg))
            return fail(EXIT_USAGE, "--server needs a URL, e.g. http://HOST:7780");
        if (remote_option(o, c, optarg))
            continue;
        if (c == 'o' && !list_o) {
            int r = output_one_object(optarg, &o->json);
            if (r != 0)
                return r;
            continue;
        }
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
    int r = remote_apply_context(o);
    if (r != EXIT_OK)
        return r;
    remote_defaults(o);
    return -1;
}
