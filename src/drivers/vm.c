/* vm.c: passthrough VMs through libvirt (vm.h). */
#include "drivers/vm.h"

#include <errno.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "drivers/vm-xml.h"
#include "util/macro.h"
#include "util/strutil.h"

typedef struct Vm {
    Driver base;
    virConnectPtr conn;
    char *uri, *type;
} Vm;

/* libvirt prints every error to stderr unless told otherwise; a library never prints. */
static void quiet(void *userdata, virErrorPtr e) {
    (void)userdata, (void)e;
}
static pthread_once_t quiet_once = PTHREAD_ONCE_INIT;
static void quiet_init(void) {
    virSetErrorFunc(NULL, quiet);
}

static const char *last_error(void) {
    const char *m = virGetLastErrorMessage();
    return m ? m : "unknown libvirt error";
}

static Vm *vm_of(Driver *d) {
    return (Vm *)d;
}

static virDomainPtr lookup(Vm *v, const char *id) {
    char name[64];
    snprintf(name, sizeof(name), DRIVER_NAME_PREFIX "%s", id);
    return virDomainLookupByName(v->conn, name);
}

/* The making a domain's description names (einsora.created=DIGITS, vm-xml.c), "" when none. */
static void domain_created(virDomainPtr dom, char out[24]) {
    out[0] = 0;
    char *desc = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_DESCRIPTION, NULL, 0);
    const char *at = desc ? strstr(desc, DRIVER_LABEL_CREATED "=") : NULL;
    if (at) {
        at += strlen(DRIVER_LABEL_CREATED "=");
        snprintf(out, 24, "%.*s", (int)MIN(strspn(at, "0123456789"), 20u), at);
    }
    free(desc);
}

static int vm_start(Driver *d, const WorkloadSpec *spec, Error *err) {
    Vm *v = vm_of(d);
    _cleanup_free_ char *xml = NULL;
    int r = vm_domain_xml(spec, v->type, &xml, err);
    if (r < 0)
        return r;
    virDomainPtr dom = lookup(v, spec->id);
    if (dom) {
        /* Ours already (never started twice), unless its description names another request
         * made under this id: a leftover, which must not pass for this one (R17). */
        char made[24];
        domain_created(dom, made);
        bool other = spec->created && STRNEQ(made, spec->created);
        virDomainFree(dom);
        if (other)
            return error_set(err, -ENOTUNIQ,
                             "libvirt has a domain " DRIVER_NAME_PREFIX
                             "%s that is not this request's (an earlier request given the same "
                             "id, or made by hand): remove it",
                             spec->id);
        return error_set(err, -EEXIST,
                         "libvirt already has the domain of request %s: it is not started twice",
                         spec->id);
    }
    if (!(dom = virDomainDefineXML(v->conn, xml)))
        return error_set(err, -EINVAL, "libvirt refused the domain of request %s: %s", spec->id,
                         last_error());
    if (virDomainCreate(dom) < 0) {
        r = error_set(err, -EIO, "libvirt could not start the VM of request %s: %s", spec->id,
                      last_error());
        (void)virDomainUndefine(dom);
    }
    virDomainFree(dom);
    return r;
}

static int vm_status(Driver *d, const char *id, WorkloadState *ret, Error *err) {
    Vm *v = vm_of(d);
    if (!driver_id_is_valid(id))
        return error_set(err, -EINVAL, "'%.32s' is not a request id", id);
    virDomainPtr dom = lookup(v, id);
    WorkloadState st = {0};
    if (!dom) {
        if (virConnectIsAlive(v->conn) != 1)
            return error_set(err, -ECONNREFUSED, "libvirt at %s does not answer: %s", v->uri,
                             last_error());
        st.status = WORKLOAD_ABSENT;
        snprintf(st.message, sizeof(st.message), "libvirt has no domain for request %s", id);
        *ret = st;
        return 0;
    }
    int state = 0, reason = 0;
    int r = virDomainGetState(dom, &state, &reason, 0);
    domain_created(dom, st.created);
    virDomainFree(dom);
    if (r < 0)
        return error_set(err, -EIO, "libvirt did not say the state of request %s: %s", id,
                         last_error());
    switch (state) {
    case VIR_DOMAIN_RUNNING:
    case VIR_DOMAIN_BLOCKED:
    case VIR_DOMAIN_PAUSED:
    case VIR_DOMAIN_SHUTDOWN:
    case VIR_DOMAIN_PMSUSPENDED:
        st.status = WORKLOAD_RUNNING;
        break;
    case VIR_DOMAIN_CRASHED:
        st.status = WORKLOAD_FAILED;
        snprintf(st.message, sizeof(st.message), "the VM crashed");
        break;
    case VIR_DOMAIN_SHUTOFF:
        st.status = reason == VIR_DOMAIN_SHUTOFF_CRASHED || reason == VIR_DOMAIN_SHUTOFF_FAILED
                            ? WORKLOAD_FAILED
                            : WORKLOAD_EXITED;
        if (st.status == WORKLOAD_EXITED && reason == VIR_DOMAIN_SHUTOFF_DESTROYED)
            /* Forced off from outside (virsh destroy), not a shutdown of its own: as a
             * container killed by SIGKILL reads, never a clean exit. */
            st.exit_code = 128 + 9;
        snprintf(st.message, sizeof(st.message), "%s",
                 st.status == WORKLOAD_FAILED ? "the VM crashed or failed to run"
                 : st.exit_code               ? "the VM was forced off (destroyed)"
                                              : "the VM shut down");
        break;
    default:
        st.status = WORKLOAD_STARTING;
    }
    *ret = st;
    return 0;
}

static int vm_stop(Driver *d, const char *id, unsigned grace_s, Error *err) {
    Vm *v = vm_of(d);
    if (!driver_id_is_valid(id))
        return error_set(err, -EINVAL, "'%.32s' is not a request id", id);
    virDomainPtr dom = lookup(v, id);
    if (!dom)
        return virConnectIsAlive(v->conn) == 1
                       ? 0
                       : error_set(err, -ECONNREFUSED, "libvirt at %s does not answer", v->uri);
    int state = 0, reason = 0;
    /* ACPI first: the guest shuts down cleanly; destroyed when the grace period passes. */
    if (virDomainGetState(dom, &state, &reason, 0) >= 0 && state != VIR_DOMAIN_SHUTOFF) {
        (void)virDomainShutdown(dom);
        for (unsigned i = 0; i < grace_s * 10; i++) {
            if (virDomainGetState(dom, &state, &reason, 0) < 0 || state == VIR_DOMAIN_SHUTOFF)
                break;
            nanosleep(&(struct timespec){0, 100 * 1000 * 1000}, NULL);
        }
        if (virDomainGetState(dom, &state, &reason, 0) >= 0 && state != VIR_DOMAIN_SHUTOFF &&
            virDomainDestroy(dom) < 0) {
            int r = error_set(err, -EIO, "libvirt could not destroy the VM of request %s: %s", id,
                              last_error());
            virDomainFree(dom);
            return r;
        }
    }
    int r = virDomainUndefine(dom) < 0
                    ? error_set(err, -EIO, "libvirt could not undefine the VM of request %s: %s",
                                id, last_error())
                    : 0;
    virDomainFree(dom);
    return r;
}

static int vm_logs(Driver *d, const char *id, bool follow, FILE *out, Error *err) {
    return error_set(err, -EOPNOTSUPP,
                     "a VM's console is not collected: connect to it with `virsh console %s%s`",
                     DRIVER_NAME_PREFIX, id);
}

static int vm_list(Driver *d, char ***ret_ids, size_t *ret_n, Error *err) {
    Vm *v = vm_of(d);
    virDomainPtr *doms = NULL;
    int n = virConnectListAllDomains(v->conn, &doms, 0);
    if (n < 0)
        return error_set(err, -EIO, "libvirt did not list its domains: %s", last_error());
    char **ids = calloc((size_t)n + 1, sizeof(char *));
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        const char *name = virDomainGetName(doms[i]);
        if (ids && name && string_has_prefix(name, DRIVER_NAME_PREFIX) &&
            driver_id_is_valid(name + strlen(DRIVER_NAME_PREFIX)) &&
            (ids[k] = strdup(name + strlen(DRIVER_NAME_PREFIX))))
            k++;
        virDomainFree(doms[i]);
    }
    free(doms);
    if (!ids)
        return error_set(err, -ENOMEM, "out of memory");
    *ret_ids = ids;
    *ret_n = k;
    return 0;
}

static void vm_free(Driver *d) {
    Vm *v = vm_of(d);
    if (v->conn)
        virConnectClose(v->conn);
    free(v->uri);
    free(v->type);
    free(v);
}

static const DriverOps vm_ops = {
        .name = "vm",
        .start = vm_start,
        .stop = vm_stop,
        .status = vm_status,
        .logs = vm_logs,
        .list = vm_list,
        .free = vm_free,
};

int vm_driver_new(const VmConfig *cfg, Driver **ret, Error *err) {
    pthread_once(&quiet_once, quiet_init);
    Vm *v = calloc(1, sizeof(*v));
    if (!v)
        return error_set(err, -ENOMEM, "out of memory");
    v->base.ops = &vm_ops;
    v->uri = strdup(cfg->uri ? cfg->uri : VM_URI_DEFAULT);
    v->type = strdup(cfg->domain_type ? cfg->domain_type : "kvm");
    if (!v->uri || !v->type) {
        vm_free(&v->base);
        return error_set(err, -ENOMEM, "out of memory");
    }
    if (!(v->conn = virConnectOpen(v->uri))) {
        int r = error_set(err, -ECONNREFUSED, "cannot connect to libvirt at %s: %s", v->uri,
                          last_error());
        vm_free(&v->base);
        return r;
    }
    *ret = &v->base;
    return 0;
}
