/* Linked only into bin/preflight-static (musl). Debian's libyaml.a was compiled against glibc
 * with _FORTIFY_SOURCE, so it calls __sprintf_chk, which musl does not have. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

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
