/*
 * netcheck: a tiny TCP/UDP client and server for the pod network tests (busybox's nc
 * has no UDP and no IPv6 here). Built statically by the tests and added to a test image.
 *
 *   netcheck serve PORT          serve TCP and UDP on PORT, IPv4 and IPv6 (dual-stack
 *                                socket): every request is answered with
 *                                "<peer address> <request>", so a client sees the source
 *                                address the server saw (NAT or not)
 *   netcheck ask tcp|udp HOST PORT MSG
 *                                send MSG, print the answer; exit 1 on no answer (5 s)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static void peer_text(const struct sockaddr_storage *ss, char *out, size_t len) {
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)ss;
        if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
            inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], out, len);
        } else {
            inet_ntop(AF_INET6, &s6->sin6_addr, out, len);
        }
    } else {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, out, len);
    }
}

static int bound(int type, int port) {
    int fd = socket(AF_INET6, type, 0);
    int off = 0, on = 1;
    struct sockaddr_in6 a = {0};
    if (fd < 0) { perror("socket"); exit(2); }
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_any;
    if (bind(fd, (void *)&a, sizeof a) < 0) { perror("bind"); exit(2); }
    if (type == SOCK_STREAM && listen(fd, 64) < 0) { perror("listen"); exit(2); }
    return fd;
}

static int serve(int port) {
    int tcp = bound(SOCK_STREAM, port), udp = bound(SOCK_DGRAM, port);
    printf("serving %d\n", port);
    fflush(stdout);
    for (;;) {
        struct pollfd p[2] = {{tcp, POLLIN, 0}, {udp, POLLIN, 0}};
        char buf[512], peer[64], reply[640];
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        if (poll(p, 2, -1) < 0) continue;
        if (p[0].revents & POLLIN) {
            int c = accept(tcp, (void *)&ss, &sl);
            if (c < 0) continue;
            struct timeval tv = {5, 0};
            setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            ssize_t n = read(c, buf, sizeof buf - 1);
            if (n > 0) {
                buf[n] = 0;
                peer_text(&ss, peer, sizeof peer);
                int m = snprintf(reply, sizeof reply, "%s %s", peer, buf);
                if (write(c, reply, m) < 0) perror("write");
            }
            close(c);
        }
        if (p[1].revents & POLLIN) {
            sl = sizeof ss;
            ssize_t n = recvfrom(udp, buf, sizeof buf - 1, 0, (void *)&ss, &sl);
            if (n >= 0) {
                buf[n] = 0;
                peer_text(&ss, peer, sizeof peer);
                int m = snprintf(reply, sizeof reply, "%s %s", peer, buf);
                sendto(udp, reply, m, 0, (void *)&ss, sl);
            }
        }
    }
    return 0;
}

static int ask(const char *proto, const char *host, const char *port, const char *msg) {
    struct sockaddr_storage ss = {0};
    socklen_t sl;
    int udp = strcmp(proto, "udp") == 0;
    struct sockaddr_in *s4 = (void *)&ss;
    struct sockaddr_in6 *s6 = (void *)&ss;
    if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        s4->sin_port = htons(atoi(port));
        sl = sizeof *s4;
    } else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons(atoi(port));
        sl = sizeof *s6;
    } else {
        fprintf(stderr, "bad address %s\n", host);
        return 2;
    }
    int fd = socket(ss.ss_family, udp ? SOCK_DGRAM : SOCK_STREAM, 0);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (void *)&ss, sl) < 0) { perror("connect"); return 1; }
    if (write(fd, msg, strlen(msg)) < 0) { perror("write"); return 1; }
    char buf[640];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n <= 0) { fprintf(stderr, "no answer from %s %s:%s\n", proto, host, port); return 1; }
    buf[n] = 0;
    printf("%s\n", buf);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "serve") == 0) return serve(atoi(argv[2]));
    if (argc == 6 && strcmp(argv[1], "ask") == 0) return ask(argv[2], argv[3], argv[4], argv[5]);
    fprintf(stderr, "usage: netcheck serve PORT | netcheck ask tcp|udp HOST PORT MSG\n");
    return 2;
}
