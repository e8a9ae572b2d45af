// The Triton-style baseline (see baseline_triton.h): what libshmreg replaces,
// modelled on Triton Inference Server's src/shared_memory_manager.cc so that
// the bench compares lock and refcount designs, not two different amounts of
// work. What is kept from Triton, because it decides the cost:
//  - one std::mutex serialises every lookup, register and unregister;
//  - the map is keyed by std::string, so a lookup builds one from the name
//    (no allocation: the bench's names fit the small-string buffer);
//  - a lookup copies the shared_ptr (one atomic increment, under the mutex)
//    and the holder's destruction of that copy is the release;
//  - register runs shm_open, fstat, mmap and close with the mutex held, and
//    unregister runs munmap with it held.
// Left out, as it costs nothing on these paths: key validation, the GPU kind,
// status, and Triton's scan of the map for an already-open descriptor of the
// same key (it reuses a descriptor it has already closed; here every register
// opens its own).
#include "baseline_triton.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>

namespace {

struct Info {
    std::string name, key;
    size_t offset, byte_size;
    void *mapped_addr;
    bool awaiting_unregister = false;  // Triton's flag for a region unregistered while in use
};

using InfoPtr = std::shared_ptr<Info>;

static_assert(sizeof(InfoPtr) <= sizeof(triton_ref), "triton_ref too small for a shared_ptr");
static_assert(alignof(InfoPtr) <= alignof(triton_ref), "triton_ref under-aligned");

thread_local std::string last_error;

int fail(const std::string &msg)
{
    last_error = msg;
    return -1;
}

std::string errno_text() { return std::strerror(errno); }

InfoPtr *ref_slot(triton_ref *ref) { return std::launder(reinterpret_cast<InfoPtr *>(ref->slot_)); }

// shm_open, fstat, bounds check, mmap, close: the register path, run by the
// caller with the manager's mutex held.
int map_window(const char *name, const char *key, size_t offset, size_t byte_size, void **addr)
{
    int fd = shm_open(key, O_RDWR, S_IRUSR | S_IWUSR);
    if (fd == -1)
        return fail(std::string("Unable to open shared memory region: '") + key + "': " + errno_text());
    struct stat st;
    if (fstat(fd, &st) == -1 || st.st_size < 0 || offset + byte_size > size_t(st.st_size)) {
        close(fd);
        return fail(std::string("failed to register shared memory region '") + name + "': invalid args");
    }
    void *p = mmap(nullptr, byte_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset));
    int mmap_errno = errno;
    close(fd);
    if (p == MAP_FAILED) {
        errno = mmap_errno;
        return fail(std::string("failed to register shared memory region '") + name + "': " + errno_text());
    }
    *addr = p;
    return 0;
}

// Triton's acquire-time checks, in its order, before any reference is taken.
int check_window(const Info &info, size_t offset, size_t byte_size)
{
    if (offset >= info.byte_size)
        return fail("Invalid offset for shared memory region: '" + info.name + "'");
    if (byte_size > SIZE_MAX - offset)
        return fail("Integer overflow detected for region '" + info.name + "'");
    if (offset + byte_size > info.byte_size)
        return fail("Invalid offset + byte size for shared memory region: '" + info.name + "'");
    return 0;
}

}  // namespace

struct triton_manager {
    std::mutex mu;
    std::map<std::string, InfoPtr> regions;
};

extern "C" {

triton_manager *triton_manager_create(void) { return new (std::nothrow) triton_manager; }

void triton_manager_destroy(triton_manager *mgr)
{
    if (!mgr)
        return;
    for (auto &entry : mgr->regions)
        munmap(entry.second->mapped_addr, entry.second->byte_size);
    delete mgr;
}

int triton_register_system(triton_manager *mgr, const char *name, const char *key, size_t offset,
                           size_t byte_size)
{
    std::lock_guard<std::mutex> lock(mgr->mu);
    if (mgr->regions.find(name) != mgr->regions.end())
        return fail(std::string("shared memory region '") + name + "' already in manager");
    void *addr;
    if (map_window(name, key, offset, byte_size, &addr) != 0)
        return -1;
    mgr->regions.emplace(name, std::make_shared<Info>(Info{name, key, offset, byte_size, addr}));
    return 0;
}

int triton_acquire(triton_manager *mgr, const char *name, size_t offset, size_t byte_size,
                   triton_ref *ref, void **addr)
{
    std::lock_guard<std::mutex> lock(mgr->mu);
    auto it = mgr->regions.find(name);
    if (it == mgr->regions.end())
        return fail(std::string("Unable to find shared memory region: '") + name + "'");
    if (check_window(*it->second, offset, byte_size) != 0)
        return -1;
    new (ref->slot_) InfoPtr(it->second);  // the reference: a shared_ptr copy
    *addr = static_cast<char *>(it->second->mapped_addr) + offset;
    return 0;
}

void triton_release(triton_ref *ref) { ref_slot(ref)->~InfoPtr(); }

int triton_unregister(triton_manager *mgr, const char *name)
{
    std::lock_guard<std::mutex> lock(mgr->mu);
    auto it = mgr->regions.find(name);
    if (it == mgr->regions.end())
        return fail(std::string("Unable to find shared memory region: '") + name + "'");
    if (it->second.use_count() > 1) {
        // Triton only flags a region in use; the bench never unregisters one.
        it->second->awaiting_unregister = true;
        return 0;
    }
    if (munmap(it->second->mapped_addr, it->second->byte_size) != 0)
        return fail("unable to munmap shared memory region: " + errno_text());
    mgr->regions.erase(it);
    return 0;
}

const char *triton_last_error(void) { return last_error.c_str(); }

}  // extern "C"
