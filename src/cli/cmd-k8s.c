/* cmd-k8s.c: `einsora k8s sync` (the datacenter sync beside the control plane) and
 * `einsora k8s kubevirt-config` (KubeVirt's permittedHostDevices from the catalog). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config/catalog-yaml.h"
#include "config/pciids.h"
#include "k8s/kclient.h"
#include "k8s/kubevirt.h"
#include "k8s/sync.h"
#include "output.h"
#include "suggest.h"
#include "wire/decode.h"
#include "util/macro.h"
#include "util/strutil.h"
#include "verbs.h"

static void k8s_usage(FILE *f) {
    fputs("usage: einsora k8s SUB [OPTIONS]\n\n"
          "  sync             keep the control plane's nodes in step with a Kubernetes cluster's\n"
          "                   GPU nodes and run their mode switches (docs/kubernetes.md)\n"
          "  kubevirt-config  print KubeVirt's permittedHostDevices for the catalog's classes\n"
          "    --apply        ... and patch them into the cluster's KubeVirt resource\n\n"
          "Cluster options of both:\n"
          "  --kubeconfig F   kubeconfig file (default $KUBECONFIG, else ~/.kube/config)\n"
          "  --context C      its context (default: current-context)\n"
          "  --in-cluster     use the pod's service account instead\n"
          "  --catalog FILE   catalog of GPU classes (default: the shipped one)\n"
          "  -h, --help       show this help (`einsora k8s sync --help`: the sync's options)\n",
          f);
}

static void sync_usage(FILE *f) {
    fputs("usage: einsora k8s sync --server URL --token ADMIN_TOKEN [OPTIONS]\n\n"
          "  --server URL        the control plane (default $EINSORA_SERVER; a private CA:\n"
          "                      $EINSORA_CACERT=CA.pem)\n"
          "  --token T           an admin token for it (default $EINSORA_TOKEN)\n"
          "  --kubeconfig F      kubeconfig file (default $KUBECONFIG, else ~/.kube/config)\n"
          "  --context C         its context (default: current-context)\n"
          "  --in-cluster        use the pod's service account instead\n"
          "  --catalog FILE      catalog of GPU classes (default: the shipped one)\n"
          "  --site S            site name of the nodes (default datacenter)\n"
          "  --owner U           the site operator's user name (default site)\n"
          "  --capabilities C    added to every node, e.g. kata,mig_in_kata\n"
          "  --interval S        heartbeat and watch period in seconds (default 5)\n"
          "  --switch-timeout S  how long the GPU Operator may take after a relabel (default 600)\n"
          "  --namespace NS      where placements run as Pods and VMIs (default einsora)\n"
          "  --pod-image I       the image of placed containers, notebooks, endpoints\n"
          "  --vm-image I        the containerDisk image of placed VMs\n"
          "  --kata-runtime-class C  RuntimeClass of Kata GPU pods (default kata-qemu-nvidia-gpu)\n"
          "  -q, --quiet         no log lines\n"
          "  -h, --help          show this help\n",
          f);
}

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

typedef struct Common {
    const char *kubeconfig, *context, *catalog;
    bool in_cluster;
} Common;

static int load(const Common *o, KubeConfig **ret_kube, Catalog **ret_cat) {
    Error err = {0};
    int r = o->in_cluster ? kubeconfig_in_cluster(NULL, ret_kube, &err)
                          : kubeconfig_load(o->kubeconfig, o->context, ret_kube, &err);
    if (r < 0)
        return fail_error(EXIT_FAIL, &err);
    PciIds *ids = NULL;
    Error e2 = {0};
    if (pci_ids_load(EINSORA_PCI_IDS, &ids, &e2) < 0)
        fprintf(stderr, "einsora: warning: %s; vm_device_name falls back to raw device ids\n",
                error_message(&e2));
    r = catalog_load_file(o->catalog ? o->catalog : catalog_default_path(), ids, ret_cat, &err);
    pci_ids_free(ids);
    if (r < 0) {
        kubeconfig_free(*ret_kube);
        return fail_error(EXIT_FAIL, &err);
    }
    return EXIT_OK;
}

enum {
    O_KUBECONFIG = 0x300,
    O_CONTEXT,
    O_IN_CLUSTER,
    O_CATALOG,
    O_SERVER,
    O_TOKEN,
    O_SITE,
    O_OWNER,
    O_CAPS,
    O_INTERVAL,
    O_TIMEOUT,
    O_APPLY,
    O_NAMESPACE,
    O_POD_IMAGE,
    O_VM_IMAGE,
    O_KATA
};

#define COMMON_OPTIONS                                                                             \
    {"kubeconfig", required_argument, NULL, O_KUBECONFIG},                                         \
            {"context", required_argument, NULL, O_CONTEXT},                                       \
            {"in-cluster", no_argument, NULL, O_IN_CLUSTER},                                       \
            {"catalog", required_argument, NULL, O_CATALOG}, {                                     \
        "help", no_argument, NULL, 'h'                                                             \
    }

static bool common_option(Common *o, int c, const char *arg) {
    switch (c) {
    case O_KUBECONFIG:
        o->kubeconfig = arg;
        return true;
    case O_CONTEXT:
        o->context = arg;
        return true;
    case O_IN_CLUSTER:
        o->in_cluster = true;
        return true;
    case O_CATALOG:
        o->catalog = arg;
        return true;
    default:
        return false;
    }
}

static int seconds(const char *arg, const char *what, unsigned max, unsigned *ret) {
    uint64_t v;
    if (parse_uint64(arg, max, &v) < 0 || v == 0)
        return fail(EXIT_USAGE, "k8s sync: %s takes whole seconds from 1 to %u, not '%s'", what,
                    max, arg);
    *ret = (unsigned)v;
    return EXIT_OK;
}

static int sync_verb(int argc, char **argv) {
    static const struct option options[] = {
            COMMON_OPTIONS,
            {"server", required_argument, NULL, O_SERVER},
            {"token", required_argument, NULL, O_TOKEN},
            {"site", required_argument, NULL, O_SITE},
            {"owner", required_argument, NULL, O_OWNER},
            {"capabilities", required_argument, NULL, O_CAPS},
            {"interval", required_argument, NULL, O_INTERVAL},
            {"switch-timeout", required_argument, NULL, O_TIMEOUT},
            {"quiet", no_argument, NULL, 'q'},
            {"namespace", required_argument, NULL, O_NAMESPACE},
            {"pod-image", required_argument, NULL, O_POD_IMAGE},
            {"vm-image", required_argument, NULL, O_VM_IMAGE},
            {"kata-runtime-class", required_argument, NULL, O_KATA},
            {},
    };
    Common o = {0};
    const char *ca = getenv("EINSORA_CACERT");
    K8sSyncConfig cfg = {.server = getenv("EINSORA_SERVER"),
                         .ca_file = ca && ca[0] ? ca : NULL,
                         .token = getenv("EINSORA_TOKEN"),
                         .site = {.site = "datacenter", .owner = "site"},
                         .work = {.namespace_ = "einsora",
                                  .pod_image = "einsora-workload:latest",
                                  .vm_image = "einsora-vm-disk:latest",
                                  .kata_runtime_class = "kata-qemu-nvidia-gpu"},
                         .log = stderr,
                         .stop = &stop_flag};
    int c, r;
    while ((c = getopt_long(argc, argv, "qh", options, NULL)) >= 0) {
        if (common_option(&o, c, optarg))
            continue;
        switch (c) {
        case O_SERVER:
            cfg.server = optarg;
            break;
        case O_TOKEN:
            cfg.token = optarg;
            break;
        case O_SITE:
            cfg.site.site = optarg;
            break;
        case O_OWNER:
            cfg.site.owner = optarg;
            break;
        case O_CAPS:
            /* Checked here: one the control plane refuses would fail every node's update. */
            if (cli_check_capabilities("k8s sync", optarg) != 0)
                return EXIT_USAGE;
            cfg.site.caps = optarg;
            break;
        case O_NAMESPACE:
            cfg.work.namespace_ = optarg;
            break;
        case O_POD_IMAGE:
            cfg.work.pod_image = optarg;
            break;
        case O_VM_IMAGE:
            cfg.work.vm_image = optarg;
            break;
        case O_KATA:
            cfg.work.kata_runtime_class = optarg;
            break;
        case 'q':
            cfg.log = NULL;
            break;
        case O_INTERVAL:
            if ((r = seconds(optarg, "--interval", 3600, &cfg.interval_s)) != EXIT_OK)
                return r;
            break;
        case O_TIMEOUT:
            if ((r = seconds(optarg, "--switch-timeout", 86400, &cfg.switch_timeout_s)) != EXIT_OK)
                return r;
            break;
        case 'h':
            sync_usage(stdout);
            return EXIT_OK;
        default:
            sync_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        return fail(EXIT_USAGE, "k8s sync: unexpected argument '%s'", argv[optind]);
    if (!cfg.server || !cfg.token)
        return fail(
                EXIT_USAGE,
                "k8s sync: --server and --token are required (or $EINSORA_SERVER, $EINSORA_TOKEN)");
    if (!wire_name_is_valid(cfg.site.site) || !wire_name_is_valid(cfg.site.owner))
        return fail(EXIT_USAGE, "k8s sync: --site and --owner take names (a-z, 0-9, . _ -)");
    KubeConfig *kube = NULL;
    Catalog *cat = NULL;
    if ((r = load(&o, &kube, &cat)) != EXIT_OK)
        return r;
    cfg.kube = kube;
    cfg.catalog = cat;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    Error err = {0};
    r = k8s_sync_run(&cfg, &err) < 0 ? fail_error(EXIT_FAIL, &err) : EXIT_OK;
    kubeconfig_free(kube);
    catalog_free(cat);
    return r;
}

static int kubevirt_verb(int argc, char **argv) {
    static const struct option options[] = {
            COMMON_OPTIONS, {"apply", no_argument, NULL, O_APPLY}, {}};
    Common o = {0};
    bool apply = false;
    int c, r;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
        if (common_option(&o, c, optarg))
            continue;
        if (c == O_APPLY)
            apply = true;
        else if (c == 'h') {
            k8s_usage(stdout);
            return EXIT_OK;
        } else {
            k8s_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        return fail(EXIT_USAGE, "k8s kubevirt-config: unexpected argument '%s'", argv[optind]);
    KubeConfig *kube = NULL;
    Catalog *cat = NULL;
    if (!apply) { /* printing needs no cluster */
        Error err = {0};
        PciIds *ids = NULL;
        if (pci_ids_load(EINSORA_PCI_IDS, &ids, &err) < 0)
            ids = NULL;
        r = catalog_load_file(o.catalog ? o.catalog : catalog_default_path(), ids, &cat, &err);
        pci_ids_free(ids);
        if (r < 0)
            return fail_error(EXIT_FAIL, &err);
        json_t *p = k8s_kubevirt_patch(cat);
        char *text = json_dumps(p, JSON_INDENT(2));
        printf("%s\n", text);
        free(text);
        json_decref(p);
        catalog_free(cat);
        return EXIT_OK;
    }
    if ((r = load(&o, &kube, &cat)) != EXIT_OK)
        return r;
    Error err = {0};
    K8sClient *k = NULL;
    json_t *list = NULL, *patch = k8s_kubevirt_patch(cat);
    char *rv = NULL;
    r = EXIT_OK;
    if (k8s_client_new(kube, NULL, &k, &err) < 0 ||
        k8s_list(k, "/apis/kubevirt.io/v1/kubevirts", NULL, &list, &rv, &err) < 0)
        r = fail_error(EXIT_FAIL, &err);
    else if (json_array_size(list) != 1)
        r = fail(EXIT_FAIL,
                 "k8s kubevirt-config: the cluster has %zu KubeVirt CRs; expected exactly one",
                 json_array_size(list));
    else {
        json_t *md = json_object_get(json_array_get(list, 0), "metadata");
        char path[600];
        snprintf(path, sizeof(path), "/apis/kubevirt.io/v1/namespaces/%s/kubevirts/%s",
                 strempty(json_string_value(json_object_get(md, "namespace"))),
                 strempty(json_string_value(json_object_get(md, "name"))));
        if (k8s_merge_patch(k, path, patch, NULL, &err) < 0)
            r = fail_error(EXIT_FAIL, &err);
        else
            printf("patched %s: %zu pciHostDevices\n", path,
                   json_array_size(json_object_get(
                           json_object_get(
                                   json_object_get(json_object_get(patch, "spec"), "configuration"),
                                   "permittedHostDevices"),
                           "pciHostDevices")));
    }
    json_decref(list);
    json_decref(patch);
    free(rv);
    k8s_client_free(k);
    kubeconfig_free(kube);
    catalog_free(cat);
    return r;
}

int verb_k8s(int argc, char **argv) {
    if (argc < 2) {
        k8s_usage(stderr);
        return EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (STREQ(sub, "--help") || STREQ(sub, "-h")) {
        k8s_usage(stdout);
        return EXIT_OK;
    }
    if (STREQ(sub, "sync"))
        return sync_verb(argc - 1, argv + 1);
    if (STREQ(sub, "kubevirt-config"))
        return kubevirt_verb(argc - 1, argv + 1);
    static const char *const subs[] = {"sync", "kubevirt-config"};
    return cli_unknown_sub("k8s", sub, subs, ARRAY_SIZE(subs));
}
