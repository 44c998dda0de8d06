#define _DEFAULT_SOURCE
/* Linked only into bin/preflight-static (musl). Debian's libyaml.a was compiled against glibc
 * with _FORTIFY_SOURCE, so it calls __sprintf_chk, which musl does not have. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int __sprintf_chk(char *s, int flag, size_t slen, const char *fmt, ...);

int __sprintf_chk(char *s, int flag, size_t slen, const char *fmt, ...)
{
    va_list ap;
    (void)flag;
    va_start(ap, fmt);
    int n = vsnprintf(s, slen, fmt, ap);
    va_end(ap);
    return n;
}

/* Debian's libjansson.a (glibc, _FORTIFY_SOURCE) calls these three. */
int __snprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, ...);
int __vsnprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, va_list ap);
char *__strncpy_chk(char *dest, const char *src, size_t n, size_t destlen);

int __snprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, ...)
{
    va_list ap;
    (void)flag;
    (void)slen;
    va_start(ap, fmt);
    int n = vsnprintf(s, maxlen, fmt, ap);
    va_end(ap);
    return n;
}

int __vsnprintf_chk(char *s, size_t maxlen, int flag, size_t slen, const char *fmt, va_list ap)
{
    (void)flag;
    (void)slen;
    return vsnprintf(s, maxlen, fmt, ap);
}

char *__strncpy_chk(char *dest, const char *src, size_t n, size_t destlen)
{
    (void)destlen;
    return strncpy(dest, src, n);
}

/* Debian's libsodium.a (glibc, _FORTIFY_SOURCE) wipes secrets with this one. */
void __explicit_bzero_chk(void *dst, size_t len, size_t dstlen);

void __explicit_bzero_chk(void *dst, size_t len, size_t dstlen)
{
    (void)dstlen;
    explicit_bzero(dst, len);
}

/* Debian 11's libsodium.a also calls this one (a Docker build on bullseye). */
void *__memcpy_chk(void *dst, const void *src, size_t len, size_t dstlen);

void *__memcpy_chk(void *dst, const void *src, size_t len, size_t dstlen)
{
    if (len > dstlen) abort(); /* what glibc's fortified memcpy does on overflow */
    return memcpy(dst, src, len);
}
