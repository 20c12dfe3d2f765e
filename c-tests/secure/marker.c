/* SPDX-License-Identifier: MIT OR Apache-2.0 */
/*
 * The "provider" of c-tests/secure's dat.conf: loading it is what must not happen in a
 * set-user-ID program. Its constructor appends "loaded euid N" to MARKER (a path given at
 * build time: the environment is the attacker's to set, not this file's to trust).
 */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((constructor)) static void loaded(void)
{
    int fd = open(MARKER, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

    if (fd >= 0) {
        dprintf(fd, "loaded euid %u\n", (unsigned)geteuid());
        close(fd);
    }
}
