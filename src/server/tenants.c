/* tenants.c: trusted tenants (R9): trust is an admin's grant per tenant.
 *
 * A grant is stored (fleet record "trust/NAME") and mirrored into the core on every site, so
 * each placement is decided from what is granted at that moment: a grant withdrawn counts
 * from the next placement on, nothing is rebuilt from stored requests. An admin grants it
 * (PUT /v1/tenants/NAME/trust), or by making the user a token of the trusted role: its first
 * submit grants it, as the site marking its user trusted. Requests already placed keep their
 * GPUs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "util/json-cleanup.h"
#include "util/macro.h"
#include "util/strutil.h"

#define TRUST_PREFIX "trust/"

static void site_trust_all(Server *s, const char *user, bool on) {
    for (size_t i = 0; i < s->sites.cap; i++)
        if (s->sites.keys[i] && s->sites.keys[i] != PTRMAP_TOMB)
            (void)sched_site_trust(s->sched, s->sites.keys[i], user, on, NULL);
}

static int load_grant(const char *key, const char *json, void *userdata) {
    Server *s = userdata;
    (void)json;
    if (string_has_prefix(key, TRUST_PREFIX))
        state_trust_user(s, key + strlen(TRUST_PREFIX));
    return 0;
}

int tenants_load(Server *s, Error *err) {
    return store_fleet_foreach(s->store, load_grant, s, err);
}

typedef struct TrustArg {
    const char *tenant;
    bool grant;
} TrustArg;

int tenants_set_trust(Server *s, const char *tenant, bool grant, const char *by) {
    bool had = ptrmap_get(&s->trusted_users, tenant) != NULL;
    if (had == grant)
        return 0;
    _cleanup_free_ char *key = strprintf(TRUST_PREFIX "%s", tenant);
    if (!key)
        return -ENOMEM;
    Error err = {0};
    int r = grant ? store_fleet_put(s->store, key, "{}", &err)
                  : store_fleet_delete(s->store, key, &err);
    if (writer_check(s, r, &err, "saving a trust grant") < 0)
        return r;
    if (grant)
        state_trust_user(s, tenant);
    else {
        char *k = ptrmap_remove(&s->trusted_users, tenant);
        (void)k;
        site_trust_all(s, tenant, false);
    }
    state_event(s, grant ? "tenant.trusted" : "tenant.untrusted", tenant, NULL,
                json_pack("{s:s}", "by", by));
    /* What the tenant waited for may be free already: offer it now (after the grant's
     * event, so that the feed shows the cause before the placements). */
    for (size_t i = 0; grant && i < s->sites.cap; i++)
        if (s->sites.keys[i] && s->sites.keys[i] != PTRMAP_TOMB)
            (void)sched_site_offer(s->sched, s->sites.keys[i], core_now(s), NULL);
    return 0;
}

static void op_trust(Server *s, Op *op) {
    TrustArg *a = op->arg;
    if (tenants_set_trust(s, a->tenant, a->grant, "admin") < 0)
        OP_FAIL(op, 500, "internal", "%s", error_message(&s->batch_err));
    op->status = 200;
    op->body = json_pack("{s:s, s:b}", "tenant", a->tenant, "trusted", a->grant);
}

static void trust(HttpCtx *c, bool grant) {
    if (c->who.role != ROLE_ADMIN)
        API_FAIL(c, 403, "forbidden", "Only an admin grants or withdraws a tenant's trust.");
    TrustArg a = {.tenant = c->match.params[0], .grant = grant};
    if (!wire_name_is_valid(a.tenant))
        API_FAIL(c, 400, "bad_request",
                 "'%.64s%s' is not a valid user name (1 to %d of a-z, 0-9, . _ -, starting with a "
                 "letter or digit).",
                 a.tenant, strlen(a.tenant) > 64 ? "..." : "", WIRE_NAME_MAX - 1);
    api_apply(c, op_trust, &a);
}

void api_tenant_trust_grant(HttpCtx *c) {
    trust(c, true);
}

void api_tenant_trust_withdraw(HttpCtx *c) {
    trust(c, false);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void api_tenants_trusted(HttpCtx *c) {
    if (c->who.role != ROLE_ADMIN)
        API_FAIL(c, 403, "forbidden", "Only an admin lists trusted tenants.");
    Server *s = c->s;
    _cleanup_json_ json_t *list = json_array();
    pthread_rwlock_rdlock(&s->lock);
    _cleanup_free_ char **names = calloc(s->trusted_users.n + 1, sizeof(char *));
    size_t n = 0;
    for (size_t i = 0; names && i < s->trusted_users.cap; i++)
        if (s->trusted_users.keys[i] && s->trusted_users.keys[i] != PTRMAP_TOMB &&
            n < s->trusted_users.n)
            names[n++] = s->trusted_users.keys[i];
    if (names) {
        qsort(names, n, sizeof(char *), cmp_str);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(list, json_string(names[i]));
    }
    pthread_rwlock_unlock(&s->lock);
    if (!names)
        API_FAIL(c, 500, "internal", "Out of memory.");
    c->json = json_pack("{s:o}", "trusted", TAKE_PTR(list));
}
