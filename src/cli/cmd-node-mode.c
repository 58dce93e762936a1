/* cmd-node-mode.c: `einsora node mode NODE MODE [--drain wait|evict] [--gpu ID] [--wait]`:
 * switch a node's (or a lab GPU's) mode as a workflow: cordon, drain, rebind/relabel, verify,
 * uncordon (R3, R4, R7). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "feed-wait.h"
#include "output.h"
#include "remote.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "verbs.h"
#include "wire/switch.h"

static const char usage[] =
        "usage: einsora node mode NODE container|vm-passthrough [--drain wait|evict] [--gpu ID]\n"
        "                         [--wait] [--timeout DURATION]\n\n"
        "Switch a node to another mode: cordon -> drain -> relabel (datacenter) or rebind through\n"
        "the agent (lab, per GPU) -> verify -> uncordon. Refused while workloads run unless a\n"
        "drain is asked: --drain wait lets them end, --drain evict stops them (passthrough VMs\n"
        "cannot migrate). --gpu switches one GPU of a lab machine (index or PCI address).\n"
        "--wait follows the switch until it is done.\n"
        "  --drain wait|evict  let running workloads end, or stop them, before switching\n"
        "  --gpu ID         switch one GPU of a lab machine (index or PCI address)\n"
        "  --wait           follow the switch until it is done\n"
        "  --timeout D      with --wait (implied): stop following after D (90s, 15m, 2h) with\n"
        "                   exit code 6; the switch itself goes on\n";

typedef struct ModeOpts {
    const char *drain, *gpu;
    bool wait;
    int64_t timeout_ms; /* --timeout: 0 follows as long as it takes */
} ModeOpts;

static int on_extra(int c, const char *arg, void *userdata) {
    ModeOpts *m = userdata;
    switch (c) {
    case 'd':
        if (STRNEQ(arg, "wait") && STRNEQ(arg, "evict") && STRNEQ(arg, "none"))
            return fail(EXIT_USAGE, "node mode: --drain is wait or evict");
        m->drain = arg;
        return 0;
    case 'g':
        m->gpu = arg;
        return 0;
    case 'w':
        m->wait = true;
        return 0;
    case 'T':
        if (parse_duration_ms(arg, INT64_C(366) * 24 * 3600 * 1000, &m->timeout_ms) < 0 ||
            m->timeout_ms == 0)
            return fail(EXIT_USAGE, "node mode: --timeout takes a duration such as 90s, 15m or 2h");
        m->wait = true;
        return 0;
    default:
        return EXIT_USAGE;
    }
}

static void print_switch(const NodeSwitch *sw) {
    printf("switch to %s: %s - %s\n", sw->mode, switch_step_to_string(sw->step), sw->message);
    fflush(stdout);
}

/* The node's "switch" (wire/switch.h), strictly: *ret_has is false when the node has none. */
static int node_switch(json_t *node, NodeSwitch *ret, bool *ret_has) {
    json_t *v = json_object_get(node, "switch");
    Error err = {0};
    if (v && wire_switch_from_json(v, ret, &err) < 0)
        return fail(EXIT_FAIL, "node mode: the server's answer: %s", error_message(&err));
    *ret_has = v;
    return EXIT_OK;
}

int node_mode_verb(int argc, char **argv) {
    static const struct option extra[] = {
            {"drain", required_argument, NULL, 'd'},
            {"gpu", required_argument, NULL, 'g'},
            {"wait", no_argument, NULL, 'w'},
            {"timeout", required_argument, NULL, 'T'},
            {},
    };
    RemoteOpts o = {0};
    ModeOpts m = {.drain = "none"};
    int r = remote_getopt(argc, argv, extra, on_extra, &m, &o, usage);
    if (r >= 0)
        return r;
    if (argc - optind < 2)
        return fail(EXIT_USAGE, "node mode: missing the %s (einsora node mode NODE MODE)",
                    argc - optind == 1 ? "mode: container or vm-passthrough" : "node and mode");
    if (argc - optind > 2)
        return fail(EXIT_USAGE, "node mode: unexpected argument '%s'", argv[optind + 2]);
    const char *node = argv[optind], *mode = argv[optind + 1];
    json_t *body = json_pack("{s:s, s:s}", "mode", mode, "drain", m.drain), *j = NULL;
    if (m.gpu)
        json_object_set_new(body, "gpu", json_string(m.gpu));
    char path[256];
    _cleanup_free_ char *name = client_escape(node);
    if (!name) {
        json_decref(body);
        return fail(EXIT_FAIL, "out of memory");
    }
    snprintf(path, sizeof(path), "/v1/nodes/%.200s/mode", name);
    r = remote_call(&o, "POST", path, body, NULL, &j);
    json_decref(body);
    if (r != EXIT_OK)
        return r;
    if (o.json && !m.wait)
        return print_json(j);
    if (json_str(j, "message")) {
        printf("%s\n", json_str(j, "message"));
        json_decref(j);
        return EXIT_OK;
    }
    NodeSwitch sw = {0};
    bool has_sw = false;
    r = node_switch(j, &sw, &has_sw);
    json_decref(j);
    if (r != EXIT_OK)
        return r;
    char last[sizeof(sw.message)] = "";
    if (has_sw) {
        print_switch(&sw);
        snprintf(last, sizeof(last), "%s", sw.message);
    }
    bool done = !has_sw || !m.wait || !switch_active(&sw);
    bool failed = has_sw && sw.step == SW_FAILED;
    if (done)
        return failed ? EXIT_FAIL : EXIT_OK;
    Client *cl = NULL;
    if ((r = remote_open(&o, &cl)) != EXIT_OK)
        return r;
    snprintf(path, sizeof(path), "/v1/nodes/%.200s", name);
    int64_t deadline = m.timeout_ms ? cli_monotonic_ms() + m.timeout_ms : 0;
    /* Woken by the feed's node events, not a timed poll; the head is taken before the first
     * read so that a step in between still wakes the first wait. */
    FeedWait feed;
    long status = 0;
    Error err = {0};
    int fr = feed_wait_start(&feed, cl, "node.", node, &status, &err);
    if (fr < 0) {
        client_free(cl);
        return feed_wait_fail(fr, status, &err);
    }
    for (bool first = true;; first = false) {
        if (deadline && cli_monotonic_ms() >= deadline) {
            r = fail(EXIT_TIMEOUT,
                     "node %s: the switch to %s is not done after --timeout; it goes on (follow "
                     "it with `einsora node show %s`)",
                     node, mode, node);
            break;
        }
        FeedNews news = FEED_MINE;
        if (!first &&
            (fr = feed_wait_next(&feed, feed_wait_seconds(cli_monotonic_ms(), deadline, 30), &news,
                                 &status, &err)) < 0) {
            r = feed_wait_fail(fr, status, &err);
            break;
        }
        /* A quiet long-poll reads the node anyway: node events are the admins' only, and
         * an owner following its own node's switch sees none. */
        if (news == FEED_KIN || news == FEED_OTHER)
            continue;
        if ((r = remote_call_on(cl, "GET", path, NULL, NULL, &j)) != EXIT_OK)
            break;
        r = node_switch(j, &sw, &has_sw);
        json_decref(j);
        if (r != EXIT_OK)
            break;
        if (has_sw && STRNEQ(sw.message, last)) {
            print_switch(&sw);
            snprintf(last, sizeof(last), "%s", sw.message);
        }
        r = has_sw && sw.step == SW_FAILED ? EXIT_FAIL : EXIT_OK;
        if (!has_sw || !switch_active(&sw))
            break;
    }
    client_free(cl);
    return r;
}
