/* lint_report.c - lint report output (human table + examples, JSON) and
 * the exit-code policy. */
#include <stdio.h>
#include <string.h>

#include "ds.h"
#include "ds_internal.h"

int ds_lint_worst(const ds_lint_report *r) {
    int worst = -1;
    for (int i = 0; i < DS_RULE_COUNT; i++)
        if (r->rules[i].count && (int)ds_rule_get(i)->severity > worst) worst = (int)ds_rule_get(i)->severity;
    return worst;
}

int ds_lint_exit_code(const ds_lint_report *r) {
    int w = ds_lint_worst(r);
    return w == DS_SEV_ERROR ? 2 : w == DS_SEV_WARNING ? 1 : 0;
}

/* JSON string with escapes; invalid UTF-8 bytes become U+FFFD. */
static void json_str(FILE *f, const char *s) {
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
            p++;
        } else if (c < 0x20 || c == 0x7F) {
            fprintf(f, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            fputc(c, f);
            p++;
        } else {
            size_t k = c >= 0xF0 && c < 0xF5 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
            size_t j = 1;
            while (k && j < k && (p[j] & 0xC0) == 0x80) j++;
            if (k && j == k) {
                fwrite(p, 1, k, f);
                p += k;
            } else {
                fputs("\\ufffd", f);
                p++;
            }
        }
    }
    fputc('"', f);
}

int ds_lint_write_json(const ds_lint_report *r, FILE *f) {
    int nerr = 0, nwarn = 0, ninfo = 0;
    fprintf(f, "{\"records\":%llu,\"documents\":%llu,\"files\":%llu,\"bytes\":%llu,\"median_bytes\":%llu,",
            (unsigned long long)r->records, (unsigned long long)r->docs, (unsigned long long)r->files,
            (unsigned long long)r->bytes, (unsigned long long)r->median_bytes);
    if (r->has_tokens) {
        fprintf(f, "\"tokenizer\":");
        json_str(f, r->tokenizer);
        fprintf(f, ",\"tokens\":%llu,", (unsigned long long)r->tokens);
    }
    if (r->seq_len) fprintf(f, "\"seq_len\":%llu,", (unsigned long long)r->seq_len);
    if (r->median_approximate) fprintf(f, "\"median_approximate\":true,");
    if (r->dup_untracked)
        fprintf(f, "\"duplicates_tracked\":%llu,\"duplicates_untracked\":%llu,", (unsigned long long)r->dup_tracked,
                (unsigned long long)r->dup_untracked);
    fprintf(f, "\"max_doc_bytes\":%llu,\"findings\":[", (unsigned long long)r->max_doc_bytes);
    int first = 1;
    for (int i = 0; i < DS_RULE_COUNT; i++) {
        const ds_lint_finding *fd = &r->rules[i];
        if (!fd->count) continue;
        const ds_rule_info *ri = ds_rule_get(i);
        if (ri->severity == DS_SEV_ERROR) nerr++;
        else if (ri->severity == DS_SEV_WARNING) nwarn++;
        else ninfo++;
        fprintf(f, "%s{\"rule\":\"%s\",\"severity\":\"%s\",\"count\":%llu,\"title\":", first ? "" : ",", ri->id,
                ds_severity_name(ri->severity), (unsigned long long)fd->count);
        json_str(f, ri->title);
        fprintf(f, ",\"examples\":[");
        for (size_t k = 0; k < fd->n_examples; k++) {
            const ds_lint_example *e = &fd->examples[k];
            fprintf(f, "%s{\"file\":", k ? "," : "");
            json_str(f, e->file);
            fprintf(f, ",\"line\":%llu,\"offset\":%llu,\"record\":%llu,\"pos\":%llu,\"value\":%llu,\"note\":",
                    (unsigned long long)e->line, (unsigned long long)e->offset, (unsigned long long)e->index,
                    (unsigned long long)e->pos, (unsigned long long)e->value);
            json_str(f, e->note);
            fputc('}', f);
        }
        fprintf(f, "]}");
        first = 0;
    }
    fprintf(f, "],\"errors\":%d,\"warnings\":%d,\"infos\":%d,\"exit\":%d}\n", nerr, nwarn, ninfo, ds_lint_exit_code(r));
    return ferror(f) ? DS_ERR_IO : DS_OK;
}

/* Where a memory bound made a result partial (never for ordinary corpora). */
static void print_limits(const ds_lint_report *r, FILE *f) {
    if (r->dup_untracked)
        fprintf(f,
                "note: duplicate detection remembered the first %llu distinct documents; %llu later ones were "
                "compared with those only, not with each other\n",
                (unsigned long long)r->dup_tracked, (unsigned long long)r->dup_untracked);
    if (r->median_approximate)
        fprintf(f,
                "note: over %zu distinct document sizes >= %llu bytes: median and outlier-doc count are "
                "accurate to 1/64 there\n",
                DS_LH_SPARSE_MAX, (unsigned long long)DS_LH_DENSE);
}

int ds_lint_print(const ds_lint_report *r, FILE *f) {
    fprintf(f, "%llu records, %llu documents, %llu bytes in %llu file(s)", (unsigned long long)r->records,
            (unsigned long long)r->docs, (unsigned long long)r->bytes, (unsigned long long)r->files);
    if (r->has_tokens) fprintf(f, ", %llu tokens (%s)", (unsigned long long)r->tokens, r->tokenizer);
    fprintf(f, "\n");
    print_limits(r, f);
    int any = 0;
    for (int i = 0; i < DS_RULE_COUNT; i++) any |= r->rules[i].count != 0;
    if (!any) {
        fprintf(f, "clean: no findings\n");
        return ferror(f) ? DS_ERR_IO : DS_OK;
    }
    fprintf(f, "\n%-20s %-8s %10s  %s\n", "RULE", "SEVERITY", "COUNT", "MEANING");
    /* errors first, then warnings, then info */
    for (int sev = DS_SEV_ERROR; sev >= DS_SEV_INFO; sev--)
        for (int i = 0; i < DS_RULE_COUNT; i++) {
            const ds_rule_info *ri = ds_rule_get(i);
            if (!r->rules[i].count || (int)ri->severity != sev) continue;
            fprintf(f, "%-20s %-8s %10llu  %s\n", ri->id, ds_severity_name(ri->severity),
                    (unsigned long long)r->rules[i].count, ri->title);
        }
    fprintf(f, "\nexamples (file:line @offset):\n");
    for (int sev = DS_SEV_ERROR; sev >= DS_SEV_INFO; sev--)
        for (int i = 0; i < DS_RULE_COUNT; i++) {
            const ds_rule_info *ri = ds_rule_get(i);
            const ds_lint_finding *fd = &r->rules[i];
            if (!fd->count || (int)ri->severity != sev || !fd->n_examples) continue;
            fprintf(f, "  %s  (fix: %s)\n", ri->id, ri->fix);
            for (size_t k = 0; k < fd->n_examples; k++) {
                const ds_lint_example *e = &fd->examples[k];
                fprintf(f, "    %s:%llu @%llu", e->file, (unsigned long long)e->line, (unsigned long long)e->offset);
                if (e->pos) fprintf(f, " +%llu", (unsigned long long)e->pos);
                if (e->note[0]) fprintf(f, "  %s", e->note);
                fputc('\n', f);
            }
            if (fd->count > fd->n_examples)
                fprintf(f, "    ... and %llu more\n", (unsigned long long)(fd->count - fd->n_examples));
        }
    int code = ds_lint_exit_code(r);
    fprintf(f, "\nresult: %s (exit %d)\n", code == 2 ? "errors" : code == 1 ? "warnings" : "info only", code);
    return ferror(f) ? DS_ERR_IO : DS_OK;
}
