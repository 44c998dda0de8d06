/* Text from outside (peers' fields, environment values, NCCL log lines, host and interface
 * names) made safe for a terminal and a log: what a human reads is never a control sequence
 * of someone else's. docs/security.md, "Peer bytes on terminals and logs". */
#include "base.h"

#include <string.h>

/* Length of the well-formed UTF-8 sequence at s (1 to 4), or 0 when s does not start one
 * (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short). */
static size_t utf8_len(const unsigned char *s, unsigned *cp)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if ((c & 0xE0) == 0xC0) {
        n = 2, min = 0x80, c &= 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3, min = 0x800, c &= 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4, min = 0x10000, c &= 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return n;
}

int pf_text_escape(struct pf_buf *out, const char *s, bool keep_newlines)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned cp = 0;
        size_t n = utf8_len(p, &cp);
        int r = 0;
        if (n == 0) {
            r = pf_buf_addf(out, "\\x%02x", *p); /* not UTF-8: the byte, visibly */
            n = 1;
        } else if (cp == '\n' && keep_newlines) {
            r = pf_buf_add(out, "\n", 1);
        } else if (cp == '\n') {
            r = pf_buf_add(out, "\\n", 2);
        } else if (cp == '\r') {
            r = pf_buf_add(out, "\\r", 2);
        } else if (cp == '\t') {
            r = pf_buf_add(out, "\t", 1);
        } else if (cp < 0x20 || cp == 0x7F) {
            r = pf_buf_addf(out, "\\x%02x", cp); /* ESC, BEL, backspace, ... */
        } else if (cp >= 0x80 && cp <= 0x9F) {
            r = pf_buf_addf(out, "\\u%04x", cp); /* C1 controls: CSI (U+009B) and the like */
        } else if (cp == 0x2028 || cp == 0x2029 || (cp >= 0x202A && cp <= 0x202E) ||
                   (cp >= 0x2066 && cp <= 0x2069)) {
            r = pf_buf_addf(out, "\\u%04x", cp); /* line breaks and bidirectional overrides */
        } else {
            r = pf_buf_add(out, p, n);
        }
        if (r < 0) return r;
        p += n;
    }
    return 0;
}

bool pf_text_is_safe(const char *s, bool keep_newlines)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned cp = 0;
        size_t n = utf8_len(p, &cp);
        if (n == 0 || (cp < 0x20 && cp != '\t' && !(cp == '\n' && keep_newlines)) || cp == 0x7F ||
            (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 ||
            (cp >= 0x202A && cp <= 0x202E) || (cp >= 0x2066 && cp <= 0x2069))
            return false;
        p += n;
    }
    return true;
}
