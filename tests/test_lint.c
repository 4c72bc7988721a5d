/* test_lint.c - every file in tests/data/bad triggers exactly the rules listed
 * in tests/data/bad/expected.tsv, at the listed record line and offset; the
 * clean corpus triggers nothing; reports do not depend on the thread count. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ds.h"
#include "tk.h"
#include "test_check.h"
#include "hostile_tk.h"

typedef struct {
    char file[128], opts[128], rule[64];
    unsigned long long line, offset;
} row;

static tk_tokenizer *g_tok;
static int g_tok_tried;

static tk_tokenizer *get_tok(void) {
    if (!g_tok_tried) {
        g_tok_tried = 1;
        char p[1024];
        snprintf(p, sizeof p, "%s/vocab/gpt2.tiktoken", MKS_SHARED_DIR);
        if (access(p, R_OK) != 0) return NULL;
        char err[256] = "";
        int rc = tk_load(p, TK_PAT_NONE, &g_tok, err, sizeof err);
        CHECK(rc == 0, "tk_load(%s): %s", p, err);
    }
    return g_tok;
}

/* tok=hostile: a tokenizer.json whose Split regex (?:x+x+)+y|. makes
 * tokenizer_limit.jsonl's document spend its regex work budget (issue 32). */
static tk_tokenizer *g_hostile;
static char g_hostile_dir[256];

static tk_tokenizer *get_hostile(void) {
    if (!g_hostile) {
        const char *td = getenv("TMPDIR");
        snprintf(g_hostile_dir, sizeof g_hostile_dir, "%s/test_lint.XXXXXX", td && *td ? td : "/tmp");
        if (!mkdtemp(g_hostile_dir)) return NULL;
        char p[512], err[256] = "";
        snprintf(p, sizeof p, "%s/regex.json", g_hostile_dir);
        if (htk_regex_json(p, HTK_REGEX) == 0)
            CHECK(tk_load(p, TK_PAT_NONE, &g_hostile, err, sizeof err) == 0, "%s", err);
        unlink(p);
        rmdir(g_hostile_dir);
    }
    return g_hostile;
}

/* tok=qwen2: a tokenizer with ChatML's special tokens (chat records). */
static tk_tokenizer *g_qwen2;
static int g_qwen2_tried;
static tk_tokenizer *get_qwen2(void) {
    if (!g_qwen2_tried) {
        g_qwen2_tried = 1;
        char p[1024], err[256] = "";
        snprintf(p, sizeof p, "%s/vocab/hf/qwen2/tokenizer.json", MKS_SHARED_DIR);
        if (access(p, R_OK) != 0) return NULL;
        CHECK(tk_load(p, TK_PAT_NONE, &g_qwen2, err, sizeof err) == 0, "tk_load(%s): %s", p, err);
    }
    return g_qwen2;
}

/* Apply "k=v,k=v" options. Returns 0 if the tokenizer is needed but missing. */
static int apply_opts(const char *opts, ds_reader_opts *ro, ds_analyze_opts *ao) {
    if (!strcmp(opts, "-")) return 1;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", opts);
    for (char *kv = strtok(buf, ","); kv; kv = strtok(NULL, ",")) {
        char *eq = strchr(kv, '=');
        if (!eq) continue;
        *eq = 0;
        const char *k = kv, *v = eq + 1;
        if (!strcmp(k, "sep"))
            ro->doc_sep = !strcmp(v, "line") ? DS_SEP_LINE : !strcmp(v, "blank") ? DS_SEP_BLANK : DS_SEP_FILE;
        else if (!strcmp(k, "maxrec")) ro->max_record_bytes = strtoull(v, NULL, 10);
        else if (!strcmp(k, "maxdoc")) ao->max_doc_bytes = strtoull(v, NULL, 10);
        else if (!strcmp(k, "L")) ao->seq_len = strtoull(v, NULL, 10);
        else if (!strcmp(k, "outmin")) ao->outlier_min_bytes = strtoull(v, NULL, 10);
        else if (!strcmp(k, "longline")) ao->long_line_bytes = strtoull(v, NULL, 10);
        else if (!strcmp(k, "bpt")) ao->min_bytes_per_token = strtod(v, NULL);
        else if (!strcmp(k, "tok")) {
            ao->tok = (const struct tk_tokenizer *)(!strcmp(v, "hostile") ? get_hostile()
                                                    : !strcmp(v, "qwen2") ? get_qwen2()
                                                                          : get_tok());
            if (!ao->tok) return 0;
        } else if (!strcmp(k, "fmt")) CHECK(ds_format_parse(v, &ao->format) == 0, "fmt=%s", v);
        else if (!strcmp(k, "tmpl")) CHECK((ao->chat_template = ds_chat_template_find(v)) != NULL, "tmpl=%s", v);
    }
    return 1;
}

static char *report_json(const ds_lint_report *r) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ds_lint_write_json(r, f);
    fclose(f);
    return buf;
}

static void check_file(const row *rows, size_t nrows) {
    const char *file = rows[0].file;
    char path[1024];
    snprintf(path, sizeof path, "%s/bad/%s", MKS_TEST_DATA, file);
    ds_reader_opts ro;
    ds_analyze_opts ao;
    ds_reader_opts_init(&ro);
    ds_analyze_opts_init(&ao);
    if (!apply_opts(rows[0].opts, &ro, &ao)) {
        printf("skip %s (no tokenizer vocabulary in %s)\n", file, MKS_SHARED_DIR);
        return;
    }
    const char *in[] = {path};
    char *json[2] = {0};
    for (int t = 0; t < 2; t++) {
        ao.threads = t + 1;
        ds_lint_report *rep = NULL;
        char err[256] = "";
        int rc = ds_analyze(in, 1, &ro, &ao, &rep, NULL, err, sizeof err);
        CHECK(rc == 0, "%s: ds_analyze: %s", file, err);
        if (rc) return;
        json[t] = report_json(rep);
        for (int rule = 0; rule < DS_RULE_COUNT; rule++) {
            const ds_lint_finding *fd = &rep->rules[rule];
            const char *id = ds_rule_get(rule)->id;
            size_t want = 0;
            const row *first = NULL;
            for (size_t i = 0; i < nrows; i++)
                if (!strcmp(rows[i].rule, id)) {
                    if (!first) first = &rows[i];
                    want++;
                }
            CHECK(fd->count == want, "%s: rule %s count %llu, expected %zu", file, id, (unsigned long long)fd->count,
                  want);
            if (first && fd->n_examples) {
                CHECK(fd->examples[0].line == first->line && fd->examples[0].offset == first->offset,
                      "%s: rule %s at line %llu offset %llu, expected line %llu offset %llu", file, id,
                      (unsigned long long)fd->examples[0].line, (unsigned long long)fd->examples[0].offset, first->line,
                      first->offset);
                CHECK(strstr(fd->examples[0].file, file) != NULL, "%s: example file %s", file, fd->examples[0].file);
            }
        }
        int code = ds_lint_exit_code(rep);
        int worst = -1;
        for (size_t i = 0; i < nrows; i++) {
            int r = ds_rule_find(rows[i].rule);
            CHECK(r >= 0, "unknown rule id %s in expected.tsv", rows[i].rule);
            if (r >= 0 && (int)ds_rule_get(r)->severity > worst) worst = (int)ds_rule_get(r)->severity;
        }
        CHECK(code == (worst == DS_SEV_ERROR ? 2 : worst == DS_SEV_WARNING ? 1 : 0), "%s: exit code %d", file, code);
        ds_lint_report_free(rep);
    }
    CHECK(json[0] && json[1] && !strcmp(json[0], json[1]), "%s: report differs between 1 and 2 threads", file);
    free(json[0]);
    free(json[1]);
}

int main(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/bad/expected.tsv", MKS_TEST_DATA);
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return 1;
    }
    row rows[256];
    size_t n = 0;
    char line[1024];
    while (fgets(line, sizeof line, f) && n < 256) {
        if (line[0] == '#' || line[0] == '\n') continue;
        row *r = &rows[n];
        if (sscanf(line, "%127[^\t]\t%127[^\t]\t%63[^\t]\t%llu\t%llu", r->file, r->opts, r->rule, &r->line,
                   &r->offset) == 5)
            n++;
    }
    fclose(f);
    CHECK(n >= 30, "expected.tsv has %zu rows", n);
    /* every rule has at least one bad file */
    for (int rule = 0; rule < DS_RULE_COUNT; rule++) {
        int seen = 0;
        for (size_t i = 0; i < n; i++) seen |= !strcmp(rows[i].rule, ds_rule_get(rule)->id);
        CHECK(seen, "no test input for rule %s", ds_rule_get(rule)->id);
    }
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && !strcmp(rows[j].file, rows[i].file)) j++;
        check_file(rows + i, j - i);
        i = j;
    }

    /* clean corpus: nothing at all, with and without a tokenizer */
    snprintf(path, sizeof path, "%s/clean", MKS_TEST_DATA);
    const char *in[] = {path};
    for (int t = 0; t < 2; t++) {
        ds_analyze_opts ao;
        ds_analyze_opts_init(&ao);
        if (t == 1) {
            ao.tok = (const struct tk_tokenizer *)get_tok();
            if (!ao.tok) break;
            ao.seq_len = 4096;
        }
        ds_lint_report *rep = NULL;
        char err[256] = "";
        int rc = ds_analyze(in, 1, NULL, &ao, &rep, NULL, err, sizeof err);
        CHECK(rc == 0, "clean: %s", err);
        if (rc) continue;
        CHECK(rep->docs == 43 + 10 + 1, "clean: %llu docs", (unsigned long long)rep->docs);
        for (int rule = 0; rule < DS_RULE_COUNT; rule++)
            CHECK(rep->rules[rule].count == 0, "clean corpus: rule %s fired %llu times (%s:%llu)",
                  ds_rule_get(rule)->id, (unsigned long long)rep->rules[rule].count,
                  rep->rules[rule].n_examples ? rep->rules[rule].examples[0].file : "",
                  rep->rules[rule].n_examples ? (unsigned long long)rep->rules[rule].examples[0].line : 0ULL);
        CHECK(ds_lint_exit_code(rep) == 0, "clean exit code");
        ds_lint_report_free(rep);
    }
    if (g_tok) tk_free(g_tok);
    if (g_qwen2) tk_free(g_qwen2);
    if (failures) {
        fprintf(stderr, "%d failure(s)\n", failures);
        return 1;
    }
    printf("test_lint: ok (%zu expectations)\n", n);
    return 0;
}
