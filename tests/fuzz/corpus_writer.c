/* corpus_writer.c - see corpus_writer.h. */
#include "corpus_writer.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct corpus {
    const char *dir, *dict_path;
    bool check;
    int errors;
    char **names;
    size_t n, cap;
    char *dict; /* the dictionary's text */
    size_t dict_len, dict_cap;
};

static bool name_ok(const char *name)
{
    if (!*name || strlen(name) > 100 || !strncmp(name, "found-", 6))
        return false;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return false;
    return true;
}

static bool generated(const corpus *c, const char *name)
{
    for (size_t k = 0; k < c->n; k++)
        if (!strcmp(c->names[k], name))
            return true;
    return false;
}

static void fail(corpus *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(corpus *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", c->dir);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    c->errors++;
}

void corpus_add(corpus *c, const char *name, const void *data, size_t len)
{
    char path[4096];
    if (!name_ok(name) || generated(c, name)) {
        fail(c, "generator bug: bad or repeated name '%s'", name);
        return;
    }
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->names = realloc(c->names, c->cap * sizeof *c->names);
        if (!c->names) {
            perror("realloc");
            exit(2);
        }
    }
    c->names[c->n++] = strdup(name);
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    if (c->check) {
        FILE *f = fopen(path, "rb");
        if (!f) {
            fail(c, "%s is missing (rerun the generator to update the corpus)", name);
            return;
        }
        char *have = malloc(len + 1);
        size_t got = fread(have, 1, len + 1, f);
        fclose(f);
        if (got != len || memcmp(have, data, len) != 0)
            fail(c, "%s differs from what the generator makes now (rerun it)", name);
        free(have);
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fail(c, "cannot write %s: %s", path, strerror(errno));
        return;
    }
}

void corpus_addf(corpus *c, const void *data, size_t len, const char *fmt, ...)
{
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    corpus_add(c, name, data, len);
}

static void dict_append(corpus *c, const char *s, size_t n)
{
    if (c->dict_len + n + 1 > c->dict_cap) {
        c->dict_cap = 2 * (c->dict_len + n + 1) + 4096;
        c->dict = realloc(c->dict, c->dict_cap);
        if (!c->dict) {
            perror("realloc");
            exit(2);
        }
    }
    memcpy(c->dict + c->dict_len, s, n);
    c->dict_len += n;
    c->dict[c->dict_len] = '\0';
}

void corpus_dict(corpus *c, const void *data, size_t len)
{
    const unsigned char *b = data;
    char line[1024];
    size_t n = 0;
    if (len == 0 || len > 200) {
        fail(c, "generator bug: dictionary entry of %zu bytes", len);
        return;
    }
    line[n++] = '"';
    for (size_t k = 0; k < len; k++) {
        if (b[k] >= 0x20 && b[k] < 0x7f && b[k] != '"' && b[k] != '\\')
            line[n++] = (char)b[k];
        else
            n += (size_t)snprintf(line + n, sizeof line - n, "\\x%02x", b[k]);
    }
    line[n++] = '"';
    line[n++] = '\n';
    line[n] = '\0';
    /* once each */
    for (const char *p = c->dict; p && (p = strstr(p, line)) != NULL; p++)
        if (p == c->dict || p[-1] == '\n')
            return;
    dict_append(c, line, n);
}

void corpus_dict_word(corpus *c, const char *word)
{
    corpus_dict(c, word, strlen(word));
}

void corpus_dict_comment(corpus *c, const char *text)
{
    dict_append(c, "# ", 2);
    dict_append(c, text, strlen(text));
    dict_append(c, "\n", 1);
}

static void dict_finish(corpus *c)
{
    if (!c->dict_path)
        return;
    if (!c->dict) {
        fail(c, "%s: this generator makes no dictionary", c->dict_path);
        return;
    }
    if (c->check) {
        FILE *f = fopen(c->dict_path, "rb");
        char *have = malloc(c->dict_len + 1);
        size_t got = f ? fread(have, 1, c->dict_len + 1, f) : 0;
        if (f)
            fclose(f);
        if (!f || got != c->dict_len || memcmp(have, c->dict, c->dict_len) != 0)
            fail(c, "%s differs from what the generator makes now (rerun it)", c->dict_path);
        free(have);
        return;
    }
    FILE *f = fopen(c->dict_path, "wb");
    if (!f || fwrite(c->dict, 1, c->dict_len, f) != c->dict_len || fclose(f) != 0)
        fail(c, "cannot write %s: %s", c->dict_path, strerror(errno));
}

/* Files in the directory that the generator did not make. */
static void corpus_strays(corpus *c)
{
    DIR *d = opendir(c->dir);
    struct dirent *e;
    if (!d) {
        fail(c, "cannot list: %s", strerror(errno));
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || !strncmp(e->d_name, "found-", 6) || generated(c, e->d_name))
            continue;
        if (c->check) {
            fail(c,
                 "%s is not generated any more (rerun the generator, which deletes it, or "
                 "rename it found-*)",
                 e->d_name);
        } else {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
            if (remove(path) != 0)
                fail(c, "cannot delete %s: %s", path, strerror(errno));
        }
    }
    closedir(d);
}

int corpus_main(int argc, char **argv, const char *what, void (*gen)(corpus *c))
{
    corpus c = {0};
    if ((argc == 3 || argc == 4) && !strcmp(argv[1], "--check")) {
        c.check = true;
        c.dir = argv[2];
        c.dict_path = argc == 4 ? argv[3] : NULL;
    } else if ((argc == 2 || argc == 3) && argv[1][0] != '-') {
        c.dir = argv[1];
        c.dict_path = argc == 3 ? argv[2] : NULL;
        if (mkdir(c.dir, 0777) != 0 && errno != EEXIST) {
            perror(c.dir);
            return 2;
        }
    } else {
        fprintf(stderr,
                "usage: %s [--check] DIR [DICT]\n  writes (or checks) the seed corpus of %s\n",
                argv[0], what);
        return 2;
    }
    gen(&c);
    corpus_strays(&c);
    dict_finish(&c);
    free(c.dict);
    for (size_t k = 0; k < c.n; k++)
        free(c.names[k]);
    free(c.names);
    if (c.errors) {
        fprintf(stderr, "%s: %d problem(s); the generator is %s\n", c.dir, c.errors, argv[0]);
        return 1;
    }
    printf("%s: %zu inputs %s\n", c.dir, c.n, c.check ? "as generated" : "written");
    return 0;
}
