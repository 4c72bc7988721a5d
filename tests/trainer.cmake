# Trainer system (train/tr.h): loader, planner, checkpoints, training runs.
mks_add_test(test_trainer SOURCES test_trainer.c LIBS tr kn ds tk LABELS cpu TIMEOUT 300)
mks_add_test(test_trainer_rss SOURCES test_trainer_rss.c LIBS tr kn ds tk LABELS cpu TIMEOUT 300)
mks_add_cli_test(cli_llmtrain cli_llmtrain.sh LABELS cpu TIMEOUT 600)
# the same check on a small plan, where fixed costs dominate
add_test(NAME test_trainer_rss_small COMMAND test_trainer_rss 8)
set_tests_properties(test_trainer_rss_small PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300)
