/* Loopback-only binds for LocalCluster processes.
 *
 * TensorFlow's gRPC server always listens on the wildcard address ([::] or 0.0.0.0) whatever
 * host the cluster spec names. This library rewrites every wildcard bind() to the loopback
 * address (0.0.0.0 -> 127.0.0.1, [::] -> [::ffff:127.0.0.1]), so the unauthenticated server is
 * reachable from this machine only. Non-wildcard binds pass through unchanged. Two ways in:
 *
 *  - LD_PRELOAD (task processes, `ralp-tf run`): this library's bind() shadows libc's.
 *  - ralp_loopback_hook_install(path_part) in an already running process (a user's script that
 *    starts a LocalCluster): the GOT entries for bind() (PLT and GLOB_DAT relocations) of every
 *    loaded ELF object whose path contains `path_part` (NULL: every object) are pointed at
 *    ralp_loopback_bind(), which issues the bind system call itself. Objects loaded later are
 *    patched by calling it again. Returns the number of entries that now point at the hook.
 *    ralp_loopback_hook_enable(0) makes the hooked calls pass through unchanged.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

/* Copy a wildcard address as loopback into `out`; return 1 when rewritten. */
static int loopback_of(const struct sockaddr *addr, socklen_t len, struct sockaddr_storage *out) {
  if (addr && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
    struct sockaddr_in in4;
    memcpy(&in4, addr, sizeof in4);
    if (in4.sin_addr.s_addr != htonl(INADDR_ANY)) return 0;
    in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memcpy(out, &in4, sizeof in4);
    return 1;
  }
  if (addr && addr->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 in6;
    memcpy(&in6, addr, sizeof in6);
    if (memcmp(&in6.sin6_addr, &in6addr_any, sizeof in6addr_any) != 0) return 0;
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &in6.sin6_addr);
    memcpy(out, &in6, sizeof in6);
    return 1;
  }
  return 0;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
  static bind_fn real_bind = NULL;
  struct sockaddr_storage lo;
  if (!real_bind) real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
  if (loopback_of(addr, len, &lo)) return real_bind(fd, (const struct sockaddr *)&lo, len);
  return real_bind(fd, addr, len);
}

static volatile int hook_enabled = 1;

int ralp_loopback_bind(int fd, const struct sockaddr *addr, socklen_t len) {
  struct sockaddr_storage lo;
  if (hook_enabled && loopback_of(addr, len, &lo))
    return (int)syscall(SYS_bind, fd, (const struct sockaddr *)&lo, len);
  return (int)syscall(SYS_bind, fd, addr, len);
}

void ralp_loopback_hook_enable(int on) { hook_enabled = on; }

static ElfW(Addr) absolute(ElfW(Addr) base, ElfW(Addr) ptr) { return ptr < base ? base + ptr : ptr; }

/* Whether the page at `page` was made read-only by the dynamic loader: it lies wholly inside the
 * object's PT_GNU_RELRO segment, whose end the loader rounds down to a page boundary. */
static int page_is_relro(struct dl_phdr_info *info, ElfW(Addr) page, ElfW(Addr) pagesize) {
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_GNU_RELRO) continue;
    ElfW(Addr) start = (info->dlpi_addr + ph->p_vaddr) & ~(pagesize - 1);
    ElfW(Addr) end = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(pagesize - 1);
    if (page >= start && page + pagesize <= end) return 1;
  }
  return 0;
}

/* Point one GOT slot at the hook. Only the slot's own page is touched: a read-only (RELRO) page
 * is opened for the write and closed again; any other page is already writable. */
static int patch_slot(struct dl_phdr_info *info, ElfW(Addr) where) {
  void **slot = (void **)where;
  if (*slot == (void *)ralp_loopback_bind) return 1; /* patched before: still ours */
  ElfW(Addr) pagesize = (ElfW(Addr))sysconf(_SC_PAGESIZE);
  ElfW(Addr) page = where & ~(pagesize - 1);
  int relro = page_is_relro(info, page, pagesize);
  if (relro && mprotect((void *)page, pagesize, PROT_READ | PROT_WRITE) != 0) return 0;
  __atomic_store_n(slot, (void *)ralp_loopback_bind, __ATOMIC_SEQ_CST);
  if (relro) mprotect((void *)page, pagesize, PROT_READ);
  return 1;
}

struct patch_request {
  const char *path_part;
  int patched;
};

static int patch_object(struct dl_phdr_info *info, size_t size, void *data) {
  struct patch_request *req = (struct patch_request *)data;
  Dl_info self;
  (void)size;
  if (dladdr((void *)ralp_loopback_bind, &self) && self.dli_fbase == (void *)info->dlpi_addr) return 0;
  if (req->path_part && (!info->dlpi_name || !strstr(info->dlpi_name, req->path_part))) return 0;
  const ElfW(Dyn) *dyn = NULL;
  for (int i = 0; i < info->dlpi_phnum; i++)
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
      dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
  if (!dyn) return 0;
  const ElfW(Sym) *symtab = NULL;
  const char *strtab = NULL;
  const ElfW(Rela) *tables[2] = {NULL, NULL};
  size_t sizes[2] = {0, 0};
  for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = (const ElfW(Sym) *)absolute(info->dlpi_addr, d->d_un.d_ptr); break;
      case DT_STRTAB: strtab = (const char *)absolute(info->dlpi_addr, d->d_un.d_ptr); break;
      case DT_JMPREL: tables[0] = (const ElfW(Rela) *)absolute(info->dlpi_addr, d->d_un.d_ptr); break;
      case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
      case DT_RELA: tables[1] = (const ElfW(Rela) *)absolute(info->dlpi_addr, d->d_un.d_ptr); break;
      case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
      default: break;
    }
  }
  if (!symtab || !strtab) return 0;
  for (int t = 0; t < 2; t++) {
    if (!tables[t]) continue;
    for (size_t i = 0; i < sizes[t] / sizeof(ElfW(Rela)); i++) {
      const ElfW(Rela) *r = &tables[t][i];
      size_t sym = ELF64_R_SYM(r->r_info);
      if (sym == 0 || strcmp(strtab + symtab[sym].st_name, "bind") != 0) continue;
      req->patched += patch_slot(info, info->dlpi_addr + r->r_offset);
    }
  }
  return 0;
}

int ralp_loopback_hook_install(const char *path_part) {
  struct patch_request req = {path_part, 0};
  hook_enabled = 1;
  dl_iterate_phdr(patch_object, &req);
  return req.patched;
}
