/* test-vm.c: the VM driver (R2a, R7, R17): domain XML with one managed='no' PCI hostdev per
 * function of each GPU's IOMMU group, memory and vCPUs from the request, every XML validated
 * with virt-xml-validate; start, status, list, stop against libvirt's test driver. */
#include <criterion/criterion.h>
#include <libvirt/libvirt.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "drivers/vm-xml.h"
#include "drivers/vm.h"

static size_t count(const char *text, const char *needle) {
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* virt-xml-validate FILE domain: libvirt's own schema says the XML is a valid domain. */
static void validate(const char *xml) {
    char path[] = "/tmp/einsora-domain-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, xml, strlen(xml)), (ssize_t)strlen(xml));
    close(fd);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "virt-xml-validate %s domain >/dev/null 2>&1", path);
    int r = system(cmd);
    unlink(path);
    cr_assert(WIFEXITED(r) && WEXITSTATUS(r) == 0, "virt-xml-validate refused:\n%s", xml);
}

static const char *const group[] = {"0000:3b:00.1", "0000:3b:00.2"};

static WorkloadSpec vm_spec(WorkloadGpu *g) {
    *g = (WorkloadGpu){.vendor = "nvidia", .pci = "0000:3b:00.0", .group = group, .n_group = 2};
    return (WorkloadSpec){.id = "77",
                          .kind = "vm",
                          .image = "/var/lib/einsora/images/ubuntu.qcow2",
                          .gpus = g,
                          .n_gpus = 1,
                          .memory_mb = 16384,
                          .vcpus = 8};
}

Test(vm, r2_vm_xml_has_one_unmanaged_hostdev_per_group_function_and_validates) {
    WorkloadGpu g;
    WorkloadSpec s = vm_spec(&g);
    char *xml = NULL;
    Error err = {0};
    cr_assert_eq(vm_domain_xml(&s, "kvm", &xml, &err), 0, "%s", error_message(&err));
    cr_assert_eq(count(xml, "<hostdev mode='subsystem' type='pci' managed='no'>"), 3, "%s", xml);
    cr_assert(strstr(xml, "bus='0x3b' slot='0x00' function='0x0'"), "%s", xml);
    cr_assert(strstr(xml, "bus='0x3b' slot='0x00' function='0x2'"), "%s", xml);
    cr_assert(strstr(xml, "<memory unit='MiB'>16384</memory>"), "%s", xml);
    cr_assert(strstr(xml, "<vcpu>8</vcpu>"), "%s", xml);
    cr_assert(strstr(xml, "<name>einsora-77</name>"), "%s", xml);
    validate(xml);
    free(xml);
    /* Defaults, no GPU, an image path with XML specials: still valid. */
    WorkloadSpec plain = {.id = "78", .kind = "vm", .image = "/images/a&b'<c>.img"};
    cr_assert_eq(vm_domain_xml(&plain, "test", &xml, &err), 0);
    cr_assert(strstr(xml, "a&amp;b&apos;&lt;c&gt;.img"), "%s", xml);
    cr_assert_eq(count(xml, "<hostdev"), 0);
    validate(xml);
    free(xml);
}

Test(vm, r17_vm_xml_refuses_bad_input_clearly) {
    WorkloadGpu g;
    WorkloadSpec s = vm_spec(&g);
    char *xml = NULL;
    Error err = {0};
    g.pci = "3b:00.0";
    cr_assert_eq(vm_domain_xml(&s, "kvm", &xml, &err), -EINVAL);
    cr_assert(strstr(err.message, "is not a PCI address"), "%s", err.message);
    g.pci = "0000:3b:00.0";
    s.image = "relative.qcow2";
    Error e2 = {0};
    cr_assert_eq(vm_domain_xml(&s, "kvm", &xml, &e2), -EINVAL);
    cr_assert(strstr(e2.message, "absolute path"), "%s", e2.message);
    s.image = "/a.img";
    s.id = "x1";
    Error e3 = {0};
    cr_assert_eq(vm_domain_xml(&s, "kvm", &xml, &e3), -EINVAL);
}

Test(vm, r17_vm_starts_runs_lists_and_stops_on_libvirts_test_driver) {
    VmConfig c = {.uri = "test:///default", .domain_type = "test"};
    Driver *d = NULL;
    Error err = {0};
    cr_assert_eq(vm_driver_new(&c, &d, &err), 0, "%s", error_message(&err));
    WorkloadGpu g;
    WorkloadSpec s = vm_spec(&g);
    char *xml = NULL;
    cr_assert_eq(vm_domain_xml(&s, "test", &xml, &err), 0);
    validate(xml);
    free(xml);
    cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
    WorkloadState st;
    cr_assert_eq(d->ops->status(d, "77", &st, &err), 0, "%s", error_message(&err));
    cr_assert_eq(st.status, WORKLOAD_RUNNING);
    Error e2 = {0};
    cr_assert_eq(d->ops->start(d, &s, &e2), -EEXIST, "never started twice: %s", e2.message);
    char **ids = NULL;
    size_t n = 0;
    cr_assert_eq(d->ops->list(d, &ids, &n, &err), 0);
    cr_assert_eq(n, 1, "only ours: the test driver's own 'test' domain is not listed");
    cr_assert_str_eq(ids[0], "77");
    driver_ids_free(ids, n);
    Error e3 = {0};
    cr_assert_eq(d->ops->logs(d, "77", false, stdout, &e3), -EOPNOTSUPP);
    cr_assert(strstr(e3.message, "virsh console einsora-77"), "%s", e3.message);
    cr_assert_eq(d->ops->stop(d, "77", 1, &err), 0, "%s", error_message(&err));
    cr_assert_eq(d->ops->status(d, "77", &st, &err), 0);
    cr_assert_eq(st.status, WORKLOAD_ABSENT);
    cr_assert_eq(d->ops->stop(d, "77", 1, &err), 0, "stopping what is gone is not an error");
    driver_free(d);
}

/* R17: the domain of this request is never started twice, but one of an earlier request given
 * the same id (a fleet started again on a fresh state), or one without a making at all (made by
 * hand), is not taken for it: that would run the old guest on the old devices. */
Test(vm, r17_a_leftover_domain_of_an_earlier_request_is_not_taken_for_this_one) {
    VmConfig c = {.uri = "test:///default", .domain_type = "test"};
    Driver *d = NULL;
    Error err = {0};
    cr_assert_eq(vm_driver_new(&c, &d, &err), 0, "%s", error_message(&err));
    WorkloadGpu g;
    WorkloadSpec earlier = vm_spec(&g);
    earlier.created = "1000";
    cr_assert_eq(d->ops->start(d, &earlier, &err), 0, "%s", error_message(&err));
    Error e1 = {0};
    cr_expect_eq(d->ops->start(d, &earlier, &e1), -EEXIST, "the same request: %s", e1.message);
    WorkloadSpec now = earlier;
    now.created = "100"; /* a prefix of the other's: a whole value is compared */
    Error e2 = {0};
    cr_expect_eq(d->ops->start(d, &now, &e2), -ENOTUNIQ, "%s", e2.message);
    cr_expect(strstr(e2.message, "not this request's"), "%s", e2.message);
    cr_assert_eq(d->ops->stop(d, "77", 1, &err), 0, "%s", error_message(&err));
    WorkloadSpec by_hand = vm_spec(&g); /* no making in its description */
    cr_assert_eq(d->ops->start(d, &by_hand, &err), 0, "%s", error_message(&err));
    Error e3 = {0};
    cr_expect_eq(d->ops->start(d, &now, &e3), -ENOTUNIQ, "%s", e3.message);
    cr_assert_eq(d->ops->stop(d, "77", 1, &err), 0, "%s", error_message(&err));
    driver_free(d);
}

/* R17: a VM forced off from outside (virsh destroy) ended, but not cleanly: not "exited with
 * code 0", which is what a shutdown of its own reads. */
Test(vm, r17_a_vm_destroyed_from_outside_is_not_a_clean_exit) {
    VmConfig c = {.uri = "test:///default", .domain_type = "test"};
    Driver *d = NULL;
    Error err = {0};
    cr_assert_eq(vm_driver_new(&c, &d, &err), 0, "%s", error_message(&err));
    WorkloadGpu g;
    WorkloadSpec s = vm_spec(&g);
    cr_assert_eq(d->ops->start(d, &s, &err), 0, "%s", error_message(&err));
    /* Another connection to the same test driver, as virsh would be. */
    virConnectPtr other = virConnectOpen("test:///default");
    cr_assert(other);
    virDomainPtr dom = virDomainLookupByName(other, "einsora-77");
    cr_assert(dom, "the domain is visible to another connection");
    cr_assert_eq(virDomainDestroy(dom), 0);
    virDomainFree(dom);
    virConnectClose(other);
    WorkloadState st;
    cr_assert_eq(d->ops->status(d, "77", &st, &err), 0, "%s", error_message(&err));
    cr_expect_eq(st.status, WORKLOAD_EXITED);
    cr_expect_eq(st.exit_code, 137);
    cr_expect(strstr(st.message, "forced off"), "%s", st.message);
    cr_assert_eq(d->ops->stop(d, "77", 1, &err), 0, "%s", error_message(&err));
    driver_free(d);
}

Test(vm, r17_vm_unreachable_libvirt_is_said_clearly) {
    VmConfig c = {.uri = "qemu+unix:///system?socket=/nonexistent/libvirt-sock"};
    Driver *d = NULL;
    Error err = {0};
    cr_assert_eq(vm_driver_new(&c, &d, &err), -ECONNREFUSED);
    cr_assert(strstr(err.message, "cannot connect to libvirt at qemu+unix:///system"), "%s",
              err.message);
}
