/* ds_chat.h - fine-tuning records: chat conversations and prompt/completion
 * pairs, rendered through a model family's chat template into token ids with
 * a per-token loss mask (issue 28; docs/chat.md).
 *
 * A record is one JSONL line. ds_chat_parse reads it into messages;
 * ds_chat_render lays the messages out as the template does (byte-exact with
 * the family's Jinja template under transformers' apply_chat_template), as
 * pieces that are either template special tokens or text; ds_chat_encode
 * turns the pieces into ids: a special piece is the tokenizer's special
 * token (never text), consecutive text pieces are encoded together as plain
 * text (special-token text inside a message stays text), and the loss mask
 * marks each token that overlaps a loss span.
 */
#ifndef DS_CHAT_H
#define DS_CHAT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tk_tokenizer;

/* What a record holds. AUTO decides per record by its fields: `messages`
 * (the messages field) -> chat, `prompt` + `completion` -> prompt-completion,
 * else text. */
typedef enum { DS_FMT_TEXT = 0, DS_FMT_CHAT = 1, DS_FMT_PROMPT_COMPLETION = 2, DS_FMT_AUTO = 3 } ds_format;
const char *ds_format_name(int v);                     /* "text", "chat", "prompt-completion", "auto" */
int ds_format_parse(const char *name, ds_format *out); /* 0, or -1 for an unknown name */

/* Which tokens are targets. DEFAULT: assistant for chat, completion for
 * prompt-completion. */
typedef enum { DS_LOSS_ASSISTANT = 0, DS_LOSS_COMPLETION = 1, DS_LOSS_ALL = 2, DS_LOSS_DEFAULT = 3 } ds_loss_on;
const char *ds_loss_on_name(int v);                      /* "assistant", "completion", "all", "default" */
int ds_loss_on_parse(const char *name, ds_loss_on *out); /* 0, or -1 */

typedef enum { DS_ROLE_SYSTEM = 0, DS_ROLE_USER = 1, DS_ROLE_ASSISTANT = 2, DS_ROLE_TOOL = 3 } ds_role;
const char *ds_role_name(int v); /* "system", "user", "assistant", "tool" */

/* A message's reasoning (the first of reasoning_content, thinking, reasoning
 * that is not null, as transformers' apply_chat_template aliases them; only
 * templates that read it render it: qwen3). Not a string: the template
 * raises where it uses it, so its Python truth is kept to know where. */
typedef enum {
    DS_REASON_NONE = 0,   /* absent or null */
    DS_REASON_STRING = 1, /* r_off/r_len */
    DS_REASON_OTHER_TRUE, /* a number, bool, list or object Python finds true */
    DS_REASON_OTHER_FALSE /* false, 0, [], {} */
} ds_reason_kind;

/* A tool call's name or arguments as the templates see them (bytes in ds_chat.buf). */
typedef enum {
    DS_TC_ABSENT = 0, /* not there: a name prints as "", arguments make tojson raise */
    DS_TC_STRING,     /* a string: the bytes */
    DS_TC_JSON,       /* anything else: arguments hold its tojson (json.dumps as transformers' filter),
                       * a name Python's str() of a number, bool or null */
    DS_TC_BAD         /* a name that is a list or an object (its Python repr is not rendered: refused) */
} ds_tc_kind;
typedef struct {
    uint8_t name_kind, args_kind; /* ds_tc_kind */
    size_t name_off, name_len, args_off, args_len;
} ds_chat_callview;
/* One element of an assistant message's tool_calls: the element's own
 * name/arguments and those of its `function` (templates differ in which
 * they read: Qwen2.5 takes function when it is defined, Qwen3 when it is
 * true). An element that is not an object has neither (arguments absent). */
typedef enum {
    DS_FN_ABSENT = 0,
    DS_FN_OBJECT, /* a non-empty object: fn */
    DS_FN_EMPTY,  /* {} */
    DS_FN_FALSY,  /* null, false, 0, "", [] */
    DS_FN_TRUTHY  /* another true value that is not an object */
} ds_fn_state;
typedef struct {
    ds_chat_callview call, fn;
    uint8_t fn_state; /* ds_fn_state */
    /* Mistral: `function | tojson` (fn_json_kind DS_TC_JSON; ABSENT: no
     * function) and the call's id (DS_TC_STRING with id_chars code points;
     * ABSENT or JSON: not a string) */
    uint8_t fn_json_kind, id_kind;
    size_t fn_json_off, fn_json_len, id_off, id_len, id_chars;
} ds_chat_call;

/* One element of a record's tools. */
typedef struct {
    size_t off, len; /* tool | tojson (in ds_chat.buf) */
    /* Mistral's [AVAILABLE_TOOLS] entry: tool.function's items but "return",
     * '"key": "str"' raw or '"key": ' + tojson, joined ", " (items_ok 0:
     * tool.function is not an object, the template raises) */
    size_t items_off, items_len;
    int items_ok;
} ds_chat_tool;

/* One message: role and content (bytes in the conversation's buffer). */
typedef struct {
    ds_role role;
    size_t off, len;       /* content in ds_chat.buf */
    int completion;        /* prompt-completion: 1 for a message of the completion */
    ds_reason_kind reason; /* reasoning (assistant messages) */
    size_t r_off, r_len;   /* DS_REASON_STRING: the reasoning in ds_chat.buf */
    int content_null;      /* content is null (accepted only beside a non-empty tool_calls list; len 0) */
    /* tool_calls: 0 absent or false (null, [], {}, "", 0, false), 1 a non-empty
     * list (ds_chat.calls[call0 .. call0 + n_calls)), 2 another true value
     * (every template that renders tool calls raises on it) */
    uint8_t calls_state;
    size_t call0, n_calls;
    uint8_t calls_defined; /* tool_calls present and not null (Mistral's test; [] included) */
    /* tool_call_id (tool messages): ds_tc_kind, its bytes and code points */
    uint8_t tcid_kind;
    size_t tcid_off, tcid_len, tcid_chars;
    uint32_t node; /* the message's object in the parser's tape (ds_chat_msg_equal) */
    uint8_t parts; /* content was a list of parts (joined with "\n" into off/len) */
} ds_chat_msg;

/* A parsed record; reuse one per thread (ds_chat_parse resets it). */
typedef struct {
    ds_chat_msg *msgs;
    size_t n, cap;
    uint8_t *buf; /* the contents, one after another */
    size_t buf_len, buf_cap;
    ds_format format;    /* CHAT or PROMPT_COMPLETION (TEXT: buf holds the text, n == 0) */
    int pc_strings;      /* prompt-completion given as two strings (rendered as plain text, no template) */
    size_t other_parts;  /* list-of-parts content: parts that are not text (left out) */
    ds_chat_call *calls; /* the messages' tool calls */
    size_t n_calls, calls_cap;
    /* the record's `tools` (function schemas), as apply_chat_template(tools=)
     * takes them: 0 absent or false, 1 a non-empty list (tools[i]: the
     * tojson of each element, in buf), 2 another true value (refused), 3 a
     * false number or bool (no tools to `if tools`; Mistral's loop raises) */
    uint8_t tools_state;
    uint8_t tools_defined;                 /* tools present and not null (Mistral's `tools is not none`; [] included) */
    size_t tools_json_off, tools_json_len; /* tools defined, not a list: `tools | tojson` (Mistral v7) */
    ds_chat_tool *tools;
    size_t n_tools, tools_cap;
    void *impl; /* the parser's reused JSON tape (ds_chat_free frees it) */
} ds_chat;
void ds_chat_free(ds_chat *c);

/* Why a record cannot be used (ds_chat_parse's status; stable ids used by
 * lint and rejects). */
typedef enum {
    DS_CHAT_OK = 0,
    DS_CHAT_BAD_JSON,     /* "json-malformed" */
    DS_CHAT_NO_MESSAGES,  /* "chat-no-messages": no messages field (or no prompt/completion) */
    DS_CHAT_NOT_LIST,     /* "chat-not-list": messages is not a list of objects */
    DS_CHAT_UNKNOWN_ROLE, /* "chat-unknown-role" */
    DS_CHAT_BAD_CONTENT,  /* "chat-bad-content": content missing, not a string nor a list of text parts */
    DS_CHAT_TEMPLATE,     /* "chat-template-refused": the template refuses the conversation */
    DS_CHAT_TOO_LARGE,    /* "chat-record-too-large": a line over DS_CHAT_MAX_RECORD bytes */
    DS_CHAT_STATUS_COUNT
} ds_chat_status;
const char *ds_chat_status_name(int s);
/* The longest record ds_chat_parse reads: its JSON tape costs <= 17x the
 * line (json_scan.c; jansson's tree, still used for the rare line the tape
 * leaves undecided, ~26x), per worker thread, so a line is bounded well
 * below the reader's 256 MiB; 8 MiB is ~2M tokens, far past any sequence
 * length. */
#define DS_CHAT_MAX_RECORD ((size_t)8 << 20)

typedef struct {
    ds_format format;           /* TEXT/CHAT/PROMPT_COMPLETION/AUTO */
    const char *messages_field; /* NULL: "messages" */
    const char *text_field;     /* format text (or auto falling back to text): NULL = "text" */
} ds_chat_parse_opts;

/* Parse one JSONL line. DS_CHAT_OK, another ds_chat_status with a short
 * reason in why (may be NULL), or a negative DS_ERR_NOMEM. For format text
 * (and auto on a record without messages/prompt) c->format is DS_FMT_TEXT
 * and buf holds the text field. */
int ds_chat_parse(const uint8_t *line, size_t len, const ds_chat_parse_opts *o, ds_chat *c, char *why, size_t whylen);

/* Python's == of messages i and j of the last ds_chat_parse (dicts compared
 * by keys and values, 1 == 1.0 == true): Mistral's templates list the tools
 * before every user message equal to the last one. */
int ds_chat_msg_equal(const ds_chat *c, size_t i, size_t j);

/* ---- templates (chat_template.c) */
typedef struct ds_chat_template ds_chat_template;
/* Built-in templates by name ("chatml", "qwen2", "qwen2.5", "qwen3", "llama3", "llama2",
 * "mistral", "mistral-v1", "mistral-v3", "mistral-tekken", "mistral-v7", "gemma", "phi3", "deepseek"); NULL when unknown. */
const ds_chat_template *ds_chat_template_find(const char *name);
const char *ds_chat_template_name(const ds_chat_template *t);
/* The i-th built-in (NULL past the end), for listings. */
const ds_chat_template *ds_chat_template_at(size_t i);
/* The family's Jinja source the built-in reproduces. */
const char *ds_chat_template_jinja(const ds_chat_template *t);
/* The built-in whose Jinja source equals JINJA up to whitespace outside
 * string literals and the spelling of a literal's escapes (a real newline
 * and backslash-n are the same string to Jinja), NULL when none does
 * (recognise, never guess). */
const ds_chat_template *ds_chat_template_recognise(const char *jinja, size_t len);
/* "auto": the chat_template of TOKENIZER_DIR/tokenizer_config.json (a
 * folder, or the folder of a tokenizer.json). DS_OK with *out, DS_ERR_IO
 * (no such file), DS_ERR_FORMAT (no chat_template, or one not recognised:
 * err lists the built-in names). */
int ds_chat_template_auto(const char *tokenizer_spec, const ds_chat_template **out, char *err, size_t errlen);

/* --chat-template ARG: a built-in's name, "auto" (ds_chat_template_auto of
 * tokenizer_spec), or a file holding a Jinja template (a .jinja file, or a
 * tokenizer_config.json with chat_template) recognised as a built-in.
 * DS_OK, or DS_ERR_IO / DS_ERR_FORMAT (err lists the built-in names). */
int ds_chat_template_resolve(const char *arg, const char *tokenizer_spec, const ds_chat_template **out, char *err,
                             size_t errlen);

/* Rendered conversation: the bytes, split into pieces. */
typedef struct {
    size_t off, len; /* in text */
    int special;     /* 1: a template special token (encoded as its id) */
} ds_chat_piece;
typedef struct {
    size_t off, len; /* a loss span of the rendered text */
} ds_chat_span;
typedef struct {
    uint8_t *text;
    size_t len, cap;
    ds_chat_piece *pieces;
    size_t n_pieces, pieces_cap;
    ds_chat_span *spans;
    size_t n_spans, spans_cap;
} ds_chat_rendered;
void ds_chat_rendered_free(ds_chat_rendered *r);

typedef struct {
    const char *bos_token, *eos_token; /* the template's bos_token / eos_token (NULL: template without) */
    ds_loss_on loss_on;
} ds_chat_render_opts;

/* Render c through t (add_generation_prompt false). DS_CHAT_OK, or
 * DS_CHAT_TEMPLATE with why (the template's raise_exception: roles that do
 * not alternate, a role it does not support), or DS_ERR_NOMEM. */
int ds_chat_render(const ds_chat_template *t, const ds_chat *c, const ds_chat_render_opts *o, ds_chat_rendered *r,
                   char *why, size_t whylen);

/* Ids and loss mask (one byte per id, 1 = target) of a rendering. A special
 * piece the tokenizer does not hold is DS_ERR_ARG (why names it); a
 * tokenizer refusal is its TK_ERR_* status. ids/mask are appended to. */
typedef struct {
    uint32_t *ids;
    uint8_t *mask;
    size_t len, cap;
} ds_chat_ids;
void ds_chat_ids_free(ds_chat_ids *v);
int ds_chat_encode(const struct tk_tokenizer *tok, const ds_chat_rendered *r, ds_chat_ids *out, char *why,
                   size_t whylen);

/* ---- fitting a conversation into a row of `budget` tokens (build's
 * --over-long for chat formats; lint's over-seq-len rule) */
typedef enum {
    DS_CHAT_FIT_KEEP = 0,      /* no fitting: the whole conversation (the packer chunks it) */
    DS_CHAT_FIT_TRUNCATE = 1,  /* cut the last assistant message (its end-of-turn kept only if it fits) */
    DS_CHAT_FIT_DROP = 2,      /* drop the sample */
    DS_CHAT_FIT_DROP_TURNS = 3 /* drop the oldest turns after the system message until it fits */
} ds_chat_fit_policy;
typedef enum {
    DS_CHAT_FATE_WHOLE = 0,     /* fits as it is */
    DS_CHAT_FATE_TRUNCATED,     /* cut inside its last assistant message */
    DS_CHAT_FATE_TURNS_DROPPED, /* fits after turns_dropped turns were removed */
    DS_CHAT_FATE_DROPPED,       /* over the budget and the policy cannot fit it (why says how) */
    DS_CHAT_FATE_NO_LOSS        /* what is left holds no target token (why says so) */
} ds_chat_fate;
typedef struct {
    ds_chat_fate fate;
    size_t tokens;        /* the whole conversation's tokens */
    size_t turns_dropped; /* DROP_TURNS: turns removed (lint: would remove) */
    size_t loss_tokens;   /* targets in out */
} ds_chat_fit_result;
/* Render c through t, encode, and fit into budget tokens by policy: out
 * holds the ids and mask kept (empty for DROPPED / NO_LOSS). A turn is a
 * user message and what follows it up to the next user message (the
 * assistant's answer, tool calls and results); the system message and, for
 * prompt-completion, the completion are never dropped. c is modified (turns
 * removed). DS_CHAT_OK with res, the render's DS_CHAT_TEMPLATE, DS_ERR_ARG
 * (a template special token the tokenizer lacks), a TK_ERR_* of the
 * tokenizer or DS_ERR_NOMEM; why says why for every status but OK. */
int ds_chat_fit(const struct tk_tokenizer *tok, const ds_chat_template *t, ds_chat *c, const ds_chat_render_opts *ro,
                ds_chat_fit_policy policy, size_t budget, ds_chat_rendered *r, ds_chat_ids *out,
                ds_chat_fit_result *res, char *why, size_t whylen);

/* bos/eos token text of a tokenizer for templates (tk_default_framing's
 * ids as text; "" when it has none), for ds_chat_render_opts. */
void ds_chat_framing_tokens(const struct tk_tokenizer *tok, char *bos, size_t boscap, char *eos, size_t eoscap);

#ifdef __cplusplus
}
#endif
#endif
