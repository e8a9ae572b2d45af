/* A C++ program written as a user of the installed library would write it:
 * it sees only <shmreg/shmreg.hpp> and links through pkg-config or CMake.
 * Built with exceptions and with -fno-exceptions; the try_ forms serve both,
 * the throwing forms are used where they exist. */
#include <shmreg/shmreg.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#if SHMREG_CPP_EXCEPTIONS
#define MODE "exceptions"
#else
#define MODE "no exceptions"
#endif

static int fail(const char *what, const shmreg::error &e)
{
    std::fprintf(stderr, "consumer_cpp: %s: %s: %s\n", what, e.name(), e.what());
    return 1;
}

int main()
{
    if (std::strcmp(shmreg::version(), SHMREG_VERSION_STRING) != 0) {
        std::fprintf(stderr, "header %s but library %s\n", SHMREG_VERSION_STRING, shmreg::version());
        return 1;
    }
    std::string key = "/shmreg-consumer-cpp-" + std::to_string(getpid());
    int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        return 1;
    close(fd);

    int rc = 1;
    {
        auto created = shmreg::registry::create(shmreg::config()
                                                    .pinning(shmreg::pin_policy::never)
                                                    .reclaim(shmreg::reclaim_mode::background)
                                                    .cache_bytes(0));
        if (!created)
            return fail("create", created.error());
        shmreg::registry reg = std::move(created).value();

        auto absent = reg.try_acquire("absent", 0, 1);
        if (absent.ok() || absent.error().code() != SHMREG_ERR_NOT_FOUND)
            return 1;
        if (auto r = reg.try_register_system("input0", key, 0, 4096); !r)
            return fail("register", r.error());
        auto acquired = reg.try_acquire("input0", 0, 64);
        if (!acquired)
            return fail("acquire", acquired.error());
        shmreg::region_ref ref = std::move(acquired).value();
        shmreg::region_ref copy = ref; // a second owner: one more reference
        auto st = reg.try_status("input0", shmreg::kind::system);
        if (!st || st->size() != 1 || st->front().references != 2 || !ref.view().writable())
            return 1;
#if SHMREG_CPP_EXCEPTIONS
        try {
            (void)reg.acquire("input0", 4096, 1);
            return 1;
        } catch (const shmreg::error &e) {
            if (e.code() != SHMREG_ERR_OUT_OF_BOUNDS)
                return 1;
        }
#endif
        // 1.1: a guarded copy out of the region, a sealed memfd registered
        // under a tag and acquired through that tag only, the 1.1 counters.
        if (auto r = shmreg::try_guard_install(); !r)
            return fail("guard_install", r.error());
        char head[8];
        if (auto r = ref.try_read_into(head, sizeof head); !r)
            return fail("read_into", r.error());
        auto memfd = shmreg::try_memfd_create("consumer-cpp", 4096);
        if (!memfd)
            return fail("memfd_create", memfd.error());
        auto fd_reg = reg.try_register_region(shmreg::registration::system_fd("fd0", *memfd, 0, 4096).tag("t"));
        close(*memfd);
        if (!fd_reg)
            return fail("register_system_fd", fd_reg.error());
        auto scoped = reg.try_acquire_matching(shmreg::filter().name("fd0").tag("t"), 0, 16);
        if (!scoped)
            return fail("acquire_matching", scoped.error());
        auto other = reg.try_acquire_matching(shmreg::filter().name("fd0").tag("u"), 0, 16);
        if (other.ok() || other.code() != SHMREG_ERR_NOT_FOUND)
            return 1;
        if (auto r = scoped->try_write_from(head, sizeof head); !r)
            return fail("write_from", r.error());
        auto s = reg.try_stats();
        if (!s || s->regions != 2 || s->reclaim_waiting_bytes > s->mapped_bytes || s->cached_bytes != 0)
            return 1;
        if (auto r = reg.try_unregister("input0"); !r) // DEFER: pending while held
            return fail("unregister", r.error());
        std::printf("consumer_cpp (%s): libshmreg %s: %s\n", MODE, shmreg::version(),
                    absent.error().what());
        rc = 0;
    } // copy, ref and then the registry go, in that order
    shm_unlink(key.c_str());
    return rc;
}
