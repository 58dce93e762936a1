/* test-indexes.c: the engine's speed indexes (issue 18) follow every change they summarise:
 * the reservation window's counts (cordon, uncordon, reservations let go), each pool's GPU
 * total (a mode switch), the diagnosis cells (capacity, cordon, Kata). Each test would give
 * another decision if the index went stale; the fixture also runs sched_check, which
 * recounts every index, after each mutation. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core-fixture.h"

#define H100 "nvidia-h100-80gb"

TestSuite(indexes, .init = fx_setup, .fini = fx_teardown);

static Decision decision_of(const char *id) {
    Decision d;
    cr_assert_eq(sched_request_decision(fx, id, &d), 0);
    return d;
}

static Decision container(const char *id, const char *user, unsigned count) {
    return fx_req(.id = id, .user = user, .kind = WORKLOAD_CONTAINER, .class_name = H100,
                  .count = count);
}

#define RTX "nvidia-rtx-4090"

static Decision rtx_container(const char *id, unsigned count) {
    return fx_req(.id = id, .user = "alice", .kind = WORKLOAD_CONTAINER, .class_name = RTX,
                  .count = count);
}

static void trusted_dc(const char *user) {
    Error err = {0};
    fx_site("dc", SITE_DATACENTER);
    cr_assert_eq(sched_site_trust(fx, "dc", user, true, &err), 0, "%s", err.message);
}

static void cordon(const char *node, bool on) {
    Error err = {0};
    cr_assert_eq(sched_node_set_cordoned(fx, node, on, 0, &err), 0, "%s", err.message);
}

/* A gang on a full fleet reserves a full node from the reservation window: a node that left
 * the window's counts while cordoned must be counted again once uncordoned, or the gang
 * reserves nothing and a younger request takes the GPUs it waits for. */
Test(indexes, r12_a_gang_reserves_a_full_node_again_after_it_was_cordoned_and_uncordoned) {
    trusted_dc("alice");
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    cr_assert_eq(container("a", "alice", 4).kind, DECISION_PLACED);
    cr_assert_eq(container("b", "alice", 4).kind, DECISION_PLACED);
    cordon("n1", true);
    cordon("n1", false);
    cr_assert_eq(container("gang", "alice", 8).kind, DECISION_WAITING);
    fx_release("a"); /* four GPUs free on the gang's node: not enough for it */
    Decision young = container("young", "alice", 1);
    cr_assert_eq(young.kind, DECISION_WAITING,
                 "a younger request took a GPU of the node the gang reserved: %s", young.message);
    cr_assert_eq(young.reason, SCHED_REASON_QUEUED, "%s", young.message);
    fx_release("b");
    Decision g = decision_of("gang");
    cr_assert_eq(g.kind, DECISION_PLACED, "%s", g.message);
    cr_assert_eq(g.placement.n_devices, 8);
}

/* A cordoned full node is out of the reservation window's counts: the gang reserves the other
 * full node and runs there, not on the cordoned one when it frees. */
Test(indexes, r12_a_cordoned_full_node_is_not_reserved_by_a_gang) {
    trusted_dc("alice");
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    fx_gpu_node(.name = "n2", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    cr_assert_eq(container("a", "alice", 8).kind, DECISION_PLACED);
    cr_assert_eq(container("b", "alice", 8).kind, DECISION_PLACED);
    const char *first = decision_of("a").placement.node;
    cordon(first, true);
    cr_assert_eq(container("gang", "alice", 8).kind, DECISION_WAITING);
    fx_release("a"); /* the cordoned node frees: no placement there */
    cr_assert_eq(decision_of("gang").kind, DECISION_WAITING);
    fx_release("b"); /* the other node, which the gang reserved, frees: it runs there */
    Decision g = decision_of("gang");
    cr_assert_eq(g.kind, DECISION_PLACED, "%s", g.message);
    cr_assert_str_neq(g.placement.node, first);
}

/* When a gang's reservation is let go (it is cancelled), the next gang takes the node from
 * the window; the window's counts must see the node free of reservations again. */
Test(indexes, r12_a_node_let_go_by_a_cancelled_gang_is_reserved_by_the_next_one) {
    trusted_dc("alice");
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    cr_assert_eq(container("a", "alice", 4).kind, DECISION_PLACED);
    cr_assert_eq(container("b", "alice", 4).kind, DECISION_PLACED);
    cr_assert_eq(container("g1", "alice", 8).kind, DECISION_WAITING); /* reserves n1 */
    cr_assert_eq(container("g2", "alice", 8).kind, DECISION_WAITING); /* nothing left */
    fx_release("g1");                                                 /* n1 goes to g2 */
    fx_release("a");
    Decision young = container("young", "alice", 1);
    cr_assert_eq(young.kind, DECISION_WAITING, "g2 holds no reservation: %s", young.message);
    fx_release("b");
    cr_assert_eq(decision_of("g2").kind, DECISION_PLACED);
}

/* FIFO with backfill (sched.h): a gang placed on another node than the one it reserved lets go
 * of that node, and the requests its reservation kept off it are offered the node at once -- not
 * left waiting for the node's next release while a younger request takes the room. */
Test(indexes, r12_a_node_let_go_by_a_gang_placed_elsewhere_goes_to_those_it_held_back) {
    trusted_dc("alice");
    Error err = {0};
    cr_assert_eq(sched_site_trust(fx, "dc", "bob", true, &err), 0, "%s", err.message);
    cr_assert_eq(sched_site_trust(fx, "dc", "carol", true, &err), 0, "%s", err.message);
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    fx_gpu_node(.name = "n2", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    cr_assert_eq(container("big", "alice", 8).kind, DECISION_PLACED);
    const char *small[] = {"s1", "s2", "s3", "s4"};
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(container(small[i], "alice", 1).kind, DECISION_PLACED);
    cr_assert_eq(container("gang", "bob", 8).kind, DECISION_WAITING); /* reserves the 4-free node */
    const char *held[] = {"c1", "c2", "c3"};
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(container(held[i], "carol", 1).kind, DECISION_WAITING, "%s", held[i]);
    fx_release("big"); /* the gang goes to the node big freed */
    cr_assert_eq(decision_of("gang").kind, DECISION_PLACED);
    for (size_t i = 0; i < 3; i++) {
        Decision d = decision_of(held[i]);
        cr_expect_eq(d.kind, DECISION_PLACED, "%s: %s", held[i], d.message);
    }
}

/* A gang reserves only a node that could hold it: its owner's lab node without a GPU of the
 * gang's class (free count 0 of that class) is no reservation. The H100 gang reserves the
 * full H100 node instead, and the lab node stays open to the owner's RTX gang. */
Test(indexes, r12_a_gang_never_reserves_a_node_without_gpus_of_its_class) {
    trusted_dc("alice");
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    fx_gpu_node(.name = "rtx", .site = "lab", .owner = "alice", .cls = RTX, .gpus = 8);
    cr_assert_eq(container("a", "alice", 4).kind, DECISION_PLACED);
    cr_assert_eq(container("b", "alice", 4).kind, DECISION_PLACED);
    cr_assert_eq(rtx_container("r1", 4).kind, DECISION_PLACED);
    cr_assert_eq(rtx_container("r2", 4).kind, DECISION_PLACED);
    cr_assert_eq(container("gang", "alice", 8).kind, DECISION_WAITING);
    cr_assert_eq(rtx_container("rgang", 8).kind, DECISION_WAITING);
    fx_release("a"); /* four H100 free on n1, which the H100 gang reserved */
    Decision young = container("young", "alice", 1);
    cr_assert_eq(young.kind, DECISION_WAITING,
                 "the H100 gang reserved no H100 node, a younger request passed it: %s",
                 young.message);
    fx_release("r1"); /* four RTX free on the lab node, which the RTX gang reserved */
    Decision ryoung = rtx_container("ryoung", 1);
    cr_assert_eq(ryoung.kind, DECISION_WAITING,
                 "the RTX gang found its node reserved by the H100 gang: %s", ryoung.message);
    fx_release("b");
    cr_assert_eq(decision_of("gang").kind, DECISION_PLACED);
    fx_release("r2");
    Decision rg = decision_of("rgang");
    cr_assert_eq(rg.kind, DECISION_PLACED, "%s", rg.message);
    cr_assert_str_eq(rg.placement.node, "rtx");
}

/* Each pool's GPU total follows a mode switch: a node switched from container to
 * vm-passthrough holds a stranger's Kata gang (VFIO) and no runc gang any more. */
Test(indexes, r3_a_mode_switch_moves_the_gpu_total_a_reservation_reads) {
    trusted_dc("alice");
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8, .kata = true);
    Error err = {0};
    cr_assert_eq(sched_node_set_mode(fx, "n1", NODE_MODE_VM_PASSTHROUGH, 0, &err), 0, "%s",
                 err.message);
    cr_assert_eq(fx_req(.id = "a", .user = "alice", .kind = WORKLOAD_VM, .class_name = H100).kind,
                 DECISION_PLACED);
    /* bob is a stranger: his container runs under Kata on VFIO GPUs, 8 of which n1 now has. */
    cr_assert_eq(container("gang", "bob", 8).kind, DECISION_WAITING);
    cr_assert_eq(fx_req(.id = "v", .user = "alice", .kind = WORKLOAD_VM, .class_name = H100).kind,
                 DECISION_WAITING, "a younger VM took a GPU of the gang's reserved node");
    fx_release("a");
    Decision g = decision_of("gang");
    cr_assert_eq(g.kind, DECISION_PLACED, "%s", g.message);
    cr_assert_eq(g.placement.container_runtime, CONTAINER_RUNTIME_KATA);
}

/* R18: a waiting request's reason, found afresh when asked, follows the class's capacity
 * through the diagnosis cells: free GPUs, then none, then cordoned ones. A cordoned idle GPU
 * makes the diagnosis look at the nodes' cells instead of the index summary. A VM on these
 * container nodes is told the mode, whatever their GPUs are doing: no GPU here is ever in the
 * binding it needs, so the mode is what, removed, would let it run. */
Test(indexes, r18_a_waiting_reason_follows_capacity_and_cordons_through_the_cells) {
    trusted_dc("alice");
    fx_gpu_node(.name = "c1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 4, .kata = true);
    /* c2's idle GPU stays cordoned: with an idle GPU that takes no work in the class, every
     * diagnosis looks at the nodes' cells instead of answering from the index summary. */
    fx_gpu_node(.name = "c2", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .kata = true);
    Error err = {0};
    cr_assert_eq(sched_device_set_cordoned(fx, "c2", 0, true, 0, &err), 0, "%s", err.message);
    cr_assert_eq(sched_device_set_cordoned(fx, "c1", 3, true, 0, &err), 0, "%s", err.message);
    Decision vm = fx_req(.id = "vm", .user = "alice", .kind = WORKLOAD_VM, .class_name = H100,
                         .wait_for_nodes = true);
    cr_assert_eq(vm.kind, DECISION_WAITING, "%s", vm.message);
    cr_assert_eq(vm.reason, SCHED_REASON_MODE_MISMATCH, "%s", vm.message);
    const char *jobs[] = {"j0", "j1", "j2"}; /* the three GPUs that take work */
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(container(jobs[i], "alice", 1).kind, DECISION_PLACED);
    /* The idle GPUs left are cordoned: not taken, so not "every unit is taken" for a
     * container, which the cordon keeps; the VM is still kept by the mode. */
    Decision w = container("w", "alice", 1);
    cr_assert_eq(w.kind, DECISION_WAITING, "%s", w.message);
    cr_assert_eq(w.reason, SCHED_REASON_CORDONED, "%s", w.message);
    vm = decision_of("vm");
    cr_assert_eq(vm.reason, SCHED_REASON_MODE_MISMATCH, "%s", vm.message);
    /* Uncordoned, the GPU goes to the waiting container; then every GPU that takes work is
     * taken. */
    cr_assert_eq(sched_device_set_cordoned(fx, "c1", 3, false, 0, &err), 0, "%s", err.message);
    cr_assert_eq(decision_of("w").kind, DECISION_PLACED);
    cr_assert_eq(sched_device_set_cordoned(fx, "c2", 0, false, 0, &err), 0, "%s", err.message);
    cr_assert_eq(container("j3", "alice", 1).kind, DECISION_PLACED);
    Decision x = container("x", "alice", 1);
    cr_assert_eq(x.reason, SCHED_REASON_NO_CAPACITY, "%s", x.message);
    vm = decision_of("vm");
    cr_assert_eq(vm.reason, SCHED_REASON_MODE_MISMATCH, "taken or not: %s", vm.message);
    fx_release("j1");
    cr_assert_eq(decision_of("x").kind, DECISION_PLACED, "the freed GPU went to x");
}

/* R18 and R7: a lab node whose GPUs are split 4 host / 4 passthrough cannot hold an 8-GPU
 * gang today, but its owner may switch the bindings (an ordinary action, so "could ever"), so
 * the gang waits with the reason naming the other binding rather than being refused; once the
 * four passthrough GPUs are switched to the host it runs there. */
Test(indexes, r18_a_gang_larger_than_one_binding_of_a_lab_node_waits_for_a_binding_switch) {
    fx_site("lab", SITE_LAB);
    DeviceSpec devs[8];
    for (unsigned i = 0; i < 8; i++)
        devs[i] = (DeviceSpec){.class_name = RTX,
                               .binding = i < 4 ? BINDING_HOST : BINDING_VFIO,
                               .reset_verified = true};
    NodeSpec spec = {.name = "rtx",
                     .site = "lab",
                     .platform = PLATFORM_LINUX,
                     .owner = "alice",
                     .cpu_cores = 32,
                     .devices = devs,
                     .n_devices = 8};
    Error err = {0};
    cr_assert_eq(sched_add_node(fx, &spec, 0, &err), 0, "%s", err.message);
    Decision g = rtx_container("gang", 8);
    cr_assert_eq(g.kind, DECISION_WAITING, "%s", g.message);
    cr_assert_eq(g.reason, SCHED_REASON_MODE_MISMATCH, "%s", g.message);
    for (unsigned i = 4; i < 8; i++)
        cr_assert_eq(sched_device_set_binding(fx, "rtx", i, BINDING_HOST, 0, &err), 0, "%s",
                     err.message);
    g = decision_of("gang");
    cr_assert_eq(g.kind, DECISION_PLACED, "%s", g.message);
    cr_assert_eq(g.placement.n_devices, 8);
}

/* The request-id index compares against ids kept in the request itself, inline when shorter
 * than 24 bytes and allocated when longer: ids on both sides of that edge and at the longest
 * allowed are found, refused again while alive, and free for reuse once released. */
Test(indexes, r16_ids_of_every_length_are_found_refused_twice_and_reusable_after_release) {
    trusted_dc("alice");
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    const size_t lengths[] = {1, 22, 23, 24, 25, SCHED_ID_MAX - 1};
    char ids[6][SCHED_ID_MAX + 1];
    for (size_t i = 0; i < 6; i++) {
        memset(ids[i], 'a' + (int)i, lengths[i]);
        ids[i][lengths[i]] = '\0';
        cr_assert_eq(container(ids[i], "alice", 1).kind, DECISION_PLACED, "id of %zu bytes",
                     lengths[i]);
    }
    for (size_t i = 0; i < 6; i++) {
        Decision again = container(ids[i], "alice", 1);
        cr_assert_eq(again.reason, SCHED_REASON_DUPLICATE, "id of %zu bytes: %s", lengths[i],
                     again.message);
        cr_assert_eq(decision_of(ids[i]).kind, DECISION_PLACED);
        RequestSpec spec;
        cr_assert_eq(sched_request_spec(fx, ids[i], &spec), 0);
        cr_assert_str_eq(spec.id, ids[i]);
    }
    char too_long[SCHED_ID_MAX + 1];
    memset(too_long, 'z', SCHED_ID_MAX);
    too_long[SCHED_ID_MAX] = '\0';
    cr_assert_eq(container(too_long, "alice", 1).reason, SCHED_REASON_BAD_REQUEST);
    Decision d;
    cr_assert_eq(sched_request_decision(fx, too_long, &d), -ENOENT);
    cr_assert_eq(sched_release(fx, too_long, 0, NULL), -ENOENT);
    /* A prefix of a live id is another id. */
    cr_assert_eq(sched_request_decision(fx, "aa", &d), -ENOENT);
    for (size_t i = 0; i < 6; i++) {
        fx_release(ids[i]);
        cr_assert_eq(sched_request_decision(fx, ids[i], &d), -ENOENT);
    }
    cr_assert_eq(sched_request_count(fx), 0);
    cr_assert_eq(container(ids[5], "alice", 1).kind, DECISION_PLACED);
}

/* Releases in an order unrelated to the ids' hashes shift later entries of a probe run back
 * into the hole (the index never leaves tombstones): after thousands of them every live id
 * is still found and every released one is gone. The fixture's sched_check after each change
 * also walks every slot of the index. */
Test(indexes, r16_the_id_index_finds_every_live_request_after_thousands_of_releases) {
    trusted_dc("alice");
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1);
    sched_set_check_invariants(fx, false); /* a full check per change would make this O(n^2) */
    enum { N = 3000 };
    char id[32];
    for (unsigned i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "req-%u", i);
        Decision d = container(id, "alice", 1);
        cr_assert(d.kind == DECISION_PLACED || d.kind == DECISION_WAITING, "%s", d.message);
    }
    for (unsigned i = 0; i < N; i++) {
        unsigned k = (i * 7919u) % N; /* a permutation of 0..N-1 (7919 is prime to 3000) */
        if (k % 3 == 0)
            continue;
        snprintf(id, sizeof(id), "req-%u", k);
        fx_release(id);
    }
    Error err = {0};
    cr_assert_eq(sched_check(fx, &err), 0, "%s", err.message);
    for (unsigned i = 0; i < N; i++) {
        Decision d;
        snprintf(id, sizeof(id), "req-%u", i);
        cr_assert_eq(sched_request_decision(fx, id, &d) == 0, i % 3 == 0, "%s", id);
    }
    cr_assert_eq(sched_request_count(fx), N / 3);
}

#define H100_1G "nvidia-h100-80gb-mig-1g.10gb"

static unsigned allocs_on(const char *node, unsigned dev) {
    DeviceInfo di;
    cr_assert_eq(sched_device_info(fx, node, dev, &di), 0);
    return di.n_allocations;
}

/* A device keeps its first two requests inline and moves to a heap list past them (MIG
 * slices, time slices): seven slices on one GPU, most of them ended, then new ones again,
 * are each listed once (the fixture's sched_check matches every list against the requests
 * after each change), and a request that ends leaves no trace in its device's list. */
Test(indexes, r2c_a_device_lists_every_slice_it_holds_as_its_list_grows_and_shrinks) {
    fx_site("dc", SITE_DATACENTER);
    fx_gpu_node(.name = "m1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 1, .mig_enabled = true);
    char id[16];
    for (int i = 0; i < 7; i++) {
        snprintf(id, sizeof(id), "s%d", i);
        Decision d =
                fx_req(.id = id, .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G);
        cr_assert_eq(d.kind, DECISION_PLACED, "slice %d: %s", i, d.message);
    }
    cr_assert_eq(allocs_on("m1", 0), 7);
    for (int i = 0; i < 6; i++) {
        snprintf(id, sizeof(id), "s%d", i);
        fx_release(id);
    }
    cr_assert_eq(allocs_on("m1", 0), 1);
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof(id), "t%d", i);
        cr_assert_eq(
                fx_req(.id = id, .user = "ops", .kind = WORKLOAD_ENDPOINT, .class_name = H100_1G)
                        .kind,
                DECISION_PLACED);
    }
    cr_assert_eq(allocs_on("m1", 0), 4);
    fx_release("s6");
    for (int i = 0; i < 3; i++) {
        snprintf(id, sizeof(id), "t%d", i);
        fx_release(id);
    }
    cr_assert_eq(allocs_on("m1", 0), 0);
}

/* Gangs reserve at most their share of the class's waiting GPUs, of its nodes: with 16
 * one-GPU requests waiting ahead of three 4-GPU gangs on four full 4-GPU nodes, the third
 * gang finds two reservations against a cap of ceil(4 x 12 / 28) = 2 and takes none. Two
 * nodes then stay open to younger requests; a reservation per gang would have closed three. */
Test(indexes, r12_gangs_reserve_no_more_nodes_than_their_share_of_the_waiting_gpus) {
    trusted_dc("alice");
    const char *nodes[] = {"n1", "n2", "n3", "n4"};
    for (int i = 0; i < 4; i++)
        fx_gpu_node(.name = nodes[i], .site = "dc", .owner = "ops", .mode = "container",
                    .cls = H100, .gpus = 4);
    char id[8];
    for (int i = 0; i < 16; i++) { /* every GPU busy with one-GPU work, four per node */
        snprintf(id, sizeof(id), "f%d", i);
        cr_assert_eq(container(id, "alice", 1).kind, DECISION_PLACED);
    }
    for (int i = 0; i < 16; i++) {
        snprintf(id, sizeof(id), "o%d", i);
        cr_assert_eq(container(id, "alice", 1).kind, DECISION_WAITING);
    }
    cr_assert_eq(container("g1", "alice", 4).kind, DECISION_WAITING);
    cr_assert_eq(container("g2", "alice", 4).kind, DECISION_WAITING);
    cr_assert_eq(container("g3", "alice", 4).kind, DECISION_WAITING);
    for (int i = 0; i < 16; i++) { /* the older one-GPU requests are cancelled */
        snprintf(id, sizeof(id), "o%d", i);
        fx_release(id);
    }
    for (int i = 0; i < 4; i++) {
        snprintf(id, sizeof(id), "y%d", i);
        cr_assert_eq(container(id, "alice", 1).kind, DECISION_WAITING);
    }
    /* One GPU frees on every node: the younger requests take those of the unreserved ones. */
    for (int i = 0; i < 4; i++) {
        char busy[8] = "";
        for (int f = 0; f < 16 && !*busy; f++) {
            snprintf(id, sizeof(id), "f%d", f);
            Decision d = decision_of(id);
            if (d.kind == DECISION_PLACED && strcmp(d.placement.node, nodes[i]) == 0)
                snprintf(busy, sizeof(busy), "%s", id);
        }
        cr_assert(*busy, "no one-GPU request runs on %s", nodes[i]);
        fx_release(busy);
    }
    int placed = 0;
    for (int i = 0; i < 4; i++) {
        snprintf(id, sizeof(id), "y%d", i);
        placed += decision_of(id).kind == DECISION_PLACED;
    }
    cr_assert_eq(placed, 2, "%d nodes were open to younger requests, not 2", placed);
    cr_assert_eq(decision_of("g3").kind, DECISION_WAITING);
}

/* A search for a request newer than every reserving gang skips the nodes (and whole pool
 * buckets) a gang of the class holds without reading them; one for an older request must
 * still see them, since a reservation only holds back younger requests. Here n1's four free
 * GPUs are held by the gang: the younger one-GPU request waits, while the older request whose
 * fallback opens at the tick takes one of them. */
Test(indexes, r13_an_older_fallback_uses_a_node_held_for_a_younger_gang) {
    trusted_dc("alice");
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    fx_gpu_node(.name = "r1", .site = "dc", .owner = "ops", .mode = "container", .cls = RTX,
                .gpus = 1);
    static const char *const to_h100[] = {H100};
    cr_assert_eq(rtx_container("x", 1).kind, DECISION_PLACED);
    cr_assert_eq(container("a", "alice", 4).kind, DECISION_PLACED);
    cr_assert_eq(container("b", "alice", 4).kind, DECISION_PLACED);
    Decision old = fx_submit((RequestSpec){.id = "old",
                                           .user = "alice",
                                           .kind = WORKLOAD_CONTAINER,
                                           .class_name = RTX,
                                           .fallback = to_h100,
                                           .n_fallback = 1,
                                           .wait_s = 60},
                             0);
    cr_assert_eq(old.kind, DECISION_WAITING, "%s", old.message);
    cr_assert_eq(container("gang", "alice", 8).kind, DECISION_WAITING); /* reserves n1 */
    fx_release("a");
    Decision young = container("young", "alice", 1);
    cr_assert_eq(young.kind, DECISION_WAITING,
                 "a younger request took a GPU of the node the gang holds: %s", young.message);
    cr_assert_eq(sched_tick(fx, 60), 1);
    old = decision_of("old");
    cr_assert_eq(old.kind, DECISION_PLACED, "%s", old.message);
    cr_assert_str_eq(old.placement.node, "n1");
    cr_assert_eq(old.placement.fallback_index, 0);
    cr_assert_eq(decision_of("young").kind, DECISION_WAITING);
}

/* A gang of nine H100s that waits for a node that may join (R18): no node of the fleet holds
 * it, so it reserves none and every walk passes it over. */
static void waiting_big_gang(const char *id) {
    Decision d = fx_req(.id = id, .user = "alice", .kind = WORKLOAD_CONTAINER, .class_name = H100,
                        .count = 9, .wait_for_nodes = true);
    cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
}

/* n1 (8 H100s) full of one-GPU requests p1..p8. */
static void full_h100_node(void) {
    trusted_dc("alice");
    fx_gpu_node(.name = "n1", .site = "dc", .owner = "ops", .mode = "container", .cls = H100,
                .gpus = 8);
    char id[8];
    for (int i = 1; i <= 8; i++) {
        snprintf(id, sizeof(id), "p%d", i);
        cr_assert_eq(container(id, "alice", 1).kind, DECISION_PLACED);
    }
}

/* n1 full as full_h100_node() leaves it, and gangs big0..big<n-1> waiting behind. */
static void full_h100_node_and_gangs(int n) {
    full_h100_node();
    char id[16];
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof(id), "big%d", i);
        waiting_big_gang(id);
    }
}

/* A walk that passed every waiter of a FIFO over is remembered (WalkMemo), so that the next
 * release with no more room skips the FIFO: a waiter that joined the FIFO's tail since must
 * still be tried, since that walk reached the FIFO's end. */
Test(indexes, r13_a_walk_that_tried_nobody_still_tries_a_waiter_that_joined_since) {
    full_h100_node();
    waiting_big_gang("big");
    fx_release("p1"); /* a walk with one free GPU passes "big" over */
    cr_assert_eq(container("y", "alice", 1).kind, DECISION_PLACED);
    cr_assert_eq(container("z", "alice", 1).kind, DECISION_WAITING);
    fx_release("p2");
    cr_assert_eq(decision_of("z").kind, DECISION_PLACED);
}

/* The same after the walk stopped at its miss limit: 64 gangs ahead of "z" were passed over
 * and "z" not met. Once one of them is cancelled, "z" is within the limit and the next
 * release must try it, not skip the FIFO as remembered. */
Test(indexes, r13_a_walk_that_stopped_at_its_miss_limit_reaches_further_once_a_waiter_left) {
    full_h100_node_and_gangs(64);
    fx_release("p1"); /* one free GPU: room for "z", which is not waiting yet */
    cr_assert_eq(container("y", "alice", 1).kind, DECISION_PLACED);
    cr_assert_eq(container("z", "alice", 1).kind, DECISION_WAITING);
    fx_release("p2"); /* the walk passes 64 gangs over and stops before "z" */
    cr_assert_eq(decision_of("z").kind, DECISION_WAITING);
    cr_assert_eq(container("w", "alice", 1).kind, DECISION_PLACED); /* p2's GPU, "z" missed */
    fx_release("big0");
    fx_release("p3");
    cr_assert_eq(decision_of("z").kind, DECISION_PLACED,
                 "a walk skipped the FIFO as remembered after a waiter left its front");
}

/* A memo whose walk stopped at its miss limit reaches past a waiter that leaves from among
 * those it met, to the next one, while a walk would pass that one over too: "z", one GPU,
 * waits behind 65 gangs; the walk on p1's GPU passes big0..big63 over and stops. The last it
 * met (big63) leaves: the memo now reaches big64, a gang, and the release of p2 may skip the
 * FIFO (a walk would stop before "z" again). Then big0 leaves: the next one is "z", which
 * fits, so the memo goes and the release of p3 places "z". */
Test(indexes,
     r13_a_walk_memo_at_its_miss_limit_reaches_past_a_leaver_only_over_a_waiter_it_passes) {
    full_h100_node_and_gangs(65);
    cr_assert_eq(container("z", "alice", 1).kind, DECISION_WAITING);
    fx_release("p1"); /* passes big0..big63 over, stops before big64 and "z" */
    cr_assert_eq(decision_of("z").kind, DECISION_WAITING);
    cr_assert_eq(container("y", "alice", 1).kind, DECISION_PLACED); /* p1's GPU */
    fx_release("big63");
    fx_release("p2"); /* a walk would meet big0..big62 and big64, and stop */
    cr_assert_eq(decision_of("z").kind, DECISION_WAITING);
    cr_assert_eq(container("w", "alice", 1).kind, DECISION_PLACED); /* p2's GPU */
    fx_release("big0");
    fx_release("p3");
    Decision z = decision_of("z");
    cr_assert_eq(z.kind, DECISION_PLACED,
                 "a walk skipped the FIFO although a waiter that fits came within reach: %s",
                 z.message);
}

/* The same memo once the waiters left after it bring the FIFO's end within reach: it then
 * stands for a walk that meets everyone, and "z", joining at the tail with a need that fits,
 * clears it (as it clears a memo whose walk reached the end), so that the next release places
 * "z" instead of skipping the FIFO. */
Test(indexes, r13_a_walk_memo_whose_reach_comes_to_the_fifos_end_yields_to_a_waiter_joining_there) {
    full_h100_node_and_gangs(65);
    fx_release("p1"); /* passes big0..big63 over, stops before big64 */
    cr_assert_eq(container("y", "alice", 1).kind, DECISION_PLACED); /* p1's GPU */
    fx_release("big0");                                             /* reaches big64 */
    fx_release("big1");                                             /* reaches the end */
    cr_assert_eq(container("z", "alice", 1).kind, DECISION_WAITING);
    fx_release("p2");
    Decision z = decision_of("z");
    cr_assert_eq(z.kind, DECISION_PLACED,
                 "a walk skipped the FIFO as remembered although a waiter that fits joined: %s",
                 z.message);
}

/* A container of alice for `count` H100s submitted at `submitted`, decided at 10; one of
 * more than a node has waits for a node that may join (R18). */
static Decision h100_submitted_at(const char *id, unsigned count, uint64_t submitted) {
    return fx_submit((RequestSpec){.id = id,
                                   .user = "alice",
                                   .kind = WORKLOAD_CONTAINER,
                                   .class_name = H100,
                                   .count = count,
                                   .wait_for_nodes = count > 8,
                                   .submitted = submitted},
                     10);
}

/* A memo whose walk stopped at its miss limit stays while waiters join behind the last one it
 * met, but not when one joins ahead: an older submission (a restart restoring its queue)
 * goes before the gangs the walk passed over and must be tried at the next release. */
Test(indexes, r13_a_walk_memo_at_its_miss_limit_yields_to_an_older_waiter_that_joined_ahead) {
    full_h100_node();
    char id[8];
    for (int i = 0; i < 65; i++) { /* one past the miss limit: the walk stops before the end */
        snprintf(id, sizeof(id), "big%d", i);
        Decision d = h100_submitted_at(id, 9, 10);
        cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
    }
    fx_release("p1"); /* the walk passes 64 gangs over and stops: a full memo */
    cr_assert_eq(container("y", "alice", 1).kind, DECISION_PLACED); /* p1's GPU */
    /* One behind the gangs leaves the memo in force, one ahead of them clears it. */
    cr_assert_eq(h100_submitted_at("late", 1, 10).kind, DECISION_WAITING);
    cr_assert_eq(h100_submitted_at("old", 1, 5).kind, DECISION_WAITING);
    fx_release("p2");
    Decision old = decision_of("old");
    cr_assert_eq(old.kind, DECISION_PLACED,
                 "a walk skipped the FIFO as remembered after an older waiter joined ahead: %s",
                 old.message);
    cr_assert_eq(decision_of("late").kind, DECISION_WAITING);
}

/* A class's FIFO of waiters, through many cancellations among them and older submissions
 * that go ahead of newer ones (a restart restoring its queue), still places its waiters
 * oldest submission first (R13); the fixture's sched_check recounts every index after each
 * step. */
Test(indexes, r13_waiters_are_placed_oldest_first_through_cancellations_and_older_submissions) {
    full_h100_node();
    char id[16];
    /* 300 waiters submitted at 1000.., each but every seventh cancelled as later ones join. */
    for (int i = 0; i < 300; i++) {
        snprintf(id, sizeof(id), "w%d", i);
        Decision d = fx_req(.id = id, .user = "alice", .kind = WORKLOAD_CONTAINER,
                            .class_name = H100, .count = 1, .submitted = 1000u + (unsigned)i);
        cr_assert_eq(d.kind, DECISION_WAITING, "%s", d.message);
        if (i % 7 != 1) /* i - 1 is not a multiple of seven */
            continue;
        for (int j = i - 7; j < i - 1; j++)
            if (j > 0 && j % 7) {
                snprintf(id, sizeof(id), "w%d", j);
                fx_release(id);
            }
    }
    for (int i = 294; i < 300; i++)
        if (i % 7) {
            snprintf(id, sizeof(id), "w%d", i);
            fx_release(id);
        }
    cr_assert_eq(sched_waiting_count(fx), 43);
    /* Older submissions (a restart restoring its queue) go ahead of every waiter left, in
     * their own order. */
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof(id), "old%d", i);
        cr_assert_eq(fx_req(.id = id, .user = "alice", .kind = WORKLOAD_CONTAINER,
                            .class_name = H100, .count = 1, .submitted = 500u + (unsigned)(4 - i))
                             .kind,
                     DECISION_WAITING);
    }
    /* Each release of a busy GPU places the oldest waiter. */
    const char *busy[] = {"p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8"};
    const char *want[] = {"old4", "old3", "old2", "old1", "old0", "w0", "w7", "w14"};
    for (int k = 0; k < 8; k++) {
        fx_release(busy[k]);
        cr_assert_eq(decision_of(want[k]).kind, DECISION_PLACED, "%s is not placed after %s left",
                     want[k], busy[k]);
        if (k + 1 < 8) {
            Decision next = decision_of(want[k + 1]);
            cr_assert_eq(next.kind, DECISION_WAITING, "%s jumped the queue", want[k + 1]);
        }
    }
}

static void own_h100_node(const char *name) {
    fx_gpu_node(.name = name, .site = "lab", .owner = "bob", .cls = H100, .gpus = 4);
}

/* Where request id runs (copied: the decision's name lives until the next change). */
static const char *node_of(const char *id) {
    static char name[64];
    Decision d = decision_of(id);
    cr_assert_eq(d.kind, DECISION_PLACED, "%s: %s", id, d.message);
    snprintf(name, sizeof(name), "%s", d.placement.node);
    return name;
}

/* An owner's requests in a site that does not trust them run on the owner's own machines: the
 * best fit (the fewest free GPUs that hold the request), and among machines with as many the
 * first of the owner's list, which a removal reorders (the last machine takes the removed one's
 * place), as a scan of the list decided. An owner of more than OWN_LISTS_MIN machines has them
 * searched through pool rows by free GPUs, built at the first search and kept through
 * placements, releases, a removal and an addition (the fixture checks them after each). */
Test(indexes, r2b_an_owners_request_takes_its_best_fit_machine_and_the_first_listed_of_equals) {
    fx_site("lab", SITE_LAB);
    char name[16];
    for (int i = 1; i <= 20; i++) {
        snprintf(name, sizeof(name), "o%02d", i);
        own_h100_node(name);
    }
    cr_assert_eq(container("a1", "bob", 3).kind, DECISION_PLACED);
    cr_expect_str_eq(node_of("a1"), "o01", "all have 4 free: the first listed");
    cr_assert_eq(container("a2", "bob", 2).kind, DECISION_PLACED);
    cr_expect_str_eq(node_of("a2"), "o02", "o01 has 1 free: the next with 2 or more");
    cr_assert_eq(container("a3", "bob", 1).kind, DECISION_PLACED);
    cr_expect_str_eq(node_of("a3"), "o01", "o01's one free GPU fits best");
    cr_assert_eq(container("a4", "bob", 1).kind, DECISION_PLACED);
    cr_expect_str_eq(node_of("a4"), "o02", "o02's two free GPUs fit best");
    fx_release("a1"); /* o01: 3 free, o02: 1, the others: 4 */
    cr_assert_eq(container("a5", "bob", 3).kind, DECISION_PLACED);
    cr_expect_str_eq(node_of("a5"), "o01", "o01's 3 free fit a 3 better than a node with 4");
    Error err = {0};
    cr_assert_eq(sched_remove_node(fx, "o04", &err), 0, "%s", err.message);
    /* The owner's list is o01 o02 o03 o20 o05 ... o19 now: o20 took o04's place. */
    cr_assert_eq(container("a6", "bob", 4).kind, DECISION_PLACED);
    cr_expect_str_eq(node_of("a6"), "o03");
    cr_assert_eq(container("a7", "bob", 4).kind, DECISION_PLACED);
    cr_expect_str_eq(node_of("a7"), "o20", "o20 is listed before o05 since o04 went");
    own_h100_node("o21"); /* listed after o19 */
    cr_assert_eq(container("a8", "bob", 4).kind, DECISION_PLACED);
    cr_expect_str_eq(node_of("a8"), "o05");
    cr_assert_eq(container("a9", "bob", 1).kind, DECISION_PLACED);
    cr_expect_str_eq(node_of("a9"), "o02", "o02 has the one free GPU left");
    for (int i = 6; i <= 19; i++) {
        char id[16];
        snprintf(id, sizeof(id), "b%02d", i);
        cr_assert_eq(container(id, "bob", 4).kind, DECISION_PLACED);
        snprintf(name, sizeof(name), "o%02d", i);
        cr_expect_str_eq(node_of(id), name);
    }
    cr_assert_eq(container("c1", "bob", 2).kind, DECISION_PLACED);
    cr_expect_str_eq(node_of("c1"), "o21", "the machine added last is the one left");
    Decision wait = container("c2", "bob", 3);
    cr_expect_eq(wait.kind, DECISION_WAITING, "no machine of bob's has 3 free: %s", wait.message);
}

/* A machine of bob's with 4 H100s, in sched s (host-bound or on vfio-pci for VMs). */
static void own_machine_in(Sched *s, unsigned k) {
    char name[16];
    snprintf(name, sizeof(name), "m%03u", k);
    DeviceSpec devs[4];
    for (unsigned i = 0; i < 4; i++)
        devs[i] = (DeviceSpec){.class_name = H100,
                               .binding = k % 3 == 0 ? BINDING_VFIO : BINDING_HOST,
                               .reset_verified = true};
    NodeSpec spec = {.name = name,
                     .site = "lab",
                     .owner = "bob",
                     .platform = PLATFORM_LINUX,
                     .cpu_cores = 64,
                     .devices = devs,
                     .n_devices = 4};
    Error err = {0};
    int r = sched_add_node(s, &spec, 0, &err);
    cr_assert(r == 0 || r == -EEXIST, "%s", err.message);
}

/* The same decisions through an owner's pool rows (the fixture's Sched, rows built at the
 * first search and checked after every change) and through the scan of `owned` in order (a
 * Sched whose own_lists_min is past the fleet), over up to 200 machines of one owner: rows of
 * several words, dropped when `owned` outgrows them or a removal reorders it, and built again
 * at the next search. Seeded; a failure names its op. */
Test(indexes, r2b_an_owners_pool_rows_decide_as_the_scan_of_their_machines) {
    Sched *scan = sched_new(fx_cat), *both[2] = {fx, scan};
    cr_assert_not_null(scan);
    sched_set_own_lists_min(scan, UINT_MAX);
    fx_seed(0x51c0ffee2b2d4e17ull);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(sched_add_site(both[i], "lab", SITE_LAB, NULL), 0);
        for (unsigned k = 0; k < 70; k++)
            own_machine_in(both[i], k);
    }
    static const unsigned counts[] = {1, 1, 2, 3, 4};
    char live[512][16];
    size_t n_live = 0;
    unsigned machines = 70, next_id = 0;
    for (unsigned op = 0; op < 6000; op++) {
        unsigned what = fx_pick(20);
        if (what < 11) {
            char id[16];
            snprintf(id, sizeof(id), "r%u", next_id++);
            RequestSpec spec = {.id = id,
                                .user = "bob",
                                .kind = fx_pick(4) ? WORKLOAD_CONTAINER : WORKLOAD_VM,
                                .class_name = H100,
                                .count = counts[fx_pick(ARRAY_SIZE(counts))]};
            char where[2][64] = {"", ""};
            Decision d[2];
            for (int i = 0; i < 2; i++) {
                cr_assert_eq(sched_submit(both[i], &spec, op, &d[i], NULL), 0, "op %u", op);
                if (d[i].kind == DECISION_PLACED)
                    snprintf(where[i], sizeof(where[i]), "%s", d[i].placement.node);
            }
            cr_assert_eq(d[0].kind, d[1].kind, "op %u: %s: '%s' vs '%s'", op, id, d[0].message,
                         d[1].message);
            cr_assert_str_eq(where[0], where[1], "op %u: %s placed on different machines", op, id);
            if (n_live < ARRAY_SIZE(live))
                snprintf(live[n_live++], sizeof(live[0]), "%s", id);
        } else if (what < 18 && n_live) {
            size_t k = fx_pick((unsigned)n_live);
            for (int i = 0; i < 2; i++)
                cr_assert_eq(sched_release(both[i], live[k], op, NULL), 0, "op %u", op);
            memcpy(live[k], live[--n_live], sizeof(live[0]));
        } else if (what == 18) { /* an idle machine goes; the last of `owned` takes its place */
            char name[16];
            snprintf(name, sizeof(name), "m%03u", fx_pick(machines));
            int r[2];
            for (int i = 0; i < 2; i++)
                r[i] = sched_remove_node(both[i], name, NULL);
            cr_assert_eq(r[0], r[1], "op %u: removing %s", op, name);
        } else if (machines < 200) {
            for (int i = 0; i < 2; i++)
                own_machine_in(both[i], machines);
            machines++;
        }
    }
    cr_expect_geq(machines, 130, "the owner's machines outgrew the first rows");
    sched_free(scan);
}

/* A walk that passes a stranger's container over because the GPU freed is bound to the host
 * driver (a stranger's work takes a vfio-bound GPU, R2) remembers it by binding: a release of
 * the same kind of GPU on a node of the same site and owner skips the FIFO. Once the site
 * trusts that user the verdict no longer stands, and the next such release must place them. */
Test(indexes, r2_a_walk_memo_by_binding_is_forgotten_once_the_site_trusts_the_waiter) {
    fx_site("lab", SITE_LAB);
    /* Kata on each: a stranger's container runs under it, on a vfio-bound GPU (R2b). */
    fx_gpu_node(.name = "h1", .site = "lab", .owner = "ops", .cls = H100, .gpus = 1, .kata = true);
    fx_gpu_node(.name = "h2", .site = "lab", .owner = "ops", .cls = H100, .gpus = 1, .kata = true);
    fx_gpu_node(.name = "v1", .site = "lab", .owner = "ops", .cls = H100, .gpus = 1,
                .binding = BINDING_VFIO, .kata = true);
    cr_assert_eq(container("a1", "ops", 1).kind, DECISION_PLACED);
    cr_assert_eq(container("a2", "ops", 1).kind, DECISION_PLACED);
    cr_assert_eq(
            fx_req(.id = "a3", .user = "ops", .kind = WORKLOAD_VM, .class_name = H100, .count = 1)
                    .kind,
            DECISION_PLACED); /* a VM: the vfio-bound GPU */
    Decision e0 = container("eve1", "eve", 1);
    cr_assert_eq(e0.kind, DECISION_WAITING, "%s", e0.message);
    fx_release("a1"); /* a host GPU: eve's container passed over for its binding */
    cr_assert_eq(decision_of("eve1").kind, DECISION_WAITING);
    Error err = {0};
    cr_assert_eq(sched_site_trust(fx, "lab", "eve", true, &err), 0, "%s", err.message);
    fx_release("a2"); /* the other host GPU, on a node of the same site and owner */
    Decision eve1 = decision_of("eve1");
    cr_assert_eq(eve1.kind, DECISION_PLACED,
                 "a walk skipped the FIFO as remembered after the site came to trust the "
                 "waiter: %s",
                 eve1.message);
}

/* A walk memo by binding passes a waiting gang over only while the gang holds a node (a walk
 * that meets a gang with none tries to reserve one for it). When its node leaves the fleet
 * the gang holds none, and the memo must go: the fixture's invariant check after every
 * mutation finds a memo that would skip a gang with a reservation to make. */
Test(indexes, r12_a_walk_memo_by_binding_is_forgotten_when_a_passed_gang_loses_its_node) {
    fx_site("lab", SITE_LAB);
    fx_gpu_node(.name = "h1", .site = "lab", .owner = "ops", .cls = H100, .gpus = 2, .kata = true);
    fx_gpu_node(.name = "v1", .site = "lab", .owner = "ops", .cls = H100, .gpus = 2,
                .binding = BINDING_VFIO, .kata = true);
    cr_assert_eq(container("a1", "ops", 2).kind, DECISION_PLACED); /* both host GPUs */
    cr_assert_eq(
            fx_req(.id = "vm", .user = "ops", .kind = WORKLOAD_VM, .class_name = H100, .count = 1)
                    .kind,
            DECISION_PLACED);                /* one of the vfio-bound GPUs */
    Decision eg = container("eg", "eve", 2); /* a stranger's gang: it reserves v1 */
    cr_assert_eq(eg.kind, DECISION_WAITING, "%s", eg.message);
    fx_release("a1"); /* two host GPUs: the gang passed over for its binding */
    cr_assert_eq(decision_of("eg").kind, DECISION_WAITING);
    Error err = {0};
    cr_assert_eq(sched_node_set_cordoned(fx, "v1", true, 0, &err), 0, "%s", err.message);
    fx_release("vm");
    cr_assert_eq(sched_remove_node(fx, "v1", &err), 0, "%s", err.message);
    cr_assert_eq(sched_check(fx, &err), 0, "%s", err.message);
    cr_assert_eq(decision_of("eg").kind, DECISION_WAITING);
}
