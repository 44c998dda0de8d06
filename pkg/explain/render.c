/* The markdown of docs/checks.md as a terminal shows it: paragraphs re-wrapped to the width,
 * headings underlined, lists with hanging indents, **bold** and `code` in ANSI on a terminal
 * and as plain text (no markup characters) otherwise. Fenced blocks and tables stay as they
 * are. Only what the docs under docs/checks use is understood. */
#include <stdio.h>
#include <string.h>

#include "explain.h"

#define A_BOLD "\033[1m"
#define A_CODE "\033[36m"
#define A_OFF_BOLD "\033[22m"
#define A_OFF_CODE "\033[39m"
#define A_RESET "\033[0m"

/* Appends s[0..n) with its inline markup turned into ANSI or dropped. */
static void inline_md(struct pf_buf *o, const char *s, size_t n, bool ansi)
{
    bool bold = false, code = false;
    for (size_t i = 0; i < n; i++) {
        if (!code && s[i] == '*' && i + 1 < n && s[i + 1] == '*') {
            bold = !bold;
            if (ansi) pf_buf_addf(o, "%s", bold ? A_BOLD : A_OFF_BOLD);
            i++;
            continue;
        }
        if (s[i] == '`') {
            code = !code;
            if (ansi) pf_buf_addf(o, "%s", code ? A_CODE : A_OFF_CODE);
            continue;
        }
        pf_buf_add(o, &s[i], 1);
    }
    if (ansi && (bold || code)) pf_buf_addf(o, "%s", A_RESET);
}

/* Visible columns of s[0..n): escape sequences and UTF-8 continuation bytes take none. */
static int visible(const char *s, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\033') {
            while (i < n && s[i] != 'm')
                i++;
            continue;
        }
        c += ((unsigned char)s[i] & 0xC0) != 0x80;
    }
    return c;
}

/* Appends text (already rendered inline) word-wrapped: the first line after prefix, the
 * others indented by indent. */
static void wrap(struct pf_buf *o, const char *text, const char *prefix, int indent, int width)
{
    pf_buf_addf(o, "%s", prefix);
    int col = visible(prefix, strlen(prefix));
    bool start = true;
    for (const char *p = text; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        size_t wl = strcspn(p, " ");
        int w = visible(p, wl);
        if (!start && col + 1 + w > width) {
            pf_buf_addf(o, "\n%*s", indent, "");
            col = indent;
            start = true;
        }
        if (!start) {
            pf_buf_add(o, " ", 1);
            col++;
        }
        pf_buf_add(o, p, wl);
        col += w;
        start = false;
        p += wl;
    }
    pf_buf_add(o, "\n", 1);
}

struct para {
    struct pf_buf raw; /* the markdown of the paragraph, lines joined by spaces */
    char prefix[16];   /* "" or a list bullet */
    int indent;
    bool open;
};

static void flush(struct pf_buf *o, struct para *pa, bool ansi, int width)
{
    if (!pa->open) return;
    struct pf_buf r;
    pf_buf_init(&r, PF_BUF_DOCUMENT);
    inline_md(&r, pa->raw.data, pa->raw.len, ansi);
    wrap(o, r.data, pa->prefix, pa->indent, width);
    pf_buf_free(&r);
    pf_buf_free(&pa->raw);
    pf_buf_init(&pa->raw, PF_BUF_DOCUMENT);
    pa->open = false;
}

static void para_add(struct para *pa, const char *s, size_t n)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    if (pa->raw.len) pf_buf_add(&pa->raw, " ", 1);
    pf_buf_add(&pa->raw, s, n);
    pa->open = true;
}

static void heading_line(struct pf_buf *o, const char *s, size_t n, int level, bool ansi)
{
    struct pf_buf r;
    pf_buf_init(&r, PF_BUF_TEXT);
    inline_md(&r, s, n, false);
    const char *t = r.data;
    if (ansi) {
        pf_buf_addf(o, "%s%s%s\n", level <= 2 ? A_BOLD "\033[4m" : A_BOLD, t, A_RESET);
    } else {
        pf_buf_addf(o, "%s\n", t);
        int w = visible(t, strlen(t));
        for (int i = 0; i < w; i++)
            pf_buf_add(o, level <= 2 ? "=" : "-", 1);
        pf_buf_add(o, "\n", 1);
    }
    pf_buf_free(&r);
}

/* The length of a list marker ("- ", "* ", "12. ") at s, 0 when none. */
static size_t bullet(const char *s, size_t n)
{
    if (n >= 2 && (s[0] == '-' || s[0] == '*') && s[1] == ' ') return 2;
    size_t i = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    return i && i + 1 < n && s[i] == '.' && s[i + 1] == ' ' ? i + 2 : 0;
}

void pf_explain_render(struct pf_buf *out, const char *md, bool ansi, int width)
{
    if (width < 40) width = 40;
    struct para pa = {.open = false};
    pf_buf_init(&pa.raw, PF_BUF_DOCUMENT);
    bool fence = false, blank = true;
    for (const char *p = md; *p;) {
        size_t n = strcspn(p, "\n");
        const char *line = p;
        p += n + (p[n] == '\n');
        size_t lead = 0;
        while (lead < n && line[lead] == ' ')
            lead++;
        if (n - lead >= 3 && strncmp(line + lead, "```", 3) == 0) {
            flush(out, &pa, ansi, width);
            fence = !fence;
            continue;
        }
        if (fence || line[0] == '|') {
            flush(out, &pa, ansi, width);
            pf_buf_addf(out, "%s%.*s\n", fence ? "    " : "", (int)n, line);
            blank = false;
            continue;
        }
        if (lead == n) {
            flush(out, &pa, ansi, width);
            if (!blank) pf_buf_add(out, "\n", 1);
            blank = true;
            continue;
        }
        blank = false;
        int level = 0;
        while ((size_t)level < n && line[level] == '#')
            level++;
        if (level && (size_t)level < n && line[level] == ' ') {
            flush(out, &pa, ansi, width);
            heading_line(out, line + level + 1, n - (size_t)level - 1, level, ansi);
            continue;
        }
        size_t b = bullet(line + lead, n - lead);
        if (b) {
            flush(out, &pa, ansi, width);
            snprintf(pa.prefix, sizeof(pa.prefix), "%*s%.*s", (int)lead + 2, "", (int)b,
                     line + lead);
            pa.indent = (int)(lead + 2 + b);
            para_add(&pa, line + lead + b, n - lead - b);
            continue;
        }
        /* "**Class:** node" right under "**Default:** fail" is a line of its own */
        if (n >= 10 && strncmp(line, "**Class:**", 10) == 0) flush(out, &pa, ansi, width);
        if (!pa.open) {
            pa.prefix[0] = '\0';
            pa.indent = 0;
        }
        para_add(&pa, line, n);
    }
    flush(out, &pa, ansi, width);
    pf_buf_free(&pa.raw);
}
