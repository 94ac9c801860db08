/* LD_PRELOAD shim for LocalCluster task processes.
 *
 * TensorFlow's gRPC server always listens on the wildcard address ([::] or 0.0.0.0) whatever
 * host the cluster spec names. Loaded into a task process, this library rewrites every
 * wildcard bind() to the loopback address (0.0.0.0 -> 127.0.0.1, [::] -> [::ffff:127.0.0.1]),
 * so the unauthenticated server is reachable from this machine only. Non-wildcard binds
 * pass through unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real_bind = NULL;
  if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
    struct sockaddr_in in4;
    memcpy(&in4, addr, sizeof in4);
    if (in4.sin_addr.s_addr == htonl(INADDR_ANY)) {
      in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      return real_bind(fd, (const struct sockaddr *)&in4, sizeof in4);
    }
  } else if (addr && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 in6;
    memcpy(&in6, addr, sizeof in6);
    if (memcmp(&in6.sin6_addr, &in6addr_any, sizeof in6addr_any) == 0) {
      inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6.sin6_addr);
      return real_bind(fd, (const struct sockaddr *)&in6, sizeof in6);
    }
  }
  return real_bind(fd, addr, len);
}
