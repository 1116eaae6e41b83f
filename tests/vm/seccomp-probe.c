/*
 * seccomp-probe: tries syscalls that a container's seccomp filter decides and prints one
 * line per probe, "NAME RESULT" with RESULT ok, EPERM, ENOSYS or another errno's name,
 * then the "Seccomp:" and "Seccomp_filters:" lines of /proc/self/status. Exits 0.
 *
 * Built static by the tests (gcc -static -O2 -o seccomp-probe seccomp-probe.c) and put
 * into an image with oci/busybox/build.sh --add; never committed as a binary.
 *
 * Every probe is one that succeeds for root without the filter (in a container with
 * the runtimes' default capabilities), so a line that says EPERM is the filter's doing;
 * probes that change the process (namespaces, personality) run in a child.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

static const char *errname(int e) {
  switch (e) {
  case 0: return "ok";
  case EPERM: return "EPERM";
  case ENOSYS: return "ENOSYS";
  case EACCES: return "EACCES";
  case EINVAL: return "EINVAL";
  case EAFNOSUPPORT: return "EAFNOSUPPORT";
  case ENOKEY: return "ENOKEY";
  case ENOENT: return "ENOENT";
  case ENOTDIR: return "ENOTDIR";
  default: return strerror(e);
  }
}

static void report(const char *name, long rc) {
  printf("%s %s\n", name, errname(rc < 0 ? errno : 0));
}

/* Runs fn in a forked child and reports its result (the errno it exits with). */
static void in_child(const char *name, int (*fn)(void)) {
  pid_t pid = fork();
  if (pid == 0)
    _exit(fn());
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st)) {
    printf("%s probe-failed\n", name);
    return;
  }
  printf("%s %s\n", name, errname(WEXITSTATUS(st)));
}

static int try_unshare_user(void) {
  return syscall(SYS_unshare, CLONE_NEWUSER) < 0 ? errno : 0;
}

/* clone(2) with a namespace flag, as a fork: the child exits at once. */
static int try_clone_newuser(void) {
  long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
  if (pid == 0)
    _exit(0);
  if (pid < 0)
    return errno;
  waitpid(pid, 0, 0);
  return 0;
}

static int try_fork_clone(void) {
  long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
  if (pid == 0)
    _exit(0);
  if (pid < 0)
    return errno;
  waitpid(pid, 0, 0);
  return 0;
}

static int try_clone3(void) {
  struct clone_args args;
  memset(&args, 0, sizeof args);
  args.exit_signal = SIGCHLD;
  long pid = syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0)
    _exit(0);
  if (pid < 0)
    return errno;
  waitpid(pid, 0, 0);
  return 0;
}

static int try_personality_no_randomize(void) {
  return syscall(SYS_personality, ADDR_NO_RANDOMIZE) < 0 ? errno : 0;
}

static int try_personality_linux(void) {
  return syscall(SYS_personality, PER_LINUX) < 0 ? errno : 0;
}

static void probe_socket(const char *name, int family, int type) {
  long fd = syscall(SYS_socket, family, type, 0);
  report(name, fd);
  if (fd >= 0)
    close(fd);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  report("getpid", syscall(SYS_getpid));
  probe_socket("socket_inet", AF_INET, SOCK_STREAM);
  probe_socket("socket_unix", AF_UNIX, SOCK_STREAM);
  probe_socket("socket_vsock", AF_VSOCK, SOCK_STREAM);
  probe_socket("socket_alg", AF_ALG, SOCK_SEQPACKET);
  in_child("clone_fork", try_fork_clone);
  in_child("clone_newuser", try_clone_newuser);
  in_child("clone3", try_clone3);
  in_child("unshare_newuser", try_unshare_user);
  in_child("personality_linux", try_personality_linux);
  in_child("personality_no_randomize", try_personality_no_randomize);
  /* add_key(2) of a "user" key into the session keyring; keyctl(2) reads the keyring. */
  report("add_key", syscall(SYS_add_key, "user", "podhost-probe", "x", 1, -3 /* KEY_SPEC_SESSION_KEYRING */));
  report("keyctl", syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0));
  /* mount(2) of a tmpfs on a fresh directory of its own (undone if it worked, so the
   * probe is harmless wherever it runs): the container has no CAP_SYS_ADMIN, so this is
   * EPERM with or without the filter; kept for the record. */
  char dir[] = "/tmp/seccomp-probe.XXXXXX";
  if (mkdtemp(dir)) {
    long rc = syscall(SYS_mount, "none", dir, "tmpfs", 0, 0);
    report("mount", rc);
    if (rc == 0)
      umount2(dir, MNT_DETACH);
    rmdir(dir);
  } else {
    printf("mount probe-failed\n");
  }

  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "Seccomp", 7) == 0)
      fputs(line, stdout);
  if (f)
    fclose(f);
  return 0;
}
