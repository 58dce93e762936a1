/* cmd-token.c: `einsora token create`: make an API token on the server host. The secret is
 * printed once; the state file keeps only its SHA-256. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "output.h"
#include "server/spec.h"
#include "store/store.h"
#include "token-secret.h"
#include "util/macro.h"
#include "util/sha256.h"
#include "verbs.h"

static void token_usage(FILE *f) {
    fputs("usage: einsora token create --state FILE --user USER --role ROLE [--nodes A,B]\n\n"
          "Create a bearer token for the API and print it once (only its hash is stored).\n"
          "Run on the server host, with the server's state file.\n\n"
          "  --role ROLE   admin | owner | trusted | user | node\n"
          "                owner: owns the nodes named by --nodes; node: the agent token of the\n"
          "                one node named by --nodes\n"
          "  --json        print {\"user\", \"role\", \"token\"}\n",
          f);
}

static bool names_valid(const char *list) {
    char buf[512];
    if (strlen(list) >= sizeof(buf))
        return false;
    strcpy(buf, list);
    char *save = NULL;
    size_t n = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), n++)
        if (!spec_name_is_valid(t))
            return false;
    return n > 0;
}

int verb_token(int argc, char **argv) {
    static const struct option options[] = {
            {"state", required_argument, NULL, 's'}, {"user", required_argument, NULL, 'u'},
            {"role", required_argument, NULL, 'r'},  {"nodes", required_argument, NULL, 'n'},
            {"json", no_argument, NULL, 'j'},        {"help", no_argument, NULL, 'h'},
            {},
    };
    const char *state = NULL, *user = NULL, *role = NULL, *nodes = NULL;
    bool json = false;
    int c;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
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
        case 'h':
            token_usage(stdout);
            return EXIT_OK;
        default:
            token_usage(stderr);
            return EXIT_USAGE;
        }
    }
    const char *sub = optind < argc ? argv[optind++] : NULL;
    if (!sub || STRNEQ(sub, "create") || optind < argc) {
        token_usage(stderr);
        return EXIT_USAGE;
    }
    if (!state || !user || !role)
        return fail(EXIT_USAGE, "token create: --state, --user and --role are required");
    if (!spec_name_is_valid(user))
        return fail(EXIT_USAGE, "token create: '%s' is not a valid user name (a-z, 0-9, . _ -)", user);
    static const char *const roles[] = {"admin", "owner", "trusted", "user", "node"};
    bool ok = false;
    for (size_t i = 0; i < ARRAY_SIZE(roles); i++)
        ok = ok || STREQ(role, roles[i]);
    if (!ok)
        return fail(EXIT_USAGE, "token create: --role must be admin, owner, trusted, user or node");
    if ((STREQ(role, "owner") || STREQ(role, "node")) && !nodes)
        return fail(EXIT_USAGE, "token create: role %s needs --nodes", role);
    if (nodes && !names_valid(nodes))
        return fail(EXIT_USAGE, "token create: --nodes takes node names separated by commas");
    if (STREQ(role, "node") && strchr(nodes, ','))
        return fail(EXIT_USAGE, "token create: a node token speaks for exactly one node");

    char secret[TOKEN_SECRET_SIZE], hash[SHA256_DIGEST_SIZE * 2 + 1];
    if (token_secret_new(secret, hash) < 0)
        return fail(EXIT_FAIL, "cannot get random bytes for the token");

    Store *st = NULL;
    Error err = {0};
    int r = store_open(state, &st, &err);
    if (r >= 0)
        r = store_begin(st, &err);
    if (r >= 0)
        r = store_token_add(st, hash, user, role, nodes, &err);
    if (r >= 0)
        r = store_commit(st, &err);
    if (r < 0) {
        if (st)
            store_rollback(st);
        store_close(st);
        return fail_error(EXIT_FAIL, &err);
    }
    store_close(st);
    if (json)
        return print_json(json_pack("{s:s, s:s, s:s}", "user", user, "role", role, "token", secret));
    printf("%s\n", secret);
    fprintf(stderr, "einsora: token for %s (%s) created; it is shown only this once\n", user, role);
    return EXIT_OK;
}
