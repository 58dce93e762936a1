/* journal.c: append-only, fsync'd journal of one binding operation, and its parser. */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/pci-sysfs.h"
#include "agent/records.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/strutil.h"

#define JOURNAL_FILE_MAX (64 * 1024)

static const char *const step_names[_JOURNAL_STEP_MAX] = {
        [JOURNAL_STEP_INTENT] = "intent",     [JOURNAL_STEP_OVERRIDE] = "override",
        [JOURNAL_STEP_UNBOUND] = "unbound",   [JOURNAL_STEP_PROBED] = "probed",
        [JOURNAL_STEP_VERIFIED] = "verified",
};

const char *journal_step_to_string(JournalStep s) {
    return s >= 0 && s < _JOURNAL_STEP_MAX ? step_names[s] : "?";
}

const char *journal_outcome_to_string(JournalOutcome o) {
    switch (o) {
    case JOURNAL_OPEN:
        return "open";
    case JOURNAL_DONE:
        return "done";
    case JOURNAL_ROLLED_BACK:
        return "rolled-back";
    case JOURNAL_QUARANTINED:
        return "quarantined";
    }
    return "?";
}

/* Driver names and driver_override values as the kernel allows them; "-" stands for none. */
static bool parse_name(const char *s, char out[JOURNAL_NAME_MAX]) {
    if (STREQ(s, "-")) {
        out[0] = '\0';
        return true;
    }
    size_t n = strlen(s);
    if (n == 0 || n >= JOURNAL_NAME_MAX)
        return false;
    for (const char *c = s; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-' || *c == '.'))
            return false;
    memcpy(out, s, n + 1);
    return true;
}

static JournalFn *find_fn(JournalOp *op, const char *bdf) {
    for (size_t i = 0; i < op->n_fns; i++)
        if (STREQ(op->fns[i].bdf, bdf))
            return &op->fns[i];
    return NULL;
}

static int parse_line(char *line, unsigned lineno, JournalOp *op, bool *have_op, Error *err) {
    char *f[6];
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (n == ARRAY_SIZE(f))
            return error_set(err, -EINVAL, "journal line %u has too many fields", lineno);
        f[n++] = t;
    }
    uint64_t id;
    if (n == 0)
        return error_set(err, -EINVAL, "journal line %u is empty", lineno);
    if (STREQ(f[0], "begin")) {
        if (n != 4 || parse_uint64(f[1], UINT32_MAX, &id) < 0 || !pci_bdf_is_valid(f[2]) ||
            !(STREQ(f[3], "vfio") || STREQ(f[3], "host")))
            return error_set(err, -EINVAL,
                             "journal line %u: expected \"begin <id> <pci-address> vfio|host\"",
                             lineno);
        if (*have_op && op->outcome == JOURNAL_OPEN)
            return error_set(err, -EINVAL,
                             "journal line %u begins an operation before the previous one ended",
                             lineno);
        *op = (JournalOp){.id = (unsigned long)id, .to_vfio = STREQ(f[3], "vfio")};
        strcpy(op->gpu, f[2]);
        *have_op = true;
        return 0;
    }
    if (!*have_op)
        return error_set(err, -EINVAL, "journal line %u comes before any \"begin\"", lineno);
    if (STREQ(f[0], "fn")) {
        JournalFn fn = {0};
        if (n != 5 || !pci_bdf_is_valid(f[1]) || !parse_name(f[2], fn.from) ||
            !parse_name(f[3], fn.to) || !parse_name(f[4], fn.override))
            return error_set(
                    err, -EINVAL,
                    "journal line %u: expected \"fn <pci-address> <from> <to> <override>\"",
                    lineno);
        if (op->outcome != JOURNAL_OPEN || find_fn(op, f[1]) || op->n_fns == JOURNAL_MAX_FNS)
            return error_set(err, -EINVAL,
                             "journal line %u: function %s does not fit this operation", lineno,
                             f[1]);
        for (size_t i = 0; i < op->n_fns; i++)
            if (op->fns[i].step != JOURNAL_STEP_INTENT)
                return error_set(err, -EINVAL,
                                 "journal line %u: functions are listed after the steps began",
                                 lineno);
        strcpy(fn.bdf, f[1]);
        op->fns[op->n_fns++] = fn;
        return 0;
    }
    if (STREQ(f[0], "step")) {
        JournalStep s = _JOURNAL_STEP_MAX;
        for (JournalStep i = JOURNAL_STEP_OVERRIDE; n == 3 && i < _JOURNAL_STEP_MAX; i++)
            if (STREQ(f[2], step_names[i]))
                s = i;
        JournalFn *fn = n == 3 ? find_fn(op, f[1]) : NULL;
        if (!fn || s == _JOURNAL_STEP_MAX)
            return error_set(err, -EINVAL,
                             "journal line %u: expected \"step <listed pci-address> <step>\"",
                             lineno);
        if (op->outcome != JOURNAL_OPEN || s < fn->step)
            return error_set(err, -EINVAL, "journal line %u: step %s of %s is out of order", lineno,
                             f[2], f[1]);
        fn->step = s;
        return 0;
    }
    if (STREQ(f[0], "end")) {
        JournalOutcome o = JOURNAL_OPEN;
        if (n == 3)
            o = STREQ(f[2], "done")          ? JOURNAL_DONE
                : STREQ(f[2], "rolled-back") ? JOURNAL_ROLLED_BACK
                : STREQ(f[2], "quarantined") ? JOURNAL_QUARANTINED
                                             : JOURNAL_OPEN;
        if (o == JOURNAL_OPEN || parse_uint64(f[1], UINT32_MAX, &id) < 0 || id != op->id)
            return error_set(err, -EINVAL,
                             "journal line %u: expected \"end %lu done|rolled-back|quarantined\"",
                             lineno, op->id);
        if (op->outcome != JOURNAL_OPEN)
            return error_set(err, -EINVAL, "journal line %u ends an operation twice", lineno);
        op->outcome = o;
        return 0;
    }
    return error_set(err, -EINVAL, "journal line %u: unknown record \"%.32s\"", lineno, f[0]);
}

int journal_parse(const char *text, size_t len, JournalOp *ret, Error *err) {
    JournalOp op = {0};
    bool have_op = false;
    unsigned lineno = 0;
    for (size_t pos = 0; pos < len;) {
        const char *start = text + pos;
        const char *eol = memchr(start, '\n', len - pos);
        if (!eol)
            break; /* torn last write: the kill came mid-line */
        size_t l = (size_t)(eol - start);
        pos += l + 1;
        lineno++;
        char line[256];
        if (l >= sizeof(line) || memchr(start, '\0', l))
            return error_set(err, -EINVAL, "journal line %u is not a journal record", lineno);
        memcpy(line, start, l);
        line[l] = '\0';
        if (lineno == 1) {
            if (STRNEQ(line, "einsora-journal 1"))
                return error_set(err, -EINVAL,
                                 "the journal does not start with \"einsora-journal 1\"");
            continue;
        }
        int r = parse_line(line, lineno, &op, &have_op, err);
        if (r < 0)
            return r;
    }
    if (!have_op)
        return -ENOENT;
    *ret = op;
    return 0;
}

int journal_load(const char *state_dir, JournalOp *ret, Error *err) {
    char path[PATH_MAX];
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r = agent_state_read(state_dir, "journal", "the binding journal", JOURNAL_FILE_MAX, path,
                             &text, &len, err);
    if (r < 0)
        return r;
    Error perr = {0};
    r = journal_parse(text, len, ret, &perr);
    if (r < 0 && r != -ENOENT)
        return error_set(err, r, "the binding journal %s is damaged: %s", path,
                         error_message(&perr));
    return r;
}

/* A crash mid-write leaves the journal's last record torn (cut short, or zeros where a power
 * loss left blocks unwritten), which the parser ignores. The next record must not be glued to
 * it: that would turn a tail the parser skips into a damaged line, and every later load would
 * fail. So the tail after the last newline is cut off, made durable, before anything is
 * appended. */
static int drop_torn_tail(int fd) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (st.st_size <= 0 || st.st_size > JOURNAL_FILE_MAX)
        return 0; /* empty, or too large for a load to accept anyway */
    char buf[JOURNAL_FILE_MAX];
    ssize_t n = pread(fd, buf, (size_t)st.st_size, 0);
    if (n < 0)
        return -errno;
    size_t keep = (size_t)n;
    while (keep > 0 && buf[keep - 1] != '\n')
        keep--;
    if (keep == (size_t)n)
        return 0;
    if (ftruncate(fd, (off_t)keep) < 0 || fsync(fd) < 0)
        return -errno;
    return 0;
}

/* One line, one write(), then fsync: a line is either wholly there or torn at the end. */
static int journal_append(const char *state_dir, const char *line, Error *err) {
    char path[PATH_MAX];
    int r = agent_state_path(state_dir, "journal", path, sizeof(path), err);
    if (r < 0)
        return r;
    int fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
    if (fd < 0)
        return error_set(err, -errno, "could not open the binding journal %s: %s", path,
                         strerror(errno));
    r = drop_torn_tail(fd);
    if (r < 0) {
        close(fd);
        return error_set(err, r, "could not cut the torn last record of the binding journal %s: %s",
                         path, strerror(-r));
    }
    r = write_string_fd_sync(fd, line);
    close(fd);
    if (r < 0)
        return error_set(err, r, "could not write the binding journal %s: %s", path, strerror(-r));
    return 0;
}

static const char *name_or_dash(const char *s) {
    return s[0] ? s : "-";
}

int journal_begin(const char *state_dir, JournalOp *op, Error *err) {
    JournalOp prev;
    Error lerr = {0};
    int r = journal_load(state_dir, &prev, &lerr);
    if (r < 0 && r != -ENOENT)
        return error_set(err, r, "%s", error_message(&lerr));
    if (r >= 0 && prev.outcome == JOURNAL_OPEN)
        return error_set(
                err, -EBUSY,
                "an earlier binding of %s was left unfinished; run 'einsora agent recover' first",
                prev.gpu);
    op->id = r >= 0 ? prev.id + 1 : 1;
    op->outcome = JOURNAL_OPEN;
    StrBuf b = {0};
    strbuf_printf(&b, "einsora-journal 1\nbegin %lu %s %s\n", op->id, op->gpu,
                  op->to_vfio ? "vfio" : "host");
    for (size_t i = 0; i < op->n_fns; i++) {
        const JournalFn *fn = &op->fns[i];
        strbuf_printf(&b, "fn %s %s %s %s\n", fn->bdf, name_or_dash(fn->from), name_or_dash(fn->to),
                      name_or_dash(fn->override));
    }
    if (!strbuf_cstr(&b))
        return error_set(err, -ENOMEM, "out of memory");
    r = agent_state_write(state_dir, "journal", b.data, err);
    strbuf_done(&b);
    return r;
}

int journal_step(const char *state_dir, const char *bdf, JournalStep step, Error *err) {
    char line[128];
    snprintf(line, sizeof(line), "step %s %s\n", bdf, journal_step_to_string(step));
    return journal_append(state_dir, line, err);
}

int journal_end(const char *state_dir, unsigned long id, JournalOutcome outcome, Error *err) {
    char line[128];
    snprintf(line, sizeof(line), "end %lu %s\n", id, journal_outcome_to_string(outcome));
    return journal_append(state_dir, line, err);
}
