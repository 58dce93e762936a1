/* records.c: workloads, quarantine and host-driver records under the agent's state folder. */
#include "records.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/pci-sysfs.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

#define RECORDS_MAX (1024 * 1024)

/* The workloads file holds two copies of the records, each in a slot of half the file, each
 * opening with this header; a write goes over the older copy, and a reader takes the newest
 * whole one (the header's sum matches). A file without the header is the first format (the
 * records' lines alone), read as such and replaced by the two-copy file at the next write. */
#define RECORDS_MAGIC "# einsora agent records v2: "
#define RECORDS_HEADER_MAX 128
#define RECORDS_SLOT_MIN 4096
#define ROUND_UP(x, to) (((x) + (to)-1) / (to) * (to))

static int mkdir_one(const char *path, Error *err) {
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return error_set(err, -errno, "could not create the agent's state folder %s: %s", path,
                         strerror(errno));
    return 0;
}

int agent_state_dir_ensure(const char *state_dir, Error *err) {
    char path[PATH_MAX];
    int r = mkdir_one(state_dir, err);
    if (r < 0)
        return r;
    static const char *const subs[] = {"quarantine", "host-driver"};
    for (size_t i = 0; i < ARRAY_SIZE(subs); i++) {
        r = agent_state_path(state_dir, subs[i], path, sizeof(path), err);
        if (r < 0)
            return r;
        r = mkdir_one(path, err);
        if (r < 0)
            return r;
    }
    return 0;
}

int agent_state_lock(const char *state_dir, int *ret_fd, Error *err) {
    char path[PATH_MAX];
    int r = agent_state_dir_ensure(state_dir, err);
    if (r < 0)
        return r;
    if ((r = agent_state_path(state_dir, "lock", path, sizeof(path), err)) < 0)
        return r;
    _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return error_set(err, -errno, "could not open the agent's lock file %s: %s", path,
                         strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        if (e != EWOULDBLOCK)
            return error_set(err, -e, "could not lock the agent's state folder %s: %s", state_dir,
                             strerror(e));
        /* The holder wrote its pid once it had the lock: a read racing that write finds
         * nothing, and the sentence then names no pid. */
        char buf[24] = "";
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        uint64_t pid = 0;
        if (n > 0) {
            buf[n] = 0;
            buf[strcspn(buf, "\n")] = 0;
        }
        /* A lock whose taker is gone is held by what it forked: a kernel write
         * (kernel_write()) stuck in the kernel, which must not be raced by another rebind. */
        if (n > 0 && parse_decimal_uint64(buf, INT32_MAX, &pid) >= 0 && pid > 0 &&
            kill((pid_t)pid, 0) < 0 && errno == ESRCH)
            return error_set(err, -EBUSY,
                             "the agent's state folder %s is still locked, though the command "
                             "that locked it (pid %" PRIu64 ") has ended: a write to the kernel "
                             "it started is still in flight (its process hangs in the kernel; "
                             "'fuser -v %s' names it). It ends when the kernel returns, or at a "
                             "reboot",
                             state_dir, pid, path);
        if (n > 0 && parse_decimal_uint64(buf, INT32_MAX, &pid) >= 0 && pid > 0)
            return error_set(err, -EBUSY,
                             "the agent's state folder %s is in use by another einsora agent "
                             "command (pid %" PRIu64 "); one at a time works on it",
                             state_dir, pid);
        return error_set(err, -EBUSY,
                         "the agent's state folder %s is in use by another einsora agent "
                         "command; one at a time works on it",
                         state_dir);
    }
    char pid[24];
    snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    ssize_t w = ftruncate(fd, 0) < 0 ? -1 : pwrite(fd, pid, strlen(pid), 0);
    if (w != (ssize_t)strlen(pid)) {
        int e = w < 0 ? errno : EIO;
        return error_set(err, -e, "could not write the agent's lock file %s: %s", path,
                         strerror(e));
    }
    *ret_fd = TAKE_FD(fd);
    return 0;
}

/* A state file write's result r, with an error that names the file. */
static int write_result(const char *path, int r, Error *err) {
    if (r == -ENAMETOOLONG)
        return error_set(err, r, "the path %s is too long", path);
    if (r < 0)
        return error_set(err, r, "could not write %s: %s", path, strerror(-r));
    return 0;
}

int write_file_atomic_as(const char *path, const char *content, WriteSync sync, Error *err) {
    return write_result(path, write_string_file_atomic_as(path, content, sync), err);
}

int write_lines_in_place(const char *path, const char *content, Error *err) {
    return write_result(path, write_lines_file_in_place(path, content), err);
}

int write_file_atomic(const char *path, const char *content, Error *err) {
    return write_file_atomic_as(path, content, WRITE_SYNC_ALL, err);
}

int agent_state_path(const char *state_dir, const char *name, char *buf, size_t size, Error *err) {
    if ((size_t)snprintf(buf, size, "%s/%s", state_dir, name) >= size)
        return error_set(err, -ENAMETOOLONG, "the state folder path %s is too long", state_dir);
    return 0;
}

int agent_state_read(const char *state_dir, const char *name, const char *what, size_t max,
                     char path[PATH_MAX], char **ret, size_t *ret_len, Error *err) {
    int r = agent_state_path(state_dir, name, path, PATH_MAX, err);
    if (r < 0)
        return r;
    r = read_full_file(path, max, ret, ret_len);
    if (r < 0 && r != -ENOENT)
        return error_set(err, r, "could not read %s %s: %s", what, path, strerror(-r));
    return r;
}

int agent_state_write(const char *state_dir, const char *name, const char *content, Error *err) {
    char path[PATH_MAX];
    int r = agent_state_path(state_dir, name, path, sizeof(path), err);
    return r < 0 ? r : write_file_atomic(path, content, err);
}

static bool is_record_id(const char *s) {
    if (!*s || strlen(s) > 128)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("-_.:/@", *s)))
            return false;
    return true;
}

int agent_records_parse(const char *text, char ***ret_bdfs, char ***ret_ids, size_t *ret_n,
                        Error *err) {
    char **bdfs = NULL, **ids = NULL;
    size_t nb = 0, ni = 0;
    unsigned lineno = 0;
    int r = 0;
    for (const char *p = text; *p && r >= 0;) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        lineno++;
        char line[256];
        if (len >= sizeof(line)) {
            r = error_set(err, -EINVAL, "workloads record line %u is too long", lineno);
            break;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + (eol ? 1 : 0);
        strip_trailing(line);
        if (!line[0] || line[0] == '#')
            continue;
        char *sp = strchr(line, ' ');
        if (!sp) {
            r = error_set(err, -EINVAL,
                          "workloads record line %u must be \"<pci-address> <workload-id>\"",
                          lineno);
            break;
        }
        *sp = '\0';
        const char *id = sp + 1;
        if (!pci_bdf_is_valid(line) || !is_record_id(id)) {
            r = error_set(err, -EINVAL,
                          "workloads record line %u must be \"<pci-address> <workload-id>\"",
                          lineno);
            break;
        }
        if (strv_push(&bdfs, &nb, line) < 0 || strv_push(&ids, &ni, id) < 0)
            r = error_set(err, -ENOMEM, "out of memory");
    }
    if (r < 0 || nb != ni) {
        strv_free(bdfs, nb);
        strv_free(ids, ni);
        return r < 0 ? r : -ENOMEM;
    }
    *ret_bdfs = bdfs;
    *ret_ids = ids;
    *ret_n = nb;
    return 0;
}

/* FNV-1a, 64 bits: enough to tell a torn copy from a whole one (not an adversary's forgery:
 * whoever can write the state folder can write any records). */
static uint64_t records_sum(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3u;
    return h;
}

static int records_header(char buf[RECORDS_HEADER_MAX], uint64_t seq, const char *body,
                          size_t len) {
    return snprintf(buf, RECORDS_HEADER_MAX,
                    RECORDS_MAGIC "seq %" PRIu64 " len %zu sum %016" PRIx64 "\n", seq, len,
                    records_sum(body, len));
}

/* "<name> <number>" at *p, the number in base 10 (or 16 with exactly 16 digits); moves *p past
 * it and one following character, which must be end. */
static bool take_field(const char **p, const char *name, bool hex, char end, uint64_t *ret) {
    size_t nl = strlen(name);
    if (strncmp(*p, name, nl) || (*p)[nl] != ' ')
        return false;
    const char *d = *p + nl + 1;
    uint64_t v = 0;
    size_t k = 0;
    for (;; k++) {
        char c = d[k];
        int x = c >= '0' && c <= '9' ? c - '0' : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (x < 0)
            break;
        if (k >= (hex ? 16 : 19)) /* no overflow: 19 decimal digits fit in 64 bits */
            return false;
        v = v * (hex ? 16 : 10) + (uint64_t)x;
    }
    if (!k || (hex && k != 16) || (!hex && k > 1 && d[0] == '0') || d[k] != end)
        return false;
    *p = d + k + 1;
    *ret = v;
    return true;
}

typedef struct RecordsCopy {
    bool whole;
    uint64_t seq;
    const char *body;
    size_t len;
} RecordsCopy;

/* The copy in the slot at p (size bytes): whole when its header parses and its body fits and
 * matches the header's sum. */
static RecordsCopy records_copy(const char *p, size_t size) {
    RecordsCopy c = {0};
    size_t ml = strlen(RECORDS_MAGIC);
    const char *nl = memchr(p, '\n', MIN(size, (size_t)RECORDS_HEADER_MAX));
    if (!nl || (size_t)(nl - p) < ml || memcmp(p, RECORDS_MAGIC, ml))
        return c;
    const char *q = p + ml;
    uint64_t seq, len, sum;
    if (!take_field(&q, "seq", false, ' ', &seq) || !take_field(&q, "len", false, ' ', &len) ||
        !take_field(&q, "sum", true, '\n', &sum) || q != nl + 1 || len > size - (size_t)(q - p) ||
        records_sum(q, len) != sum)
        return c;
    return (RecordsCopy){.whole = true, .seq = seq, .body = q, .len = len};
}

/* The two copies of a file in the two-copy format (data, len) and its slot size; returns the
 * index of the newest whole copy, -ENOMSG when the file is in the first format, -EBADMSG when
 * neither copy is whole. A file is in the two-copy format when either slot opens with the
 * header's start: a write torn in the middle leaves the other slot as it was. */
static int records_copies(const char *data, size_t len, RecordsCopy copies[2], size_t *ret_slot) {
    size_t ml = strlen(RECORDS_MAGIC), slot = len / 2;
    if ((len < ml || memcmp(data, RECORDS_MAGIC, ml)) &&
        (len % 2 || slot < ml || memcmp(data + slot, RECORDS_MAGIC, ml)))
        return -ENOMSG;
    copies[0] = records_copy(data, slot);
    copies[1] = len % 2 ? (RecordsCopy){0} : records_copy(data + slot, slot);
    *ret_slot = slot;
    if (!copies[0].whole && !copies[1].whole)
        return -EBADMSG;
    return !copies[0].whole || (copies[1].whole && copies[1].seq > copies[0].seq);
}

int agent_records_decode(const char *data, size_t len, char ***ret_bdfs, char ***ret_ids,
                         size_t *ret_n, Error *err) {
    RecordsCopy copies[2];
    size_t slot;
    int k = records_copies(data, len, copies, &slot);
    if (k == -EBADMSG)
        return error_set(err, -EBADMSG,
                         "neither copy of the records is whole (a damaged file: the GPUs it "
                         "named may be in use)");
    const char *text = k >= 0 ? copies[k].body : data;
    size_t n = k >= 0 ? copies[k].len : len;
    if (memchr(text, '\0', n))
        return error_set(err, -EINVAL, "the records contain a NUL byte");
    _cleanup_free_ char *copy = strndup(text, n);
    if (!copy)
        return error_set(err, -ENOMEM, "out of memory");
    return agent_records_parse(copy, ret_bdfs, ret_ids, ret_n, err);
}

int agent_records_list(const char *state_dir, char ***ret_bdfs, char ***ret_ids, size_t *ret_n,
                       Error *err) {
    char path[PATH_MAX];
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = agent_state_read(state_dir, "workloads", "the agent's workload records", RECORDS_MAX,
                             path, &text, &len, err);
    if (r == -ENOENT) {
        *ret_bdfs = *ret_ids = NULL;
        *ret_n = 0;
        return 0;
    }
    if (r < 0)
        return r;
    Error why = {0};
    r = agent_records_decode(text, len, ret_bdfs, ret_ids, ret_n, &why);
    return r < 0 ? error_set(err, r, "the agent's workload records %s: %s", path, why.message) : r;
}

int agent_records_for_gpu(const char *state_dir, const char *bdf, char ***ret, size_t *ret_n,
                          Error *err) {
    char **bdfs, **ids;
    size_t n;
    int r = agent_records_list(state_dir, &bdfs, &ids, &n, err);
    if (r < 0)
        return r;
    char **out = NULL;
    size_t n_out = 0;
    for (size_t i = 0; i < n && r >= 0; i++)
        if (STREQ(bdfs[i], bdf))
            r = strv_push(&out, &n_out, ids[i]);
    strv_free(bdfs, n);
    strv_free(ids, n);
    if (r < 0) {
        strv_free(out, n_out);
        return error_set(err, r, "out of memory");
    }
    *ret = out;
    *ret_n = n_out;
    return 0;
}

/* Fill the slot at dst (size bytes) with body's copy: its header, body, then blank lines to the
 * slot's end, so that the file read by a person (or parsed as lines by an older agent: the
 * union of both copies, the safe side) shows no line of the copy it replaced. False when the
 * copy does not fit. */
static bool records_slot_fill(char *dst, size_t size, uint64_t seq, const char *body, size_t len) {
    char header[RECORDS_HEADER_MAX];
    size_t h = (size_t)records_header(header, seq, body, len);
    if (h + len > size)
        return false;
    memcpy(dst, header, h);
    memcpy(dst + h, body, len);
    memset(dst + h + len, '\n', size - h - len);
    return true;
}

/* The whole file for body: its first copy holds it (seq), the second is blank until the next
 * write; each copy has room for twice body and its header (RECORDS_SLOT_MIN at least), so that
 * the next writes fit in place. NULL when out of memory. */
static char *records_file_new(const char *body, size_t len, uint64_t seq) {
    size_t slot = ROUND_UP(MAX(2 * (RECORDS_HEADER_MAX + len), (size_t)RECORDS_SLOT_MIN),
                           RECORDS_SLOT_MIN);
    char *f = malloc(2 * slot + 1);
    if (!f)
        return NULL;
    (void)records_slot_fill(f, slot, seq, body, len); /* fits: the slot is twice the copy */
    memset(f + slot, '\n', slot);
    f[2 * slot] = '\0';
    return f;
}

/* Write body over the older copy of the records file at path and fdatasync it: the name, the
 * size and the blocks stay as they are, so nothing but the copy goes to the disk (a new file
 * and its rename cost the inode, the allocation and the folder, each synced, at every start).
 * Returns 1 when written, 0 when the file cannot take it in place (missing, in the first
 * format, too small, both copies damaged: the caller writes a new file), -errno on failure;
 * *ret_seq is the newest seq found (0 when none). The file is read whole again, after the
 * caller's read: which copy is whole takes both bodies' sums, and it is a few KiB. */
static int records_write_in_place(const char *path, const char *body, size_t len,
                                  uint64_t *ret_seq) {
    *ret_seq = 0;
    _cleanup_free_ char *old = NULL;
    size_t old_len;
    int r = read_full_file(path, RECORDS_MAX, &old, &old_len);
    if (r < 0)
        return r == -ENOENT || r == -EFBIG ? 0 : r;
    RecordsCopy copies[2];
    size_t slot;
    int newest = records_copies(old, old_len, copies, &slot);
    if (newest < 0)
        return 0;
    *ret_seq = copies[newest].seq;
    /* The slot of the copy that is not the newest, built in the buffer just read. */
    char *dst = old + (newest == 0 ? slot : 0);
    if (!records_slot_fill(dst, slot, copies[newest].seq + 1, body, len))
        return 0;
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = pwrite(fd, dst, slot, (off_t)(dst - old));
    if (n < 0)
        return -errno;
    if ((size_t)n != slot)
        return -EIO;
    return fdatasync(fd) < 0 ? -errno : 1;
}

static int records_rewrite(const char *state_dir, char **bdfs, char **ids, size_t n,
                           const char *skip_id, Error *err) {
    StrBuf b = {0};
    strbuf_puts(&b,
                "# einsora agent: workloads running on GPUs (\"<pci-address> <workload-id>\")\n");
    for (size_t i = 0; i < n; i++)
        if (!skip_id || STRNEQ(ids[i], skip_id))
            strbuf_printf(&b, "%s %s\n", bdfs[i], ids[i]);
    if (!strbuf_cstr(&b))
        return error_set(err, -ENOMEM, "out of memory");
    char path[PATH_MAX];
    uint64_t seq = 0;
    int r = agent_state_path(state_dir, "workloads", path, sizeof(path), err);
    if (r < 0) {
        strbuf_done(&b);
        return r;
    }
    r = records_write_in_place(path, b.data, b.len, &seq);
    if (r != 0) {
        strbuf_done(&b);
        return r > 0 ? 0 : write_result(path, r, err);
    }
    _cleanup_free_ char *file = records_file_new(b.data, b.len, seq + 1);
    strbuf_done(&b);
    if (!file)
        return error_set(err, -ENOMEM, "out of memory");
    /* Synced with its name: the copies written in place later are only as durable as it. */
    Error first = {0};
    r = write_file_atomic_as(path, file, WRITE_SYNC_ALL, &first);
    /* The folder is made when missing (the agent makes it at its start; someone removed it, or
     * a tool writes a fresh one) rather than asked for at every rewrite: three mkdir calls that
     * fail with EEXIST, at every turn of the agent. */
    if (r == -ENOENT && (r = agent_state_dir_ensure(state_dir, err)) >= 0)
        r = write_file_atomic_as(path, file, WRITE_SYNC_ALL, err);
    else if (r < 0 && first.code)
        error_set(err, first.code, "%s", first.message);
    return r;
}

int agent_records_add(const char *state_dir, const char *bdf, const char *workload_id, Error *err) {
    return agent_records_add_many(state_dir, &bdf, 1, workload_id, err);
}

int agent_records_add_many(const char *state_dir, const char *const *new_bdfs, size_t n_new,
                           const char *workload_id, Error *err) {
    /* One workload's GPUs: an update that removes nothing and adds them under its id. */
    _cleanup_free_ const char **ids = calloc(MAX(n_new, 1), sizeof(*ids));
    if (!ids)
        return error_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n_new; i++)
        ids[i] = workload_id;
    int r = agent_records_update(state_dir, NULL, 0, new_bdfs, ids, n_new, err);
    return MIN(r, 0);
}

static bool has_record(char **bdfs, char **ids, size_t n, const char *bdf, const char *id) {
    for (size_t i = 0; i < n; i++)
        if (STREQ(bdfs[i], bdf) && STREQ(ids[i], id))
            return true;
    return false;
}

static int check_adds(const char *const *add_bdfs, const char *const *add_ids, size_t n_add,
                      Error *err) {
    for (size_t i = 0; i < n_add; i++)
        if (!pci_bdf_is_valid(add_bdfs[i]) || !is_record_id(add_ids[i]))
            return error_set(
                    err, -EINVAL,
                    "a workload record needs a PCI address and a workload id without spaces");
    return 0;
}

int agent_records_update_from(const char *state_dir, char *const *bdfs, char *const *ids, size_t n,
                              const char *const *remove_ids, size_t n_remove,
                              const char *const *add_bdfs, const char *const *add_ids, size_t n_add,
                              Error *err) {
    int r = check_adds(add_bdfs, add_ids, n_add, err);
    if (r < 0)
        return r;
    /* Kept lines first (their order), the new ones after: as add_many and remove write them. */
    char **kb = NULL, **ki = NULL;
    size_t nb = 0, ni = 0, removed = 0;
    for (size_t i = 0; i < n && r >= 0; i++) {
        bool drop = false;
        for (size_t k = 0; k < n_remove && !drop; k++)
            drop = STREQ(ids[i], remove_ids[k]);
        removed += drop;
        if (!drop && (strv_push(&kb, &nb, bdfs[i]) < 0 || strv_push(&ki, &ni, ids[i]) < 0))
            r = error_set(err, -ENOMEM, "out of memory");
    }
    size_t added = 0;
    for (size_t i = 0; i < n_add && r >= 0; i++) {
        if (has_record(kb, ki, nb, add_bdfs[i], add_ids[i]))
            continue; /* recorded already (a workload confirmed again): one line is enough */
        if (strv_push(&kb, &nb, add_bdfs[i]) < 0 || strv_push(&ki, &ni, add_ids[i]) < 0)
            r = error_set(err, -ENOMEM, "out of memory");
        added++;
    }
    if (r >= 0 && (removed || added))
        r = records_rewrite(state_dir, kb, ki, nb, NULL, err);
    strv_free(kb, nb);
    strv_free(ki, ni);
    return r < 0 ? r : (int)MIN(added, (size_t)INT_MAX);
}

int agent_records_update(const char *state_dir, const char *const *remove_ids, size_t n_remove,
                         const char *const *add_bdfs, const char *const *add_ids, size_t n_add,
                         Error *err) {
    char **bdfs, **ids;
    size_t n;
    int r = check_adds(add_bdfs, add_ids, n_add, err);
    if (r < 0 || (r = agent_records_list(state_dir, &bdfs, &ids, &n, err)) < 0)
        return r;
    r = agent_records_update_from(state_dir, bdfs, ids, n, remove_ids, n_remove, add_bdfs, add_ids,
                                  n_add, err);
    strv_free(bdfs, n);
    strv_free(ids, n);
    return r;
}

int agent_records_remove(const char *state_dir, const char *workload_id, Error *err) {
    char **bdfs, **ids;
    size_t n;
    int r = agent_records_list(state_dir, &bdfs, &ids, &n, err);
    if (r < 0)
        return r;
    bool found = false;
    for (size_t i = 0; i < n; i++)
        found = found || STREQ(ids[i], workload_id);
    r = found ? records_rewrite(state_dir, bdfs, ids, n, workload_id, err)
              : error_set(err, -ENOENT, "no workload %s is recorded", workload_id);
    strv_free(bdfs, n);
    strv_free(ids, n);
    return r;
}

static int per_gpu_path(const char *state_dir, const char *sub, const char *bdf, char *buf,
                        size_t size) {
    if (!pci_bdf_is_valid(bdf))
        return -EINVAL;
    return (size_t)snprintf(buf, size, "%s/%s/%s", state_dir, sub, bdf) >= size ? -ENAMETOOLONG : 0;
}

static int per_gpu_set(const char *state_dir, const char *sub, const char *bdf, const char *line,
                       Error *err) {
    char path[PATH_MAX];
    int r = per_gpu_path(state_dir, sub, bdf, path, sizeof(path));
    if (r < 0)
        return error_set(err, r, "'%s' is not a PCI address like 0000:01:00.0", bdf);
    r = agent_state_dir_ensure(state_dir, err);
    if (r < 0)
        return r;
    _cleanup_free_ char *content = strprintf("%s\n", line);
    if (!content)
        return error_set(err, -ENOMEM, "out of memory");
    /* One line only: a reason with newlines would read back as something else. */
    for (char *c = content; c[1]; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    return write_file_atomic(path, content, err);
}

static int per_gpu_get(const char *state_dir, const char *sub, const char *bdf, char **ret) {
    char path[PATH_MAX];
    int r = per_gpu_path(state_dir, sub, bdf, path, sizeof(path));
    return r < 0 ? r : read_one_line(path, ret);
}

int agent_quarantine_set(const char *state_dir, const char *bdf, const char *reason, Error *err) {
    return per_gpu_set(state_dir, "quarantine", bdf, reason, err);
}

int agent_quarantine_get(const char *state_dir, const char *bdf, char **ret_reason) {
    return per_gpu_get(state_dir, "quarantine", bdf, ret_reason);
}

int agent_quarantine_clear(const char *state_dir, const char *bdf, Error *err) {
    char path[PATH_MAX];
    int r = per_gpu_path(state_dir, "quarantine", bdf, path, sizeof(path));
    if (r < 0)
        return error_set(err, r, "'%s' is not a PCI address like 0000:01:00.0", bdf);
    if (unlink(path) < 0) {
        if (errno == ENOENT)
            return error_set(err, -ENOENT, "GPU %s is not quarantined", bdf);
        return error_set(err, -errno, "could not clear the quarantine of %s: %s", bdf,
                         strerror(errno));
    }
    return 0;
}

int agent_host_driver_remember(const char *state_dir, const char *bdf, const char *driver,
                               Error *err) {
    /* Usually unchanged since the last move: skip the fsync'd rewrite then. */
    _cleanup_free_ char *old = NULL;
    if (per_gpu_get(state_dir, "host-driver", bdf, &old) >= 0 && STREQ(old, driver))
        return 0;
    return per_gpu_set(state_dir, "host-driver", bdf, driver, err);
}

int agent_host_driver_get(const char *state_dir, const char *bdf, char **ret) {
    return per_gpu_get(state_dir, "host-driver", bdf, ret);
}
