/* test-pciids.c: the pci.ids reader (names for vm_device_name and discovery). */
#include <criterion/criterion.h>
#include <string.h>

#include "config.h"
#include "config/pciids.h"

static const char sample[] = "# comment\n"
                             "10de  NVIDIA Corporation\n"
                             "\t2330  GH100[H100 SXM5 80GB]\n"
                             "\t2331  GH100 [H100 PCIe]\n"
                             "\t\t10de 1626  H100 PCIe subsystem\n"
                             "1002  Advanced Micro Devices, Inc. [AMD/ATI]\n"
                             "\t744c  Navi 31 [Radeon RX 7900 XT/7900 XTX]\n"
                             "\tzzzz  broken line\n"
                             "C 03  Display controller\n"
                             "\t00  VGA compatible controller\n";

Test(pciids, parses_vendor_and_device_lines) {
    PciIds *db = NULL;
    Error err = {0};
    cr_assert_eq(pci_ids_parse(sample, strlen(sample), &db, &err), 0);
    cr_expect_eq(pci_ids_count(db), 3);
    cr_expect_str_eq(pci_ids_device_name(db, 0x10de, 0x2331), "GH100 [H100 PCIe]");
    cr_expect_str_eq(pci_ids_device_name(db, 0x1002, 0x744c),
                     "Navi 31 [Radeon RX 7900 XT/7900 XTX]");
    cr_expect_str_eq(pci_ids_vendor_name(db, 0x10de), "NVIDIA Corporation");
    cr_expect_null(pci_ids_device_name(db, 0x10de, 0x1626), "subsystem lines are not devices");
    cr_expect_null(pci_ids_device_name(db, 0x0003, 0x0000), "class section is not a vendor");
    pci_ids_free(db);
}

Test(pciids, loads_debian_database) {
    PciIds *db = NULL;
    Error err = {0};
    cr_assert_eq(pci_ids_load(EINSORA_PCI_IDS, &db, &err), 0, "%s", err.message);
    cr_expect_gt(pci_ids_count(db), 10000);
    cr_expect_str_eq(pci_ids_device_name(db, 0x10de, 0x2684), "AD102 [GeForce RTX 4090]");
    pci_ids_free(db);
}

Test(pciids, missing_file_is_a_clear_error) {
    PciIds *db = NULL;
    Error err = {0};
    cr_assert_lt(pci_ids_load("/nonexistent/pci.ids", &db, &err), 0);
    cr_expect(strstr(err.message, "cannot read pci.ids database /nonexistent/pci.ids"), "%s",
              err.message);
    cr_expect_null(db);
}
