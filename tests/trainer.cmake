# Trainer system (train/tr.h): loader, planner, checkpoints, training runs.
mks_add_test(test_trainer SOURCES test_trainer.c LIBS tr kn ds tk LABELS cpu TIMEOUT 300)
mks_add_test(test_trainer_rss SOURCES test_trainer_rss.c LIBS tr kn ds tk LABELS cpu TIMEOUT 300)
mks_add_cli_test(cli_llmtrain cli_llmtrain.sh LABELS cpu TIMEOUT 600)
