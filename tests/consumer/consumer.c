/* A program written as a user of the installed library would write it: it
 * sees only <shmreg/shmreg.h> and links through pkg-config or CMake. */
#include <shmreg/shmreg.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
    if (strcmp(shmreg_version(), SHMREG_VERSION_STRING) != 0) {
        fprintf(stderr, "header %s but library %s\n", SHMREG_VERSION_STRING, shmreg_version());
        return 1;
    }
    shmreg_registry *reg;
    if (shmreg_registry_create(NULL, &reg) != SHMREG_OK)
        return 1;
    shmreg_region *ref;
    shmreg_view view;
    shmreg_err err = shmreg_acquire(reg, "absent", 0, 1, &ref, &view);
    shmreg_registry_destroy(reg);
    if (err != SHMREG_ERR_NOT_FOUND) {
        fprintf(stderr, "expected NOT_FOUND, got %s\n", shmreg_err_name(err));
        return 1;
    }
    printf("consumer: libshmreg %s: %s\n", shmreg_version(), shmreg_last_error());
    return 0;
}
