#include "explain.h"

#include <stdio.h>
#include <string.h>

/* docs/checks.md, NUL-terminated, placed in .rodata at build time (paths are relative to the
 * repository root, where the build runs). */
__asm__(".section .rodata\n"
        ".global pf_docs_checks_md\n"
        ".type pf_docs_checks_md, @object\n"
        ".balign 16\n"
        "pf_docs_checks_md:\n"
        ".incbin \"docs/checks.md\"\n"
        ".byte 0\n"
        ".size pf_docs_checks_md, . - pf_docs_checks_md\n"
        ".previous\n");
extern const char pf_docs_checks_md[];

struct section {
    const char *start; /* the heading line */
    const char *body;  /* after the heading line */
    const char *end;   /* the next heading of the same or higher level, or the end */
    char name[64];
};

/* Parses a heading "## `name`" (level 2) or "### `name`" (level 3) at p. */
static int heading(const char *p, char *name, size_t n)
{
    int level = 0;
    while (p[level] == '#')
        level++;
    if ((level != 2 && level != 3) || p[level] != ' ' || p[level + 1] != '`') return 0;
    const char *s = p + level + 2;
    const char *e = strchr(s, '`');
    const char *nl = strchr(s, '\n');
    if (!e || (nl && e > nl) || (size_t)(e - s) >= n) return 0;
    memcpy(name, s, (size_t)(e - s));
    name[e - s] = '\0';
    return level;
}

static const char *next_line(const char *p)
{
    const char *nl = strchr(p, '\n');
    return nl ? nl + 1 : p + strlen(p);
}

/* Finds the end of a section at level starting after body. */
static const char *section_end(const char *body, int level)
{
    for (const char *p = body; *p; p = next_line(p)) {
        char name[64];
        int l = (*p == '#') ? heading(p, name, sizeof(name)) : 0;
        if (l && l <= level) return p;
        if (p[0] == '#' && p[1] == ' ') return p; /* a level-1 heading ends everything */
        if (level == 3 && p[0] == '#' && p[1] == '#' && p[2] == ' ') return p;
    }
    return body + strlen(body);
}

typedef void (*visit_fn)(void *arg, const char *check, const struct section *check_sec,
                         const struct section *code_sec);

/* Calls fn for every check section (code_sec NULL) and every code section. */
static void walk(visit_fn fn, void *arg)
{
    const char *doc = pf_docs_checks_md;
    struct section check = {0};
    bool in_check = false;
    for (const char *p = doc; *p; p = next_line(p)) {
        if (*p != '#') continue;
        char name[64];
        int level = heading(p, name, sizeof(name));
        if (level == 2) {
            check.start = p;
            check.body = next_line(p);
            check.end = section_end(check.body, 2);
            snprintf(check.name, sizeof(check.name), "%s", name);
            in_check = true;
            fn(arg, check.name, &check, NULL);
        } else if (level == 3 && in_check && p < check.end) {
            struct section code = {.start = p, .body = next_line(p)};
            code.end = section_end(code.body, 3);
            if (code.end > check.end) code.end = check.end;
            snprintf(code.name, sizeof(code.name), "%s", name);
            fn(arg, check.name, &check, &code);
        } else if (level == 2 || (p[0] == '#' && p[1] == ' ')) {
            in_check = false;
        }
    }
}

struct find {
    const char *check; /* wanted check id, or NULL */
    const char *code;  /* wanted code, or NULL */
    struct pf_buf *out;
    int hits;
};

static void append_range(struct pf_buf *out, const char *a, const char *b)
{
    while (b > a && (b[-1] == '\n' || b[-1] == ' '))
        b--;
    pf_buf_add(out, a, (size_t)(b - a));
    pf_buf_add(out, "\n", 1);
}

static void find_visit(void *arg, const char *check, const struct section *cs,
                       const struct section *code)
{
    struct find *f = arg;
    if (!code) {
        if (f->check && !f->code && strcmp(check, f->check) == 0) {
            if (f->hits++) pf_buf_add(f->out, "\n", 1);
            append_range(f->out, cs->start, cs->end);
        }
        return;
    }
    if (f->code && strcmp(code->name, f->code) == 0 &&
        (!f->check || strcmp(check, f->check) == 0)) {
        if (f->hits++) pf_buf_add(f->out, "\n", 1);
        pf_buf_addf(f->out, "### %s / %s\n", check, code->name);
        append_range(f->out, code->body, code->end);
    }
}

struct names {
    struct pf_strlist *ids;
    struct pf_strlist *codes;
};

static void list_visit(void *arg, const char *check, const struct section *cs,
                       const struct section *code)
{
    struct names *n = arg;
    (void)cs;
    if (!code) {
        if (n->ids) pf_strlist_add(n->ids, check);
    } else if (n->codes) {
        pf_strlist_addf(n->codes, "%s/%s", check, code->name);
    }
}

void pf_explain_list(struct pf_strlist *ids, struct pf_strlist *codes)
{
    struct names n = {ids, codes};
    walk(list_visit, &n);
}

int pf_explain(struct pf_buf *out, const char *what_in)
{
    /* ids and codes are lower case: P2P-DISABLED finds p2p-disabled */
    char what[128];
    size_t wn = 0;
    for (; what_in[wn] && wn + 1 < sizeof(what); wn++)
        what[wn] =
            (char)(what_in[wn] >= 'A' && what_in[wn] <= 'Z' ? what_in[wn] + 32 : what_in[wn]);
    what[wn] = '\0';
    char check[128] = "", code[128] = "";
    const char *slash = strchr(what, '/');
    if (slash) {
        snprintf(check, sizeof(check), "%.*s", (int)(slash - what), what);
        snprintf(code, sizeof(code), "%s", slash + 1);
    } else {
        snprintf(check, sizeof(check), "%s", what);
    }
    struct find f = {check, code[0] ? code : NULL, out, 0};
    walk(find_visit, &f);
    if (!f.hits && !slash) {
        /* not a check id ("rendezvous" has no dot): a finding code, under every check */
        f = (struct find){NULL, what, out, 0};
        walk(find_visit, &f);
    }
    if (f.hits) return 0;

    /* did you mean */
    struct pf_strlist ids = {0}, codes = {0};
    pf_explain_list(&ids, &codes);
    const char *best = NULL;
    int best_d = 4;
    for (size_t i = 0; i < ids.n; i++) {
        int d = pf_edit_distance(what, ids.v[i], 3);
        if (d < best_d) {
            best_d = d;
            best = ids.v[i];
        }
    }
    for (size_t i = 0; i < codes.n; i++) {
        const char *c = strchr(codes.v[i], '/') + 1;
        int d = pf_edit_distance(what, c, 3);
        if (d < best_d) {
            best_d = d;
            best = c;
        }
    }
    int r;
    if (best)
        r = pf_err_set(PF_ENOENT, "no check or finding code named '%s' (did you mean '%s'?)", what,
                       best);
    else
        r = pf_err_set(
            PF_ENOENT,
            "no check or finding code named '%s' ('preflight explain --list' lists them)", what);
    pf_strlist_free(&ids);
    pf_strlist_free(&codes);
    return r;
}

/* Whether a visited finding section is the code asked for (under the check asked for, when
 * one was). */
static bool is_wanted(const struct section *code, const char *check, const char *want_code,
                      const char *want_check)
{
    return code && strcmp(code->name, want_code) == 0 &&
           !(want_check && strcmp(check, want_check) != 0);
}

struct remedy {
    const char *check;
    const char *code;
    char *out;
    size_t n;
    int found;
};

static void remedy_visit(void *arg, const char *check, const struct section *cs,
                         const struct section *code)
{
    struct remedy *r = arg;
    (void)cs;
    if (r->found || !is_wanted(code, check, r->code, r->check)) return;
    const char *tag = "**Remedy:**";
    const char *p = code->body;
    const char *hit = NULL;
    while (p < code->end) {
        const char *s = strstr(p, tag);
        if (!s || s >= code->end) break;
        hit = s;
        break;
    }
    if (!hit) return;
    p = hit + strlen(tag);
    size_t used = 0;
    bool space = false;
    while (p < code->end && *p) {
        if (p[0] == '\n' && (p[1] == '\n' || p + 1 >= code->end)) break;
        char ch = *p == '\n' ? ' ' : *p;
        p++;
        if (ch == ' ') {
            space = used > 0;
            continue;
        }
        if (space && used + 1 < r->n) r->out[used++] = ' ';
        space = false;
        if (used + 1 < r->n) r->out[used++] = ch;
    }
    r->out[used] = '\0';
    r->found = used > 0;
}

int pf_explain_remedy(char *out, size_t n, const char *check_id, const char *code)
{
    if (n == 0) return PF_ETOOBIG;
    struct remedy r = {check_id, code, out, n, 0};
    walk(remedy_visit, &r);
    if (!r.found && check_id && strcmp(check_id, "preflight") != 0) {
        /* the run's own codes (timeout, interrupted) appear under the stage that was under way */
        r.check = "preflight";
        walk(remedy_visit, &r);
    }
    if (!r.found && check_id) {
        r.check = NULL;
        walk(remedy_visit, &r);
    }
    if (!r.found) {
        out[0] = '\0';
        return pf_err_set(PF_ENOENT, "no remedy documented for %s", code);
    }
    return 0;
}

/* ---- the failure class of a code ("**Class:** spec|node|peer" under its heading) */

static const char *const class_names[] = {"", "peer", "node", "spec"};

const char *pf_class_name(enum pf_class c)
{
    return (unsigned)c < PF_ARRAY_LEN(class_names) ? class_names[c] : "";
}

enum pf_class pf_class_parse(const char *s)
{
    for (size_t i = 1; s && i < PF_ARRAY_LEN(class_names); i++)
        if (strcmp(s, class_names[i]) == 0) return (enum pf_class)i;
    return PF_CLASS_NONE;
}

struct klass {
    const char *check;
    const char *code;
    enum pf_class found;
};

static void class_visit(void *arg, const char *check, const struct section *cs,
                        const struct section *code)
{
    struct klass *k = arg;
    (void)cs;
    if (k->found || !is_wanted(code, check, k->code, k->check)) return;
    static const char tag[] = "\n**Class:** ";
    for (const char *p = code->body - 1; p && p < code->end; p = strchr(p + 1, '\n')) {
        if (strncmp(p, tag, sizeof(tag) - 1) != 0) continue;
        const char *s = p + sizeof(tag) - 1;
        char word[8];
        size_t n = strcspn(s, " \n");
        if (n >= sizeof(word) || s + n > code->end) return;
        memcpy(word, s, n);
        word[n] = '\0';
        k->found = pf_class_parse(word);
        return;
    }
}

enum pf_class pf_explain_class(const char *check_id, const char *code)
{
    if (!code || !*code) return PF_CLASS_NONE;
    struct klass k = {check_id, code, PF_CLASS_NONE};
    walk(class_visit, &k);
    if (!k.found && check_id && strcmp(check_id, "preflight") != 0) {
        k.check = "preflight"; /* timeout, interrupted: under the stage that was under way */
        walk(class_visit, &k);
    }
    if (!k.found && check_id) {
        k.check = NULL;
        walk(class_visit, &k);
    }
    return k.found;
}
