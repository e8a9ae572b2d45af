#include "shmreg/shmreg.h"

const char *shmreg_version(void)
{
    return SHMREG_VERSION_STRING;
}
