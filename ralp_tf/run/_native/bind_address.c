/* Bind a `ralp-tf server` task to one address instead of TensorFlow's wildcard.
 *
 * TensorFlow's gRPC server always listens on the wildcard address ([::] or 0.0.0.0) whatever
 * host the cluster spec names. Preloaded (LD_PRELOAD) into a task process, this library's bind()
 * rewrites every wildcard bind to the address in the environment variable RALP_TF_BIND_ADDRESS
 * (an IPv4 or IPv6 literal): an IPv4 address replaces 0.0.0.0 and, as ::ffff:a.b.c.d, [::]; an
 * IPv6 address replaces [::] (an IPv4 wildcard bind is then left alone). Non-wildcard binds, and
 * every bind when the variable is unset or not an address, pass through unchanged.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

/* Copy the wildcard `addr` rewritten to RALP_TF_BIND_ADDRESS into `out`; return 1 when rewritten. */
static int rewrite(const struct sockaddr *addr, socklen_t len, struct sockaddr_storage *out) {
  const char *want = getenv("RALP_TF_BIND_ADDRESS");
  struct in_addr v4;
  struct in6_addr v6;
  if (!want || !addr) return 0;
  int is_v4 = inet_pton(AF_INET, want, &v4) == 1;
  int is_v6 = !is_v4 && inet_pton(AF_INET6, want, &v6) == 1;
  if (!is_v4 && !is_v6) return 0;
  if (addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in) && is_v4) {
    struct sockaddr_in in4;
    memcpy(&in4, addr, sizeof in4);
    if (in4.sin_addr.s_addr != htonl(INADDR_ANY)) return 0;
    in4.sin_addr = v4;
    memcpy(out, &in4, sizeof in4);
    return 1;
  }
  if (addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 in6;
    memcpy(&in6, addr, sizeof in6);
    if (memcmp(&in6.sin6_addr, &in6addr_any, sizeof in6addr_any) != 0) return 0;
    if (is_v4) {
      char mapped[64];
      snprintf(mapped, sizeof mapped, "::ffff:%s", want);
      if (inet_pton(AF_INET6, mapped, &in6.sin6_addr) != 1) return 0;
    } else {
      in6.sin6_addr = v6;
    }
    memcpy(out, &in6, sizeof in6);
    return 1;
  }
  return 0;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real_bind = NULL;
  struct sockaddr_storage to;
  if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  if (rewrite(addr, len, &to)) return real_bind(fd, (const struct sockaddr *)&to, len);
  return real_bind(fd, addr, len);
}
