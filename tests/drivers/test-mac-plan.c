/* test-mac-plan.c: the pure parts of the Mac backends (R10, R14): the endpoint server's argv
 * per runtime, and the 2-VM limit of Apple's Virtualization framework as capacity. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "drivers/mac-plan.h"

static size_t argc_of(const char **argv) {
    size_t n = 0;
    while (argv[n])
        n++;
    return n;
}

Test(mac_plan, r14_mlx_and_llama_cpp_server_argv) {
    const char *argv[MAC_SERVER_ARGV_MAX];
    char buf[16];
    Error err = {0};
    MacServerSpec s = {.runtime = "mlx",
                       .model = "mlx-community/Llama-3.2-3B-Instruct-4bit",
                       .port = 8080,
                       .on_gpu = true};
    cr_assert_eq(mac_server_argv(&s, argv, buf, &err), 0, "%s", error_message(&err));
    cr_assert_str_eq(argv[0], "mlx_lm.server");
    cr_assert_str_eq(argv[2], "mlx-community/Llama-3.2-3B-Instruct-4bit");
    cr_assert_str_eq(argv[4], "127.0.0.1", "bound on loopback only");
    cr_assert_str_eq(argv[6], "8080");
    cr_assert_eq(argc_of(argv), 7);
    s = (MacServerSpec){
            .runtime = "llama.cpp", .model = "/models/q4.gguf", .port = 9000, .on_gpu = true};
    cr_assert_eq(mac_server_argv(&s, argv, buf, &err), 0);
    cr_assert_str_eq(argv[0], "llama-server");
    cr_assert_str_eq(argv[8], "999", "every layer on Metal");
    s.on_gpu = false;
    cr_assert_eq(mac_server_argv(&s, argv, buf, &err), 0);
    cr_assert_str_eq(argv[8], "0", "a CPU endpoint offloads nothing (R11)");
}

Test(mac_plan, r10_vllm_and_bad_specs_are_refused_clearly) {
    const char *argv[MAC_SERVER_ARGV_MAX];
    char buf[16];
    struct {
        MacServerSpec s;
        int code;
        const char *words;
    } cases[] = {
            {{.runtime = "vllm", .model = "m", .port = 1, .on_gpu = true},
             -EOPNOTSUPP,
             "vLLM does not run on a Mac"},
            {{.runtime = "mlx", .model = "m", .port = 1, .on_gpu = false},
             -EOPNOTSUPP,
             "CPU endpoint runs llama.cpp"},
            {{.runtime = "mlx", .model = "--evil", .port = 1, .on_gpu = true},
             -EINVAL,
             "needs a model"},
            {{.runtime = "mlx", .model = "m", .port = 0, .on_gpu = true},
             -EINVAL,
             "port is 1 to 65535"},
            {{.runtime = "tgi", .model = "m", .port = 1, .on_gpu = true},
             -EINVAL,
             "unknown endpoint runtime"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        Error err = {0};
        cr_assert_eq(mac_server_argv(&cases[i].s, argv, buf, &err), cases[i].code, "case %zu", i);
        cr_assert(strstr(err.message, cases[i].words), "case %zu: %s", i, err.message);
    }
}

Test(mac_plan, r10_at_most_two_macos_vms_and_the_frameworks_limit_is_no_capacity) {
    MacVmSlots s = {0};
    Error err = {0};
    cr_assert_eq(mac_vm_slot_take(&s, &err), 0);
    cr_assert_eq(mac_vm_slot_take(&s, &err), 0);
    cr_assert_eq(mac_vm_slot_take(&s, &err), -EBUSY);
    cr_assert(strstr(err.message, "no capacity"), "%s", err.message);
    cr_assert_eq(s.running, 2, "a refused start takes nothing");
    mac_vm_slot_release(&s);
    cr_assert_eq(mac_vm_slot_take(&s, &err), 0, "a stopped VM frees its slot");
    mac_vm_slot_release(&s);
    mac_vm_slot_release(&s);
    mac_vm_slot_release(&s);
    cr_assert_eq(s.running, 0, "never below zero");
    cr_assert(mac_vz_error_is_no_capacity("VZErrorDomain", MAC_VZ_ERROR_VM_LIMIT_EXCEEDED));
    cr_assert(!mac_vz_error_is_no_capacity("VZErrorDomain", 2),
              "an invalid configuration is a fault");
    cr_assert(!mac_vz_error_is_no_capacity("NSPOSIXErrorDomain", MAC_VZ_ERROR_VM_LIMIT_EXCEEDED));
}
