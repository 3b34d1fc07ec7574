/* SPDX-License-Identifier: Apache-2.0 */
/* test_e2e_arena_fs.c - arena_import takes only tmpfs memfds (issue 30,
 * item 1; PROTOCOL.md 3.4).
 *
 * hugetlb: a memfd made with MFD_HUGETLB | MFD_ALLOW_SEALING, written
 * through its mapping and sealed against shrinking, is offered to a real
 * gpuqd with arena_import. It must be refused (bad_argument, the message
 * naming tmpfs), and the daemon serve on, on the same connection and a new
 * one. Were it accepted, the client could punch a hole in the file (its huge
 * page reservation goes with it), take the pool's free huge pages, and kill
 * gpuqd with SIGBUS by naming the arena in a request: the test then does
 * exactly that, so a daemon without the check fails it by dying.
 * The case needs a free huge page: as root it raises vm.nr_hugepages by one
 * in an unchecked fixture (in the runner's process, so the old value goes
 * back even when the case fails or times out); without one the case is
 * skipped, saying why (its own ctest entry, test_e2e_arena_hugetlb, then
 * reads Skipped: exit 77).
 *
 * notmpfs: a regular file on a disk file system (not tmpfs) is refused with
 * the same code and reason; so is a pipe.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/falloc.h>
#include <linux/magic.h>

#include "e2e_util.h"
#include "gpuq.h"

#define NR_HUGEPAGES "/proc/sys/vm/nr_hugepages"

static gpuq_conn *c;

static void conn_setup(void)
{
    e2e_setup();
    c = e2e_connect("arena-fs", GPUQ_PRIO_NORMAL);
}

static void conn_teardown(void)
{
    gpuq_close(c);
    e2e_teardown();
}

/* An arena_import of fd is refused as not tmpfs; the connection serves on. */
static void expect_not_tmpfs(int fd, const char *what)
{
    gpuq_arena *a = NULL;
    int rc = gpuq_arena_import(c, fd, &a);
    ck_assert_msg(rc == GPUQ_E_BAD_ARGUMENT, "%s: arena_import gave %d (%s), want bad_argument",
                  what, rc, rc ? gpuq_errmsg(c) : "accepted");
    ck_assert_ptr_null(a);
    ck_assert_msg(strstr(gpuq_errmsg(c), "not a tmpfs memfd"), "%s: %s", what, gpuq_errmsg(c));
    ck_assert_int_eq(gpuq_ping(c), 0);
}

/* ---- hugetlb ---- */

/* HugePages_Free (of the default size) from /proc/meminfo, and that size in
 * bytes; -1 when unknown. */
static long huge_free(size_t *page)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return -1;
    char line[256];
    long free_pages = -1, kb = 0;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "HugePages_Free: %ld", &free_pages);
        sscanf(line, "Hugepagesize: %ld kB", &kb);
    }
    fclose(f);
    if (page)
        *page = (size_t)kb * 1024;
    return kb > 0 ? free_pages : -1;
}

static long read_nr(void)
{
    FILE *f = fopen(NR_HUGEPAGES, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static int write_nr(long v)
{
    FILE *f = fopen(NR_HUGEPAGES, "w");
    if (!f)
        return -1;
    int ok = fprintf(f, "%ld\n", v) > 0;
    return (fclose(f) == 0 && ok) ? 0 : -1;
}

static long g_old_nr = -1; /* the value to put back; -1: nothing changed */

static void restore_nr(void)
{
    if (g_old_nr < 0)
        return;
    if (write_nr(g_old_nr) != 0)
        fprintf(stderr, "test_e2e_arena_fs: cannot put %s back to %ld: %s\n", NR_HUGEPAGES,
                g_old_nr, strerror(errno));
    g_old_nr = -1;
}

/* Make sure one huge page is free, raising nr_hugepages when we may. NULL
 * when one is, else why not (the skip reason). Runs before Check forks. */
static const char *get_huge_page(void)
{
    static char why[256];
    size_t page = 0;
    long fr = huge_free(&page);
    if (fr < 0)
        return "no hugetlb support (no HugePages_Free / Hugepagesize in /proc/meminfo)";
    if (fr >= 1)
        return NULL;
    long nr = read_nr();
    if (nr < 0 || geteuid() != 0) {
        snprintf(why, sizeof why, "no free huge page and not root (cannot raise %s)", NR_HUGEPAGES);
        return why;
    }
    g_old_nr = nr;
    atexit(restore_nr); /* also when the runner exits early */
    if (write_nr(nr + 1) != 0) {
        snprintf(why, sizeof why, "cannot write %s: %s", NR_HUGEPAGES, strerror(errno));
        restore_nr();
        return why;
    }
    if (huge_free(NULL) < 1) {
        restore_nr();
        snprintf(why, sizeof why, "%s raised to %ld but the kernel found no free huge page",
                 NR_HUGEPAGES, nr + 1);
        return why;
    }
    return NULL;
}

/* Unchecked fixture: runs in the runner's process, after the case whatever
 * became of it (a failed or timed-out case's child is gone by then). */
static void huge_teardown(void)
{
    restore_nr();
}

/* Without the fix gpuqd maps the hugetlb file: show what that leads to. Punch
 * the page out (the reservation goes with it), take every free huge page,
 * and name the arena in a request; then fail the case, saying what became
 * of gpuqd. */
static void attack(gpuq_arena *a, int fd, size_t page)
{
    ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)page), 0);
    long fr = huge_free(NULL);
    if (fr > 0) {
        void *hog = mmap(NULL, (size_t)fr * page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
        if (hog != MAP_FAILED)
            memset(hog, 1, (size_t)fr * page); /* kept until the case's child exits */
    }
    gpuq_request q = e2e_norm_req(16); /* f64, method sum, in and out by reference */
    q.nin_ref = q.nout_ref = 1;
    q.in_ref[0] = (gpuq_ref){gpuq_arena_id(a), 0, 128};
    q.out_ref[0] = (gpuq_ref){gpuq_arena_id(a), 256, 128};
    gpuq_reply rep;
    int rc = gpuq_call(c, &q, NULL, 0, NULL, 0, NULL, 0, &rep);
    int st = tu_daemon_wait_exit(&e2e_d, 5);
    ck_abort_msg("gpuqd accepted a hugetlb memfd as an arena; after a hole was punched and the "
                 "pool emptied, a request naming it gave %d and gpuqd %s (status %d)",
                 rc, st < 0 ? "still runs" : "died", st);
}

START_TEST(hugetlb_memfd_refused)
{
    size_t page = 0;
    ck_assert_int_ge(huge_free(&page), 1);
    int fd = memfd_create("gpuq-test-huge", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
    ck_assert_msg(fd >= 0, "memfd_create(MFD_HUGETLB): %s", strerror(errno));
    ck_assert_int_eq(ftruncate(fd, (off_t)page), 0);
    /* a client fills its arena first: the huge page is allocated here */
    double *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert_msg(p != MAP_FAILED, "mmap of the hugetlb memfd: %s", strerror(errno));
    for (int i = 0; i < 16; i++)
        p[i] = i + 1;
    munmap(p, page);
    ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);

    gpuq_arena *a = NULL;
    int rc = gpuq_arena_import(c, fd, &a);
    if (rc == 0)
        attack(a, fd, page); /* does not return */
    ck_assert_int_eq(rc, GPUQ_E_BAD_ARGUMENT);
    ck_assert_ptr_null(a);
    const char *msg = gpuq_errmsg(c);
    ck_assert_msg(strstr(msg, "not a tmpfs memfd") && strstr(msg, "hugetlbfs"), "%s", msg);
    /* the same connection, then a new one */
    ck_assert_int_eq(gpuq_ping(c), 0);
    double x[3] = {1, 2, 5}, y[3];
    ck_assert_int_eq(gpuq_normalize_1d(c, GPUQ_DT_F64, GPUQ_NORM_SUM, x, 3, y), 0);
    ck_assert_double_eq_tol(y[2], 0.625, 1e-15);
    e2e_assert_serves();
    close(fd);
}
END_TEST

/* ---- notmpfs ---- */

/* A directory on a file system other than tmpfs: the working directory (the
 * build tree) or the source tree. */
static const char *disk_dir(void)
{
    static char cwd[512];
    const char *cands[] = {getcwd(cwd, sizeof cwd) ? cwd : ".", GPUQ_TESTS_DIR, "/var/tmp"};
    for (size_t k = 0; k < sizeof cands / sizeof cands[0]; k++) {
        struct statfs s;
        if (statfs(cands[k], &s) == 0 && (unsigned long)s.f_type != TMPFS_MAGIC &&
            access(cands[k], W_OK) == 0)
            return cands[k];
    }
    return NULL;
}

START_TEST(regular_file_refused)
{
    const char *dir = disk_dir();
    ck_assert_msg(dir != NULL, "no writable directory outside tmpfs (cwd, %s, /var/tmp)",
                  GPUQ_TESTS_DIR);
    char path[600];
    snprintf(path, sizeof path, "%s/gpuq-arena-fs-%d.tmp", dir, (int)getpid());
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
    unlink(path);
    double v[16] = {1};
    ck_assert_int_eq(pwrite(fd, v, sizeof v, 0), (ssize_t)sizeof v);
    ck_assert_int_eq(ftruncate(fd, 8192), 0);
    expect_not_tmpfs(fd, path);
    close(fd);

    int pp[2];
    ck_assert_int_eq(pipe(pp), 0);
    expect_not_tmpfs(pp[0], "a pipe");
    close(pp[0]), close(pp[1]);
    e2e_assert_serves();
}
END_TEST

int main(void)
{
    /* CK_RUN_CASE=hugetlb (test_e2e_arena_hugetlb): that case alone; skipped
     * (77) when no huge page can be had. Otherwise both, hugetlb only when
     * it can run. */
    const char *only = getenv("CK_RUN_CASE");
    bool want_huge = !only || !strcmp(only, "hugetlb");
    const char *why = want_huge ? get_huge_page() : "not asked for";
    if (want_huge && why) {
        fprintf(stderr, "hugetlb case skipped: %s\n", why);
        if (only)
            return 77;
    }
    Suite *s = suite_create("e2e_arena_fs");
    TCase *tc = tcase_create("notmpfs");
    tcase_add_checked_fixture(tc, conn_setup, conn_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, regular_file_refused);
    suite_add_tcase(s, tc);
    if (!why) {
        tc = tcase_create("hugetlb");
        tcase_add_unchecked_fixture(tc, NULL, huge_teardown);
        tcase_add_checked_fixture(tc, conn_setup, conn_teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, hugetlb_memfd_refused);
        suite_add_tcase(s, tc);
    }
    int rc = tu_run_suite(s);
    restore_nr();
    return rc;
}
