/*
 * common/file.c — the files mxc reads and writes. Reading: every loader (NDArray lists,
 * symbol JSON, CSV, IDX) opens its file through mxc__file_open_regular, so a directory, a
 * FIFO or a device is a clear MXC_EIO before a byte is read or a size is trusted.
 * Writing: crash-safe replacement for everything mxc saves (NDArray lists, checkpoints,
 * symbols): the new contents go to `<path>.tmp.<pid>` in the same folder, are flushed and
 * fsynced, renamed over `<path>`, and the folder is fsynced so that the rename itself
 * survives a crash. Readers see the old file or the new one, never a part. A process
 * killed midway leaves its temporary behind; mxc__file_stale_temp recognises those.
 */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define TMP_TAG ".tmp."

/* ---- Reading ----------------------------------------------------------------------- */

static const char *file_kind(mode_t mode) {
    return S_ISDIR(mode)    ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISCHR(mode)  ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a regular file";
}

int mxc__file_open_regular(const char *fn, const char *path, int *fd_out, size_t *size) {
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer; it changes nothing
     * for a regular file. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return mxc__error(MXC_EIO, "%s: cannot open %s: %s", fn, path, strerror(errno));
    struct stat st;
    int rc = MXC_OK;
    if (fstat(fd, &st) != 0)
        rc = mxc__error(MXC_EIO, "%s: cannot stat %s: %s", fn, path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = mxc__error(MXC_EIO, "%s: %s is %s, not a regular file", fn, path,
                        file_kind(st.st_mode));
    else if (st.st_size < 0 || (uintmax_t)st.st_size >= SIZE_MAX)
        rc = mxc__error(MXC_ENOMEM, "%s: %s has %jd bytes, more than memory can hold", fn, path,
                        (intmax_t)st.st_size);
    if (rc != MXC_OK) {
        close(fd);
        return rc;
    }
    *fd_out = fd;
    *size = (size_t)st.st_size;
    return MXC_OK;
}

int mxc__file_read(const char *fn, const char *path, char **data, size_t *len) {
    int rc = MXC_OK, fd = -1;
    size_t size = 0, got = 0;
    char *buf = NULL;
    *data = NULL;
    MXC_TRY(mxc__file_open_regular(fn, path, &fd, &size));
    buf = mxc__malloc(size + 1);
    MXC_CHECK(buf != NULL, MXC_ENOMEM, "%s: out of memory reading the %zu bytes of %s", fn, size,
              path);
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        MXC_CHECK(r > 0, MXC_EIO, "%s: reading %s failed after %zu of %zu bytes: %s", fn, path, got,
                  size, r < 0 ? strerror(errno) : "the file got shorter");
        got += (size_t)r;
    }
    buf[size] = '\0';
    close(fd);
    *data = buf;
    *len = size;
    return MXC_OK;
fail:
    if (fd >= 0)
        close(fd);
    mxc__free(buf);
    return rc;
}

/* ---- Writing ----------------------------------------------------------------------- */

/* Makes the last rename in `dir` durable. A file system that cannot sync a folder
 * (EINVAL) has nothing more to do. */
static int sync_dir(const char *fn, const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return mxc__error(MXC_EIO, "%s: cannot open folder %s to sync it: %s", fn, dir,
                          strerror(errno));
    int rc = MXC_OK;
    if (fsync(fd) != 0 && errno != EINVAL)
        rc = mxc__error(MXC_EIO, "%s: cannot sync folder %s: %s", fn, dir, strerror(errno));
    close(fd);
    return rc;
}

int mxc__file_replace(const char *fn, const char *path, int (*fill)(FILE *f, void *arg),
                      void *arg) {
    int rc = MXC_OK;
    size_t n = strlen(path);
    /* "<path>.tmp.<pid>", then the folder's name */
    char *tmp = mxc__malloc(2 * n + 32);
    FILE *f = NULL;
    MXC_CHECK(tmp != NULL, MXC_ENOMEM, "%s: out of memory saving %s", fn, path);
    char *dir = tmp + n + 30;
    snprintf(tmp, n + 30, "%s" TMP_TAG "%ld", path, (long)getpid());
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        snprintf(dir, n + 2, ".");
    else
        snprintf(dir, n + 2, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    f = fopen(tmp, "wb");
    MXC_CHECK(f != NULL, MXC_EIO, "%s: cannot create %s: %s", fn, tmp, strerror(errno));
    MXC_TRY(fill(f, arg));
    MXC_CHECK(fflush(f) == 0 && fsync(fileno(f)) == 0, MXC_EIO, "%s: writing %s failed: %s", fn,
              tmp, strerror(errno));
    int closed = fclose(f);
    f = NULL;
    MXC_CHECK(closed == 0, MXC_EIO, "%s: closing %s failed: %s", fn, tmp, strerror(errno));
    MXC_CHECK(rename(tmp, path) == 0, MXC_EIO, "%s: cannot rename %s to %s: %s", fn, tmp, path,
              strerror(errno));
    rc = sync_dir(fn, dir);
    mxc__free(tmp);
    return rc;
fail:
    if (f)
        fclose(f);
    if (tmp)
        remove(tmp);
    mxc__free(tmp);
    return rc;
}

bool mxc__file_stale_temp(const char *name, size_t *target_len) {
    const char *tag = NULL;
    for (const char *p = strstr(name, TMP_TAG); p != NULL; p = strstr(p + 1, TMP_TAG))
        tag = p;
    if (tag == NULL || tag == name)
        return false;
    const char *digits = tag + strlen(TMP_TAG);
    size_t len = strspn(digits, "0123456789");
    if (len == 0 || len > 9 || digits[len] != '\0' || digits[0] == '0')
        return false; /* not a pid as mxc__file_replace writes it */
    pid_t pid = (pid_t)strtol(digits, NULL, 10);
    /* kill(pid, 0) sends nothing: ESRCH says no such process, EPERM one of another user */
    if (pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH)
        return false;
    *target_len = (size_t)(tag - name);
    return true;
}
