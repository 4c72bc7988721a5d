# Chat records and templates (dataset/chat.c, chat_template.c; issue 28):
# rendering, ids and loss masks against transformers' apply_chat_template
# (fixtures from tests/data/chat/make_fixtures.py), parser refusals, `auto`.
mks_add_test(test_chat SOURCES test_chat.c LIBS ds tk PkgConfig::JANSSON LABELS cpu TIMEOUT 300)
# ds_chat_parse + render with each allocation failing in turn: DS_ERR_NOMEM or the unfailed rendering, never
# another (a scalar's truth used to read "true" when its position table could not be allocated).
mks_add_test(test_chat_nomem SOURCES test_chat_nomem.c LIBS ds tk LABELS cpu TIMEOUT 120)
mks_allow_skip(test_chat_nomem "replaces glibc malloc, which AddressSanitizer owns (skips in sanitizer builds only)")
# mkshards encode --format/--chat-template/--mask-out: ids and masks vs transformers, refusals, exit codes.
mks_add_cli_test(cli_chat cli_chat.sh LABELS cpu TIMEOUT 120)
# ds_chat_parse / render / encode on hostile records (seeds: tests/data/fuzz/make_chat_seeds.py).
mks_add_fuzz(chat SOURCE fuzz_chat.c LIBS ds tk CORPUS data/fuzz/chat MAX_LEN 8192)
# ds_build on chat records: rows and loss masks of each --over-long policy (truncate, drop, drop-turns,
# chunk), the no-target drop, bfd keeping conversations whole (a one-token-per-byte tokenizer made in the test).
mks_add_test(test_chat_build SOURCES test_chat_build.c LIBS ds tk LABELS cpu TIMEOUT 120)
# kill -9 a chat build (loss bits, drop-turns, bfd) at random points and resume: byte-identical (cli_shards_kill.sh).
mks_add_cli_test(cli_chat_kill cli_shards_kill.sh LABELS slow TIMEOUT 900)
set_tests_properties(cli_chat_kill PROPERTIES ENVIRONMENT "MKS_KILL_CHAT=1")
