/* cmd-token.c: `einsora token create|list|revoke`: API tokens on the server host. A secret
 * is printed once; the state file keeps only its SHA-256. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "output.h"
#include "remote.h"
#include "wire/decode.h"
#include "store/token-admin.h"
#include "token-secret.h"
#include "util/macro.h"
#include "util/sha256.h"
#include "util/strutil.h"
#include "suggest.h"
#include "verbs.h"

static void token_usage(FILE *f) {
    fputs("usage: einsora token create --state FILE --user USER --role ROLE [--nodes A,B]\n"
          "                            [--expires DURATION]\n"
          "       einsora token list --state FILE [--json]\n"
          "       einsora token revoke --state FILE ID\n\n"
          "Create a bearer token for the API and print it once (only its hash is stored), list\n"
          "the tokens, or revoke one by the ID 'list' shows. Run on the server host, with the\n"
          "server's state file; the running server honours a change from its next call on.\n\n"
          "  --state FILE  the server's state file\n"
          "  --user USER   who the token speaks for\n"
          "  --nodes A,B   the nodes an owner owns, or the one node of an agent token\n"
          "  --role ROLE   admin | owner | trusted | user | node\n"
          "                owner: owns the nodes named by --nodes; node: the agent token of the\n"
          "                one node named by --nodes; trusted: a user the site trusts (R9):\n"
          "                its first submit grants USER trust, as `einsora tenant trust USER`\n"
          "                does\n"
          "  --expires D   refuse the token after D: a number with s, m, h or d (e.g. 30d)\n"
          "  --json        print JSON\n"
          "  -h, --help    show this help\n",
          f);
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define TOKEN_ID_LEN 12 /* hex digits of the hash shown as a token's id */

static int list_one(const TokenAdminEntry *t, void *userdata) {
    json_t *list = userdata;
    json_t *j = json_pack("{s:s%, s:s, s:s}", "id", t->hash_hex, (size_t)TOKEN_ID_LEN, "user",
                          t->user, "role", t->role);
    if (!j)
        return -ENOMEM;
    if (t->nodes)
        json_object_set_new(j, "nodes", json_string(t->nodes));
    if (t->expires_ms > 0) {
        json_object_set_new(j, "expires_ms", json_integer(t->expires_ms));
        json_object_set_new(j, "expired", json_boolean(now_ms() >= t->expires_ms));
    }
    return json_array_append_new(list, j) < 0 ? -ENOMEM : 0;
}

static int token_list(const char *state, bool json) {
    json_t *list = json_array();
    Error err = {0};
    int r = list ? token_admin_list(state, list_one, list, &err) : -ENOMEM;
    if (r < 0) {
        json_decref(list);
        return r == -ENOMEM ? fail(EXIT_FAIL, "out of memory") : fail_error(EXIT_FAIL, &err);
    }
    if (json)
        return print_json(json_pack("{s:o}", "tokens", list));
    printf("%-*s  %-20s %-8s %-20s %s\n", TOKEN_ID_LEN, "ID", "USER", "ROLE", "NODES", "EXPIRES");
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t) {
        const char *nodes = json_string_value(json_object_get(t, "nodes"));
        json_t *exp = json_object_get(t, "expires_ms");
        char when[48] = "never";
        if (exp) {
            time_t secs = (time_t)(json_integer_value(exp) / 1000);
            struct tm tm;
            gmtime_r(&secs, &tm);
            strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%SZ", &tm);
            if (json_is_true(json_object_get(t, "expired")))
                strcat(when, " (expired)");
        }
        printf("%-*s  %-20s %-8s %-20s %s\n", TOKEN_ID_LEN,
               json_string_value(json_object_get(t, "id")),
               json_string_value(json_object_get(t, "user")),
               json_string_value(json_object_get(t, "role")), nodes ? nodes : "-", when);
    }
    json_decref(list);
    return EXIT_OK;
}

static int token_revoke(const char *state, const char *id) {
    Error err = {0};
    int r = token_admin_revoke(state, id, &err);
    if (r < 0) {
        return fail_error(r == -EINVAL   ? EXIT_USAGE
                          : r == -ENOENT ? EXIT_NOT_FOUND
                                         : EXIT_FAIL,
                          &err);
    }
    fprintf(stderr, "einsora: token %s revoked\n", id);
    return EXIT_OK;
}

static bool names_valid(const char *list) {
    char buf[512];
    if (strlen(list) >= sizeof(buf))
        return false;
    strcpy(buf, list);
    char *save = NULL;
    size_t n = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), n++)
        if (!wire_name_is_valid(t))
            return false;
    return n > 0;
}

int verb_token(int argc, char **argv) {
    static const struct option options[] = {
            {"state", required_argument, NULL, 's'},   {"user", required_argument, NULL, 'u'},
            {"role", required_argument, NULL, 'r'},    {"nodes", required_argument, NULL, 'n'},
            {"json", no_argument, NULL, 'j'},          {"help", no_argument, NULL, 'h'},
            {"expires", required_argument, NULL, 'e'}, {},
    };
    const char *state = NULL, *user = NULL, *role = NULL, *nodes = NULL, *expires = NULL;
    bool json = false;
    int c;
    while ((c = cli_getopt(argc, argv, "h", options)) >= 0) {
        switch (c) {
        case 's':
            state = optarg;
            break;
        case 'u':
            user = optarg;
            break;
        case 'r':
            role = optarg;
            break;
        case 'n':
            nodes = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'e':
            expires = optarg;
            break;
        case 'h':
            token_usage(stdout);
            return EXIT_OK;
        default:
            token_usage(stderr);
            return EXIT_USAGE;
        }
    }
    const char *sub = optind < argc ? argv[optind++] : NULL;
    bool create = sub && STREQ(sub, "create"), list = sub && STREQ(sub, "list"),
         revoke = sub && STREQ(sub, "revoke");
    const char *id = revoke && optind < argc ? argv[optind++] : NULL;
    if (sub && !create && !list && !revoke) {
        static const char *const subs[] = {"create", "list", "revoke"};
        return cli_unknown_sub("token", sub, subs, ARRAY_SIZE(subs));
    }
    if (!sub || (revoke && !id) || optind < argc) {
        token_usage(stderr);
        return EXIT_USAGE;
    }
    if (!state)
        return fail(EXIT_USAGE, "token %s: --state is required", sub);
    if (list || revoke) {
        if (user || role || nodes || expires)
            return fail(EXIT_USAGE,
                        "token %s: --user, --role, --nodes and --expires are for create", sub);
        return list ? token_list(state, json) : token_revoke(state, id);
    }
    if (!user || !role)
        return fail(EXIT_USAGE, "token create: --state, --user and --role are required");
    int64_t expires_ms = 0;
    if (expires) {
        if (parse_duration_ms(expires, 3650ll * 86400 * 1000, &expires_ms) < 0 || expires_ms == 0)
            return fail(EXIT_USAGE,
                        "token create: --expires takes a duration such as 90s, 15m, 12h "
                        "or 30d (at most ten years)");
        expires_ms += now_ms();
    }
    if (!wire_name_is_valid(user))
        return fail(EXIT_USAGE,
                    "token create: '%s' is not a valid user name (1 to %d of a-z, 0-9, . _ -, "
                    "starting with a letter or digit)",
                    user, WIRE_NAME_MAX - 1);
    if (STREQ(user, "system")) /* events would not tell the user's changes from the queue's */
        return fail(EXIT_USAGE, "token create: 'system' is the name events give the control "
                                "plane's own changes; choose another user name");
    static const char *const roles[] = {"admin", "owner", "trusted", "user", "node"};
    bool ok = false;
    for (size_t i = 0; i < ARRAY_SIZE(roles); i++)
        ok = ok || STREQ(role, roles[i]);
    if (!ok)
        return fail(EXIT_USAGE, "token create: --role must be admin, owner, trusted, user or node");
    if ((STREQ(role, "owner") || STREQ(role, "node")) && !nodes)
        return fail(EXIT_USAGE, "token create: role %s needs --nodes", role);
    if (!STREQ(role, "owner") && !STREQ(role, "node") && nodes)
        return fail(EXIT_USAGE,
                    "token create: --nodes is for the owner and node roles; %s %s token names "
                    "no nodes",
                    STREQ(role, "admin") ? "an" : "a", role);
    if (nodes && !names_valid(nodes))
        return fail(EXIT_USAGE, "token create: --nodes takes node names separated by commas");
    if (STREQ(role, "node") && strchr(nodes, ','))
        return fail(EXIT_USAGE, "token create: a node token speaks for exactly one node");

    char secret[TOKEN_SECRET_SIZE], hash[SHA256_DIGEST_SIZE * 2 + 1];
    if (token_secret_new(secret, hash) < 0)
        return fail(EXIT_FAIL, "cannot get random bytes for the token");

    Error err = {0};
    if (token_admin_create(state, hash, user, role, nodes, expires_ms, &err) < 0)
        return fail_error(EXIT_FAIL, &err);
    if (json) { /* with the id `token revoke` takes, so a script can undo what it made */
        json_t *j = json_pack("{s:s%, s:s, s:s, s:s}", "id", hash, (size_t)TOKEN_ID_LEN, "user",
                              user, "role", role, "token", secret);
        if (j && nodes)
            json_object_set_new(j, "nodes", json_string(nodes));
        if (j && expires_ms > 0)
            json_object_set_new(j, "expires_ms", json_integer(expires_ms));
        return print_json(j);
    }
    printf("%s\n", secret);
    fprintf(stderr, "einsora: token for %s (%s) created; it is shown only this once\n", user, role);
    if (STREQ(role, "trusted"))
        fprintf(stderr,
                "einsora: note: the first request sent with this token grants %s trust (R9); "
                "`einsora tenant untrust %s` withdraws it (revoke this token too, or its next "
                "request grants it again)\n",
                user, user);
    return EXIT_OK;
}
